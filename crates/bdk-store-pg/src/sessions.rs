//! [`SessionStore`] on PostgreSQL: one row per session, its record as JSON text. Deleting a
//! session removes its events and workspace (foreign keys) and its scoped kv and files (here, in
//! the same transaction).

use bdk_protocol::SessionId;
use bdk_store::{BoxFuture, Error, Result, SessionRecord, SessionStore};

use crate::db::execute_relaxed;
use crate::error::{corrupt, db, encode};
use crate::store::PgStore;

const UPDATE: &str = "UPDATE bdk_sessions SET record = $3 WHERE agent = $1 AND id = $2";

pub(crate) fn parse_record(text: &str) -> Result<SessionRecord> {
    serde_json::from_str(text).map_err(|e| corrupt("a session record", e))
}

impl SessionStore for PgStore {
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            // Not waited for: every creator appends the session's first events next, and that
            // durable commit flushes this one too (the WAL is flushed in order). A crash before
            // it loses a session nobody was told about.
            let inserted = execute_relaxed(
                &self.db,
                &client,
                "INSERT INTO bdk_sessions (agent, id, record) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&&*self.agent, &record.id.as_str(), &body],
            )
            .await?;
            if inserted == 0 {
                return Err(Error::SessionExists(record.id));
            }
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<Option<SessionRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let statement = client
                .prepare_cached("SELECT record FROM bdk_sessions WHERE agent = $1 AND id = $2")
                .await
                .map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &id.as_str()]).await.map_err(db)?;
            row.map(|row| parse_record(row.get(0))).transpose()
        })
    }

    fn update(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            let statement = client.prepare_cached(UPDATE).await.map_err(db)?;
            let updated = client.execute(&statement, &[&&*self.agent, &record.id.as_str(), &body]).await.map_err(db)?;
            self.db.count_commit(true);
            if updated == 0 {
                return Err(Error::SessionNotFound(record.id));
            }
            Ok(())
        })
    }

    /// The status a listing shows: written without waiting for the WAL flush (recovery
    /// re-derives it from the log, and the next durable commit flushes it anyway).
    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            let updated =
                execute_relaxed(&self.db, &client, UPDATE, &[&&*self.agent, &record.id.as_str(), &body]).await?;
            if updated == 0 {
                return Err(Error::SessionNotFound(record.id));
            }
            Ok(())
        })
    }

    /// The database picks the sessions whose record says `running` or has no status, so
    /// start-up transfers and parses only those.
    fn list_open(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT record FROM bdk_sessions WHERE agent = $1 \
                     AND coalesce(record::jsonb ->> 'status', 'running') = 'running' ORDER BY seq",
                    &[&&*self.agent],
                )
                .await
                .map_err(db)?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                match parse_record(row.get(0)) {
                    Ok(record) => out.push(record),
                    Err(error) => tracing::warn!(%error, "skipping an unreadable session record"),
                }
            }
            Ok(out)
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query("SELECT record FROM bdk_sessions WHERE agent = $1 ORDER BY seq", &[&&*self.agent])
                .await
                .map_err(db)?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                match parse_record(row.get(0)) {
                    Ok(record) => out.push(record),
                    Err(error) => tracing::warn!(%error, "skipping an unreadable session record"),
                }
            }
            Ok(out)
        })
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&&*self.agent, &id.as_str()];
            let deleted =
                tx.execute("DELETE FROM bdk_sessions WHERE agent = $1 AND id = $2", &params).await.map_err(db)?;
            tx.execute("DELETE FROM bdk_kv WHERE agent = $1 AND scope = $2", &params).await.map_err(db)?;
            tx.execute("DELETE FROM bdk_files WHERE agent = $1 AND scope = $2", &params).await.map_err(db)?;
            tx.commit().await.map_err(db)?;
            self.db.count_commit(true);
            self.db.notifier.bump(&self.agent, id.as_str());
            self.remove_local_session(id).await;
            Ok(deleted > 0)
        })
    }
}
