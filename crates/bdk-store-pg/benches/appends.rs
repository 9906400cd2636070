//! Durable appends per second into PostgreSQL: `S` sessions appending concurrently, each append a
//! batch of `B` events (what the engine does with streamed deltas), on a fresh schema of the
//! database `BDK_TEST_DATABASE_URL` names. Also the latency of one single-event append (the
//! floor of a text turn's host overhead: every event written is one such round trip or a share
//! of a batch), and how many appends the replica's group commit put in each transaction.
//! Prints figures; never fails on a number.
//!
//! `cargo bench -p bdk-store-pg --bench appends` (add `-- --quick` for a short run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};
use bdk_store::{EventLog, NewEvent, SessionRecord, SessionStore};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};

fn delta(i: usize) -> NewEvent {
    NewEvent::new(EventData::MessageAppended(TextDelta { delta: format!("token {i} of a streamed reply ") }))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let Some(db) = bdk_test_support::postgres::fresh("bench_appends").await else { return };
        let options = PgOptions { schema: Some(db.schema().to_owned()), pool_size: 16, ..PgOptions::default() };
        let database = PgDatabase::connect(db.base_url(), &options).await.unwrap();
        let local = std::env::temp_dir().join(format!("bdk-bench-{}", std::process::id()));
        let store = PgStore::new(database, "bench", local);
        let per_session = if quick { 2_000 } else { 20_000 };

        for (sessions, batch) in [(1, 1), (8, 1), (64, 1), (8, 50), (16, 100), (32, 200)] {
            let ids: Vec<SessionId> = (0..sessions).map(|_| SessionId::generate()).collect();
            for id in &ids {
                store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "bench", "p")).await.unwrap();
            }
            let events = if batch == 1 { per_session / 10 } else { per_session };
            let started = Instant::now();
            let mut tasks = Vec::new();
            for id in ids {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    let mut written = 0;
                    while written < events {
                        let n = batch.min(events - written);
                        store.append(&id, (written..written + n).map(delta).collect()).await.unwrap();
                        written += n;
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let elapsed = started.elapsed();
            let total = sessions * events;
            println!(
                "appends: {sessions:>2} sessions x batches of {batch:>3}: {total:>7} events in {:>6.2?} = {:>8.0} events/s",
                elapsed,
                total as f64 / elapsed.as_secs_f64()
            );
        }

        // One single-event append at a time: its latency distribution.
        let id = SessionId::generate();
        store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "bench", "p")).await.unwrap();
        let mut samples: Vec<Duration> = Vec::new();
        for i in 0..if quick { 200 } else { 2000 } {
            let t = Instant::now();
            store.append(&id, vec![delta(i)]).await.unwrap();
            samples.push(t.elapsed());
        }
        samples.sort();
        let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize];
        println!("single append latency: p50 {:?}  p90 {:?}  p99 {:?}", pct(0.5), pct(0.9), pct(0.99));
        let (batches, appends) = store.database().append_batches();
        println!("group commit: {appends} appends in {batches} transactions");
    });
}
