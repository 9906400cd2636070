//! Saved eval runs on the database, across replicas: a run begun on one replica is listed and
//! read on another, which may not begin a second one while it runs; a live replica's run is
//! never claimed as interrupted, a dead one's (lease past) is claimed by exactly one replica,
//! and the dead replica's late save is refused; a cancel asked on one replica is seen by the
//! runner; `bdk migrate --from-fs` copies the run files once.

use std::sync::Arc;
use std::time::Duration;

use bdk_store::{EvalRunRecord, EvalRunStore, FsEvalRuns};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use serde_json::{Value, json};
use tokio_postgres::NoTls;

use super::support::PgInstance;

/// A replica of agent `agent` whose leases last `lease` (renewed every third of it).
async fn replica(db: &TestDb, lease: Duration, local: &std::path::Path) -> PgStore {
    let options =
        PgOptions { schema: Some(db.schema().to_owned()), pool_size: 4, session_lease: lease, ..PgOptions::default() };
    PgStore::new(PgDatabase::connect(db.base_url(), &options).await.unwrap(), "agent", local)
}

fn run(id: &str, status: &str, started: &str) -> EvalRunRecord {
    EvalRunRecord::from_snapshot(json!({
        "runId": id, "agent": "agent", "status": status, "startedAt": started, "cases": [{"id": "smoke"}],
    }))
    .unwrap()
}

async fn raw(db: &TestDb) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&db.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

