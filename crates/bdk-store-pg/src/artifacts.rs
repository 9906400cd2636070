//! [`ArtifactStore`] on PostgreSQL: one `bdk_artifacts` row per artifact (the record as JSON
//! text, the content in `bytea`, up to [`bdk_store::artifacts::MAX_CONTENT_BYTES`]). A tag is one
//! transaction under an advisory lock per agent (and schema), so two tags of one key make one record and the
//! retention cap holds after every tag on every replica; record and content are written
//! together. What a tag makes of the record is the trait's ([`ArtifactTag::apply`]).

use bdk_store::artifacts::is_artifact_id;
use bdk_store::{ArtifactQuery, ArtifactRecord, ArtifactStore, ArtifactTag, BoxFuture, Result, Tagged};
use chrono::Utc;

use crate::error::{corrupt, db, encode};
use crate::store::PgStore;

fn parse(text: &str) -> Result<ArtifactRecord> {
    serde_json::from_str(text).map_err(|e| corrupt("an artifact record", e))
}

impl ArtifactStore for PgStore {
    fn tag(&self, tag: ArtifactTag, max: Option<usize>) -> BoxFuture<'_, Result<Tagged>> {
        Box::pin(async move {
            tag.check_size()?;
            let mut client = self.db.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('bdk_artifacts:' || current_schema() || ':' || $1))",
                &[&&*self.agent],
            )
            .await
            .map_err(db)?;
            let existing = tx
                .query_opt(
                    "SELECT record FROM bdk_artifacts WHERE agent = $1 AND principal = $2 AND kind = $3 AND key = $4",
                    &[&&*self.agent, &tag.principal, &tag.kind, &tag.key],
                )
                .await
                .map_err(db)?;
            let existing = existing.map(|row| parse(row.get(0))).transpose()?;
            let (record, created, content) = tag.apply(existing, Utc::now());
            let text = serde_json::to_string(&record).map_err(encode)?;
            let session = record.session_id.as_ref().map(|s| s.as_str().to_owned());
            tx.execute(
                "INSERT INTO bdk_artifacts (agent, id, principal, kind, key, session_id, record, content, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (agent, id) DO UPDATE SET session_id = EXCLUDED.session_id, record = EXCLUDED.record, \
                 content = coalesce(EXCLUDED.content, bdk_artifacts.content), updated_at = EXCLUDED.updated_at",
                &[
                    &&*self.agent,
                    &record.id,
                    &record.principal,
                    &record.kind,
                    &record.key,
                    &session,
                    &text,
                    &content,
                    &record.updated_at,
                ],
            )
            .await
            .map_err(db)?;
            let mut evicted = Vec::new();
            if let Some(max) = max {
                // Every record but the `max` newest-updated (the one just tagged is the newest).
                let rows = tx
                    .query(
                        "DELETE FROM bdk_artifacts WHERE agent = $1 AND id IN (SELECT id FROM bdk_artifacts \
                         WHERE agent = $1 ORDER BY updated_at DESC, id DESC OFFSET $2) RETURNING id",
                        &[&&*self.agent, &(max as i64)],
                    )
                    .await
                    .map_err(db)?;
                evicted = rows.iter().map(|row| row.get(0)).collect();
            }
            tx.commit().await.map_err(db)?;
            Ok(Tagged { record, created, evicted })
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ArtifactRecord>>> {
        Box::pin(async move {
            if !is_artifact_id(id) {
                return Ok(None);
            }
            let client = self.db.client().await?;
            let row = client
                .query_opt("SELECT record FROM bdk_artifacts WHERE agent = $1 AND id = $2", &[&&*self.agent, &id])
                .await
                .map_err(db)?;
            row.map(|row| parse(row.get(0))).transpose()
        })
    }

    fn list<'a>(&'a self, query: &'a ArtifactQuery) -> BoxFuture<'a, Result<Vec<ArtifactRecord>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let session = query.session_id.as_ref().map(|s| s.as_str().to_owned());
            let limit = query.limit.map(|l| l.min(i64::MAX as usize) as i64);
            let rows = client
                .query(
                    "SELECT record FROM bdk_artifacts WHERE agent = $1 \
                     AND ($2::text IS NULL OR principal = $2) AND ($3::text IS NULL OR kind = $3) \
                     AND ($4::text IS NULL OR session_id = $4) \
                     ORDER BY updated_at DESC, id DESC LIMIT $5",
                    &[&&*self.agent, &query.principal, &query.kind, &session, &limit],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|row| parse(row.get(0))).collect()
        })
    }

    fn content<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        Box::pin(async move {
            if !is_artifact_id(id) {
                return Ok(None);
            }
            let client = self.db.client().await?;
            let row = client
                .query_opt("SELECT content FROM bdk_artifacts WHERE agent = $1 AND id = $2", &[&&*self.agent, &id])
                .await
                .map_err(db)?;
            Ok(row.and_then(|row| row.get::<_, Option<Vec<u8>>>(0)))
        })
    }
}
