//! Draining at shutdown: a running turn gets the grace period, then is cancelled with
//! `turn.failed`; live streams see that final event before they end; `serve` returns.

use std::time::{Duration, Instant};

use bdk_protocol::EventData;

use super::support::{host, slow_text, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_running_turns_after_the_grace_and_streams_see_it() {
    // A turn of ~60 s, so only the shutdown can end it (whatever the machine's load).
    let host =
        host().script(vec![slow_text(600, Duration::from_millis(100))]).grace(Duration::from_millis(300)).start().await;
    let started = host.start_session("long").await;
    let id = started.session_id.to_string();
    let mut stream = host.stream(&id, 0).await;
    stream.until("message.appended").await;

    let began = Instant::now();
    let shutting = tokio::spawn(host.shutdown());
    let events = stream.until("turn.failed").await;
    match &events.last().unwrap().data {
        EventData::TurnFailed(failed) => assert_eq!(failed.message, bdk_engine::SHUTTING_DOWN),
        other => panic!("{other:?}"),
    }
    // The stream ends once the host has drained.
    within("the stream to end", async { while stream.next().await.is_some() {} }).await;
    within("serve to return", shutting).await.unwrap();
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(250), "cancelled before the grace period: {took:?}");
    assert!(took < Duration::from_secs(30), "drain took {took:?}, as long as the turn itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_ends_within_the_grace_completes() {
    let host =
        host().script(vec![slow_text(10, Duration::from_millis(20))]).grace(Duration::from_secs(5)).start().await;
    let started = host.start_session("short").await;
    let id = started.session_id.to_string();
    let mut stream = host.stream(&id, 0).await;
    stream.until("turn.started").await;
    let shutting = tokio::spawn(host.shutdown());
    let events = stream.until("turn.completed").await;
    assert!(events.iter().all(|e| e.event_type() != "turn.failed"));
    within("serve to return", shutting).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_host_answers_503_to_new_turns() {
    let host = host().start().await;
    let started = host.start_session("before").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    host.state.agents[0].engine.drain(Duration::ZERO).await;
    host.post("/v1/session", &serde_json::json!({"message": "after"})).await.assert_error(503, "shutting_down");
    host.follow_up(&id, &started.continuation_token, "after").await.assert_error(503, "shutting_down");
    // Reads still work while draining.
    assert_eq!(host.events(&id).await.last().unwrap().event_type(), "session.waiting");
    host.shutdown().await;
}