fn ids(runs: &[Value]) -> Vec<&str> {
    runs.iter().map(|r| r["runId"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_begun_on_one_replica_is_seen_and_guarded_on_another() {
    let Some(db) = postgres::fresh("eval_runs").await else { return };
    let local = tempfile::tempdir().unwrap();
    let a = replica(&db, Duration::from_secs(10), local.path()).await;
    let b = replica(&db, Duration::from_secs(10), local.path()).await;

    let old = run("evr_1old", "completed", "2026-01-01T00:00:00Z");
    assert_eq!(a.begin(old.clone()).await.unwrap(), None);
    let live = run("evr_2live", "running", "2026-01-02T00:00:00Z");
    assert_eq!(a.begin(live.clone()).await.unwrap(), None);

    // b lists newest first and reads each run as a saved it.
    assert_eq!(ids(&b.list().await.unwrap()), ["evr_2live", "evr_1old"]);
    assert_eq!(b.load("evr_2live").await.unwrap(), Some(live.snapshot.clone()));
    assert_eq!(b.load("evr_nope").await.unwrap(), None);
    assert_eq!(b.load("../x").await.unwrap(), None);
    // One run at a time for the group: b may not begin another while a runs one.
    assert_eq!(
        b.begin(run("evr_3second", "running", "2026-01-03T00:00:00Z")).await.unwrap().as_deref(),
        Some("evr_2live")
    );
    assert_eq!(ids(&b.list().await.unwrap()).len(), 2, "a refused begin writes nothing");
    // a's progress is b's to read; a live run is nobody's to recover.
    let mut progressed = live.clone();
    progressed.snapshot["cases"][0]["status"] = json!("passed");
    a.save(progressed.clone()).await.unwrap();
    assert_eq!(b.load("evr_2live").await.unwrap(), Some(progressed.snapshot));
    assert!(b.claim_interrupted().await.unwrap().is_empty());
    assert_eq!(b.sweep_period(), Some(Duration::from_secs(10)));

    // A cancel asked on b reaches a; a finished run cannot be asked.
    assert!(!a.cancel_requested("evr_2live").await.unwrap());
    assert!(b.request_cancel("evr_2live").await.unwrap());
    assert!(a.cancel_requested("evr_2live").await.unwrap());
    assert!(!b.request_cancel("evr_1old").await.unwrap());
    a.save(run("evr_2live", "cancelled", "2026-01-02T00:00:00Z")).await.unwrap();
    assert_eq!(b.begin(run("evr_3second", "running", "2026-01-03T00:00:00Z")).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_replicas_run_is_kept_and_a_dead_ones_is_claimed_once() {
    let Some(db) = postgres::fresh("eval_orphans").await else { return };
    let local = tempfile::tempdir().unwrap();
    let sql = raw(&db).await;

    // a renews every 100 ms: its run outlives many of its own lease periods.
    let a = replica(&db, Duration::from_millis(300), local.path()).await;
    let b = replica(&db, Duration::from_millis(300), local.path()).await;
    a.begin(run("evr_1alive", "running", "2026-01-01T00:00:00Z")).await.unwrap();
    let first: chrono::DateTime<chrono::Utc> =
        sql.query_one("SELECT expires_at FROM bdk_eval_runs", &[]).await.unwrap().get(0);
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let row = sql.query_one("SELECT expires_at, expires_at > now() FROM bdk_eval_runs", &[]).await.unwrap();
            let (at, live): (chrono::DateTime<chrono::Utc>, bool) = (row.get(0), row.get(1));
            // Renewed past where the first lease ended, and that moment is behind us.
            if at > first && chrono::Utc::now() > first && live {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a's heartbeat renews its run");
    assert!(b.claim_interrupted().await.unwrap().is_empty(), "a live replica's run is not recovered");
    a.save(run("evr_1alive", "completed", "2026-01-01T00:00:00Z")).await.unwrap();

    // d renews every 20 minutes, so once its lease is expired by hand it stays expired: d is
    // as good as dead. Three replicas race to recover its run.
    let d = replica(&db, Duration::from_secs(3600), local.path()).await;
    d.begin(run("evr_2dead", "running", "2026-01-02T00:00:00Z")).await.unwrap();
    let c = replica(&db, Duration::from_millis(300), local.path()).await;
    let e = replica(&db, Duration::from_millis(300), local.path()).await;
    assert!(c.claim_interrupted().await.unwrap().is_empty(), "not before the lease is past");
    sql.batch_execute("UPDATE bdk_eval_runs SET expires_at = now() - interval '1 second' WHERE run_id = 'evr_2dead'")
        .await
        .unwrap();
    let (x, y, z) = tokio::join!(b.claim_interrupted(), c.claim_interrupted(), e.claim_interrupted());
    let claimed: Vec<Value> = [x, y, z].into_iter().flat_map(Result::unwrap).collect();
    assert_eq!(ids(&claimed), ["evr_2dead"], "exactly one replica claims it");
    let winner = [&b, &c, &e];
    let mut saved = 0;
    for replica in winner {
        // Only the claimant's verdict is accepted.
        if replica.save(run("evr_2dead", "failed", "2026-01-02T00:00:00Z")).await.is_ok() {
            saved += 1;
        }
    }
    assert_eq!(saved, 1);
    assert!(b.claim_interrupted().await.unwrap().is_empty(), "a failed run is not claimed again");
    // The dead replica, resumed, cannot overwrite the verdict.
    let late = d.save(run("evr_2dead", "completed", "2026-01-02T00:00:00Z")).await;
    assert!(late.unwrap_err().to_string().contains("taken over"));
    assert_eq!(b.load("evr_2dead").await.unwrap().unwrap()["status"], "failed");
}

#[tokio::test]
async fn saved_run_files_import_once() {
    let Some(db) = postgres::fresh("eval_import").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let fs = bdk_store::FsStore::open(dir.path().join("agent")).unwrap();
    let files = FsEvalRuns::new(dir.path().join("agent").join("evals"));
    files.write(&run("evr_1done", "completed", "2026-01-01T00:00:00Z")).unwrap();
    files.write(&run("evr_2left", "running", "2026-01-02T00:00:00Z")).unwrap();
    std::fs::create_dir_all(files.dir().join("evr_3empty")).unwrap();

    let fx = PgInstance::open(Arc::new(db), Arc::new(tempfile::tempdir().unwrap())).await;
    let report = fx.store.import_fs(&fs).await.unwrap();
    assert_eq!((report.eval_runs, report.skipped_eval_runs), (2, 0));
    assert_eq!(ids(&fx.store.list().await.unwrap()), ["evr_2left", "evr_1done"]);
    assert_eq!(fx.store.load("evr_1done").await.unwrap(), files.read("evr_1done").unwrap());
    // A run the files left running is the first recovery's to mark failed.
    assert_eq!(ids(&fx.store.claim_interrupted().await.unwrap()), ["evr_2left"]);
    let again = fx.store.import_fs(&fs).await.unwrap();
    assert_eq!((again.eval_runs, again.skipped_eval_runs), (0, 2));
}
