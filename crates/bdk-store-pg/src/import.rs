//! `bdk migrate --from-fs`: copies one agent's filesystem state directory into the database:
//! sessions with their events exactly as logged (indices and times kept), session and agent kv
//! and files, workspaces, firings, reminders and saved eval runs (`evals/<runId>/run.json`; a
//! run's own `state/` folder stays behind, as it does on every replica). Sessions and runs
//! already in the database are skipped, so an interrupted import can be run again.

use std::path::Path;

use bdk_store::{
    DataScope, EventLog, FsEvalRuns, FsStore, HostDataStore, KvStore, SessionStore, TimedKind, TimedStore,
};

use crate::error::{db, encode};
use crate::store::PgStore;

/// What an import copied.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImportReport {
    pub sessions: usize,
    pub skipped_sessions: usize,
    pub events: u64,
    pub kv: usize,
    pub files: usize,
    pub workspaces: usize,
    pub firings: usize,
    pub reminders: usize,
    pub eval_runs: usize,
    pub skipped_eval_runs: usize,
}

/// Rows inserted per statement when copying a log.
const CHUNK: usize = 1000;

impl PgStore {
    /// Copies the filesystem state `from` (one agent's state directory) into this agent's rows.
    pub async fn import_fs(&self, from: &FsStore) -> bdk_store::Result<ImportReport> {
        let mut report = ImportReport::default();
        for record in SessionStore::list(from).await? {
            let id = record.id.clone();
            match SessionStore::create(self, record).await {
                Ok(()) => {}
                Err(bdk_store::Error::SessionExists(_)) => {
                    report.skipped_sessions += 1;
                    continue;
                }
                Err(error) => return Err(error),
            }
            let events = EventLog::read(from, &id, 0, None).await?;
            for chunk in events.chunks(CHUNK) {
                let first = chunk.first().map_or(0, |e| e.index as i64);
                let bodies =
                    chunk.iter().map(|e| serde_json::to_string(e).map_err(encode)).collect::<Result<Vec<_>, _>>()?;
                let client = self.db.client().await?;
                client
                    .execute(
                        "INSERT INTO bdk_events (agent, session_id, idx, body) \
                         SELECT $1, $2, $3 + u.o - 1, u.b FROM unnest($4::text[]) WITH ORDINALITY AS u(b, o)",
                        &[&&*self.agent, &id.as_str(), &first, &bodies],
                    )
                    .await
                    .map_err(db)?;
                report.events += chunk.len() as u64;
            }
            let scope = DataScope::Session(id.clone());
            report.kv += copy_kv(from, self, &scope).await?;
            report.files += copy_files(from, self, &scope).await?;
            let workspace = from.layout().workspace_dir(&id);
            if workspace.is_dir() && self.save_workspace_from(&id, &workspace, None).await?.is_some() {
                report.workspaces += 1;
            }
            report.sessions += 1;
        }
        for key in KvStore::keys(from, "").await? {
            if let Some(value) = KvStore::get(from, &key).await? {
                KvStore::put(self, &key, value).await?;
                report.kv += 1;
            }
        }
        report.files += copy_files(from, self, &DataScope::Agent).await?;
        for reminder in TimedStore::reminders(from).await? {
            TimedStore::put_reminder(self, reminder).await?;
            report.reminders += 1;
        }
        for kind in [TimedKind::Schedule, TimedKind::Reminder] {
            for owner in firing_owners(from.layout().root(), kind) {
                for firing in TimedStore::firings(from, kind, &owner).await? {
                    let status = firing.status;
                    if TimedStore::claim_firing(self, firing.clone()).await? {
                        if status != bdk_store::FiringStatus::Claimed {
                            TimedStore::update_firing(self, firing).await?;
                        }
                        report.firings += 1;
                    }
                }
            }
        }
        let (copied, skipped) = self.import_eval_runs(&FsEvalRuns::new(from.layout().root().join("evals"))).await?;
        report.eval_runs = copied;
        report.skipped_eval_runs = skipped;
        Ok(report)
    }

    /// Copies saved eval runs; a run already in the database is skipped. A run the files say is
    /// `running` gets an expired owner, so the first replica that recovers runs marks it failed,
    /// as a restart of the filesystem host would.
    async fn import_eval_runs(&self, from: &FsEvalRuns) -> bdk_store::Result<(usize, usize)> {
        let (mut copied, mut skipped) = (0, 0);
        let client = self.db.client().await?;
        for run in from.read_all()? {
            let inserted = client
                .execute(
                    "INSERT INTO bdk_eval_runs (agent, run_id, status, started_at, snapshot, replica, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (agent, run_id) DO NOTHING",
                    &[&&*self.agent, &run.run_id, &run.status, &run.started_at, &run.snapshot, &"import"],
                )
                .await
                .map_err(db)?;
            if inserted == 1 { copied += 1 } else { skipped += 1 }
        }
        Ok((copied, skipped))
    }
}

async fn copy_kv(from: &FsStore, to: &PgStore, scope: &DataScope) -> bdk_store::Result<usize> {
    let mut n = 0;
    for key in from.kv_keys(scope, "").await? {
        if let Some(value) = from.kv_get(scope, &key).await? {
            to.kv_put(scope, &key, value).await?;
            n += 1;
        }
    }
    Ok(n)
}

async fn copy_files(from: &FsStore, to: &PgStore, scope: &DataScope) -> bdk_store::Result<usize> {
    let mut n = 0;
    for entry in from.file_list(scope, "").await? {
        if let Some(bytes) = from.file_read(scope, &entry.path).await? {
            to.file_write(scope, &entry.path, bytes).await?;
            n += 1;
        }
    }
    Ok(n)
}

/// The owners with firing rows on disk (`timed/firings/<kind>/<owner>/`).
fn firing_owners(root: &Path, kind: TimedKind) -> Vec<String> {
    let dir = root.join("timed").join("firings").join(kind.as_str());
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut owners: Vec<String> =
        entries.filter_map(|e| e.ok()).filter_map(|e| e.file_name().to_str().map(str::to_owned)).collect();
    owners.sort();
    owners
}
