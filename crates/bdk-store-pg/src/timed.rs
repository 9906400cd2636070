//! [`TimedStore`] on PostgreSQL. A claim is `INSERT ... ON CONFLICT DO NOTHING` on the primary
//! key `(agent, kind, owner, due_at)`: of any number of replicas claiming one due time, exactly
//! one inserts the row and runs the firing. Each owner keeps its newest [`KEEP_FIRINGS`] rows.

use bdk_store::rules::check_plain_name;
use bdk_store::{BoxFuture, Error, FiringRecord, FiringStatus, ReminderRecord, Result, TimedKind, TimedStore};

use crate::error::{corrupt, db, encode};
use crate::store::PgStore;

/// Firing rows kept per owner (as on disk).
pub const KEEP_FIRINGS: i64 = 200;

fn parse_firing(text: &str) -> Result<FiringRecord> {
    serde_json::from_str(text).map_err(|e| corrupt("a firing", e))
}

impl TimedStore for PgStore {
    fn claim_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async move {
            check_plain_name(&record.owner)?;
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            let n = client
                .execute(
                    "INSERT INTO bdk_firings (agent, kind, owner, due_at, status, record) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT DO NOTHING",
                    &[&&*self.agent, &record.kind.as_str(), &record.owner, &record.due_at, &record.status.as_str(), &body],
                )
                .await
                .map_err(db)?;
            Ok(n == 1)
        })
    }

    fn update_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            check_plain_name(&record.owner)?;
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            let n = client
                .execute(
                    "UPDATE bdk_firings SET status = $5, record = $6 \
                     WHERE agent = $1 AND kind = $2 AND owner = $3 AND due_at = $4",
                    &[
                        &&*self.agent,
                        &record.kind.as_str(),
                        &record.owner,
                        &record.due_at,
                        &record.status.as_str(),
                        &body,
                    ],
                )
                .await
                .map_err(db)?;
            if n == 0 {
                return Err(Error::Backend(format!(
                    "no claimed firing of {} {} due {}",
                    record.kind.as_str(),
                    record.owner,
                    record.due_at
                )));
            }
            if record.status != FiringStatus::Claimed {
                client
                    .execute(
                        "DELETE FROM bdk_firings WHERE agent = $1 AND kind = $2 AND owner = $3 AND due_at < \
                         (SELECT due_at FROM bdk_firings WHERE agent = $1 AND kind = $2 AND owner = $3 \
                          ORDER BY due_at DESC OFFSET $4::bigint - 1 LIMIT 1)",
                        &[&&*self.agent, &record.kind.as_str(), &record.owner, &KEEP_FIRINGS],
                    )
                    .await
                    .map_err(db)?;
            }
            Ok(())
        })
    }

    fn firings<'a>(&'a self, kind: TimedKind, owner: &'a str) -> BoxFuture<'a, Result<Vec<FiringRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT record FROM bdk_firings WHERE agent = $1 AND kind = $2 AND owner = $3 ORDER BY due_at",
                    &[&&*self.agent, &kind.as_str(), &owner],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|r| parse_firing(r.get(0))).collect()
        })
    }

    fn open_firings(&self) -> BoxFuture<'_, Result<Vec<FiringRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT record FROM bdk_firings WHERE agent = $1 AND status = 'claimed' ORDER BY due_at",
                    &[&&*self.agent],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|r| parse_firing(r.get(0))).collect()
        })
    }

    fn put_reminder(&self, record: ReminderRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            check_plain_name(&record.id)?;
            let body = serde_json::to_string(&record).map_err(encode)?;
            let client = self.db.client().await?;
            client
                .execute(
                    "INSERT INTO bdk_reminders (agent, id, created_at, record) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (agent, id) DO UPDATE SET created_at = EXCLUDED.created_at, record = EXCLUDED.record",
                    &[&&*self.agent, &record.id, &record.created_at, &body],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn reminder<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ReminderRecord>>> {
        Box::pin(async move {
            if check_plain_name(id).is_err() {
                return Ok(None);
            }
            let client = self.db.client().await?;
            let row = client
                .query_opt("SELECT record FROM bdk_reminders WHERE agent = $1 AND id = $2", &[&&*self.agent, &id])
                .await
                .map_err(db)?;
            row.map(|r| serde_json::from_str(r.get(0)).map_err(|e| corrupt("a reminder", e))).transpose()
        })
    }

    fn reminders(&self) -> BoxFuture<'_, Result<Vec<ReminderRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT record FROM bdk_reminders WHERE agent = $1 ORDER BY created_at, id COLLATE \"C\"",
                    &[&&*self.agent],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|r| serde_json::from_str(r.get(0)).map_err(|e| corrupt("a reminder", e))).collect()
        })
    }
}
