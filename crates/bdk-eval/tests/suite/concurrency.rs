//! `max_concurrency`, the per-case timeout and cancellation: attempts overlap up to the limit
//! and never beyond it (counted by model calls in flight in their sessions, not by timing), a
//! hung turn fails its case with the reason and is stopped, and a cancelled batch stops its
//! running sessions and reports what finished.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bdk_eval::{Batch, CaseStatus, Outcome, RunStatus, RunStore};
use bdk_model::{FinishReason, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderInfo};
use bdk_test_support::Reply;
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::support::*;

/// Answers each call once its partner (calls pair up 0-1, 2-3, ...) has arrived too, and counts
/// how many calls are in flight at once.
#[derive(Debug)]
struct Pairing {
    arrived: watch::Sender<usize>,
    in_flight: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
}

impl ModelProvider for Pairing {
    fn info(&self) -> ProviderInfo {
        ProviderInfo { provider: "test".into(), model: "pairing".into(), base_url: None }
    }

    fn stream(&self, _request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let n = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        let mut index = 0;
        self.arrived.send_modify(|a| {
            index = *a;
            *a += 1;
        });
        let mut arrived = self.arrived.subscribe();
        let in_flight = self.in_flight.clone();
        let partner = index / 2 * 2 + 2;
        Box::pin(
            futures_util::stream::once(async move {
                let _ = tokio::time::timeout(TIMEOUT, arrived.wait_for(|a| *a >= partner)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                futures_util::stream::iter(vec![
                    Ok(ModelEvent::TextDelta { text: "ok".into() }),
                    Ok(ModelEvent::Finish { reason: FinishReason::Stop }),
                ])
            })
            .flatten(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attempts_overlap_up_to_max_concurrency_and_never_beyond() {
    let eval = "iterations = 6\nmessage = \"go\"\n[expect]\nreply_includes = [\"ok\"]\n";
    let mut fx = Fx::new("max_concurrency = 2\ntimeout = \"20s\"\n", &[("wide.eval.toml", eval)]).await;
    let max = Arc::new(AtomicUsize::new(0));
    fx.setup.provider =
        Arc::new(Pairing { arrived: watch::channel(0).0, in_flight: Arc::new(AtomicUsize::new(0)), max: max.clone() });
    let run = fx.run(fx.batch()).await;
    assert!(run.all_passed(), "{:#?}", run.cases);
    assert_eq!(run.case("wide").unwrap().attempts.len(), 6);
    assert_eq!(max.load(Ordering::SeqCst), 2, "two sessions overlap, never three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_turn_times_out_as_a_failed_case_and_is_stopped() {
    let eval = "message = \"hang\"\n[expect]\nsucceeded = true\n";
    let fx = Fx::new("max_concurrency = 1\ntimeout = \"300ms\"\n", &[("slow.eval.toml", eval)]).await;
    fx.model.push(Reply::Hang);
    let run = fx.run(fx.batch()).await;
    assert_eq!(run.status, RunStatus::Completed);
    let case = run.case("slow").unwrap();
    assert_eq!(case.status, CaseStatus::Failed);
    let attempt = &case.attempts[0];
    assert_eq!(attempt.outcome, Outcome::TimedOut);
    assert_eq!(attempt.error.as_deref(), Some("timed out after 300ms"));
    assert!(!attempt.checks[0].passed);
    // The turn was stopped: its session's log ends in turn.failed.
    let session = attempt.session_id.clone().unwrap();
    let log = fx.setup.evals_dir().join(&run.run_id).join("state/sessions").join(session).join("events.ndjson");
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("\"turn.failed\""), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_batch_stops_running_sessions() {
    let eval = "iterations = 3\nmessage = \"hang\"\n[expect]\nsucceeded = true\n";
    let fx = Fx::new("max_concurrency = 1\ntimeout = \"60s\"\n", &[("stuck.eval.toml", eval)]).await;
    fx.model.push(Reply::Hang);
    let batch: Batch = fx.batch();
    let shared = Arc::new(Mutex::new(batch.snapshot(RunStore::new_run_id(), "t")));
    let cancel = CancellationToken::new();
    let started = tokio::sync::Notify::new();
    let observe = |progress: bdk_eval::Progress<'_>, _: &bdk_eval::RunSnapshot| {
        if matches!(progress, bdk_eval::Progress::Started { .. }) {
            started.notify_one();
        }
    };
    let store = fx.store();
    let run = bdk_eval::run_batch(&fx.setup, &store, batch, shared.clone(), cancel.clone(), &observe);
    let canceller = async {
        within(started.notified()).await;
        // The model call is in flight once the fake server saw it.
        within(fx.model.wait_for_requests(1)).await;
        cancel.cancel();
    };
    let (run, ()) = within(async { tokio::join!(run, canceller) }).await;
    assert_eq!(run.status, RunStatus::Cancelled);
    let case = run.case("stuck").unwrap();
    assert_eq!(case.status, CaseStatus::Cancelled);
    assert_eq!(case.attempts.len(), 1, "later iterations never started");
    assert_eq!(case.attempts[0].outcome, Outcome::Cancelled);
    assert!(fx.model.disconnects() <= 1);
    assert_eq!(store.load(&run.run_id).await.unwrap().status, RunStatus::Cancelled);
    let _ = Duration::ZERO;
}
