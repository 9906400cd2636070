//! [`EvalRunStore`] on PostgreSQL: one `bdk_eval_runs` row per run (the snapshot as `jsonb`),
//! so a run started on one replica is listed and polled on every other.
//!
//! A running run belongs to the replica that saves it: its row carries that replica's id and an
//! `expires_at` that the replica's heartbeat moves forward with its session leases. A row left
//! `running` past `expires_at` belongs to a replica that died; [`claim_interrupted`] takes such
//! rows over in one `UPDATE` (row locks make one replica the winner), and the winner marks them
//! failed. Saves are fenced on the owner, so a stalled replica that resumes after its run was
//! recovered cannot overwrite the verdict. Starting a run checks for a live running one under a
//! per-agent advisory lock (its key names the schema, as every lock here does), so one run at a
//! time holds for the whole group.
//!
//! [`claim_interrupted`]: EvalRunStore::claim_interrupted

use std::time::Duration;

use bdk_store::evals::is_run_id;
use bdk_store::{BoxFuture, Error, EvalRunRecord, EvalRunStore, Result};
use serde_json::Value;

use crate::error::db;
use crate::store::PgStore;

impl PgStore {
    /// This agent's saved eval runs.
    pub fn eval_runs(&self) -> std::sync::Arc<dyn EvalRunStore> {
        std::sync::Arc::new(self.clone())
    }

    fn run_lease_millis(&self) -> f64 {
        self.db.session_lease.as_millis() as f64
    }

    /// Runs [`SAVE`] for `run` on `client` (a connection or a transaction): the rows written.
    async fn save_row(&self, client: &impl deadpool_postgres::GenericClient, run: &EvalRunRecord) -> Result<u64> {
        let lease_millis = self.run_lease_millis();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
            [&&*self.agent, &run.run_id, &run.status, &run.started_at, &run.snapshot, &self.db.replica, &lease_millis];
        client.execute(SAVE, &params).await.map_err(db)
    }
}

/// The upsert of a run's snapshot, fenced on the owner: a row another replica took over is left
/// alone (0 rows).
const SAVE: &str = "INSERT INTO bdk_eval_runs AS r (agent, run_id, status, started_at, snapshot, replica, expires_at) \
     VALUES ($1, $2, $3, $4, $5, $6, now() + $7::float8 * interval '1 millisecond') \
     ON CONFLICT (agent, run_id) DO UPDATE \
     SET status = EXCLUDED.status, snapshot = EXCLUDED.snapshot, expires_at = EXCLUDED.expires_at \
     WHERE r.replica = EXCLUDED.replica";

impl EvalRunStore for PgStore {
    fn begin(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<Option<String>>> {
        Box::pin(async move {
            let mut client = self.db.client().await?;
            let tx = client.transaction().await.map_err(db)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('bdk_eval_runs:' || current_schema() || ':' || $1))",
                &[&&*self.agent],
            )
            .await
            .map_err(db)?;
            let running = tx
                .query_opt(
                    "SELECT run_id FROM bdk_eval_runs \
                     WHERE agent = $1 AND status = 'running' AND expires_at >= now() AND run_id <> $2 LIMIT 1",
                    &[&&*self.agent, &run.run_id],
                )
                .await
                .map_err(db)?;
            if let Some(row) = running {
                tx.rollback().await.map_err(db)?;
                return Ok(Some(row.get(0)));
            }
            self.save_row(&tx, &run).await?;
            tx.commit().await.map_err(db)?;
            Ok(None)
        })
    }

    fn save(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let saved = self.save_row(&client, &run).await?;
            if saved == 0 {
                return Err(Error::Backend(format!(
                    "eval run {} was taken over by another replica (this one stopped renewing it)",
                    run.run_id
                )));
            }
            Ok(())
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        Box::pin(async move {
            if !is_run_id(run_id) {
                return Ok(None);
            }
            let client = self.db.client().await?;
            let row = client
                .query_opt(
                    "SELECT snapshot FROM bdk_eval_runs WHERE agent = $1 AND run_id = $2",
                    &[&&*self.agent, &run_id],
                )
                .await
                .map_err(db)?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "SELECT snapshot FROM bdk_eval_runs WHERE agent = $1 ORDER BY started_at DESC, run_id DESC",
                    &[&&*self.agent],
                )
                .await
                .map_err(db)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn claim_interrupted(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(
                    "UPDATE bdk_eval_runs SET replica = $2, expires_at = now() + $3::float8 * interval '1 millisecond' \
                     WHERE agent = $1 AND status = 'running' AND expires_at < now() RETURNING snapshot",
                    &[&&*self.agent, &self.db.replica, &self.run_lease_millis()],
                )
                .await
                .map_err(db)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn sweep_period(&self) -> Option<Duration> {
        Some(self.db.session_lease)
    }

    fn request_cancel<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let asked = client
                .execute(
                    "UPDATE bdk_eval_runs SET cancel_requested = true \
                     WHERE agent = $1 AND run_id = $2 AND status = 'running'",
                    &[&&*self.agent, &run_id],
                )
                .await
                .map_err(db)?;
            Ok(asked == 1)
        })
    }

    fn cancel_requested<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let row = client
                .query_opt(
                    "SELECT cancel_requested FROM bdk_eval_runs WHERE agent = $1 AND run_id = $2",
                    &[&&*self.agent, &run_id],
                )
                .await
                .map_err(db)?;
            Ok(row.is_some_and(|row| row.get(0)))
        })
    }
}
