//! The session routes end to end: start, a full turn on the stream, follow-up with token
//! rotation, stop, cost and listing.

use std::time::Duration;

use bdk_model::ScriptStep;
use bdk_protocol::EventData;
use serde_json::json;

use super::support::{host, slow_text, types, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_answers_with_the_reference_shape_and_runs_a_turn() {
    let host = host().start().await;
    let reply = host.post("/v1/session", &json!({"message": "hello there"})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let body = &reply.body;
    assert_eq!(body["ok"], json!(true));
    let id = body["sessionId"].as_str().unwrap();
    assert!(id.starts_with("ses_"), "{id}");
    assert!(body["continuationToken"].as_str().unwrap().starts_with("http:"));
    assert_eq!(body["playgroundUrl"], json!(format!("{}/playground?sessionId={id}", host.base)));
    assert_eq!(body["traceUrl"], json!(format!("{}/v1/session/{id}/events", host.base)));

    let mut stream = host.stream(id, 0).await;
    let events = stream.until("session.waiting").await;
    let seen = types(&events);
    for expected in ["session.started", "message.received", "turn.started", "message.completed", "turn.completed"] {
        assert!(seen.iter().any(|t| t == expected), "{expected} missing from {seen:?}");
    }
    let reply_text = events.iter().find_map(|e| match &e.data {
        EventData::MessageCompleted(m) => Some(m.text.clone()),
        _ => None,
    });
    assert_eq!(reply_text.as_deref(), Some("hello there"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ups_rotate_the_token_and_a_stale_one_is_409() {
    let host = host().start().await;
    let started = host.start_session("one").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;

    let reply = host.follow_up(&id, &started.continuation_token, "two").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let next = reply.body["continuationToken"].as_str().unwrap().to_owned();
    assert_ne!(next, started.continuation_token);
    assert_eq!(reply.body["sessionId"], json!(id));

    host.follow_up(&id, &started.continuation_token, "three").await.assert_error(409, "stale_continuation_token");
    let ok = host.follow_up(&id, &next, "three").await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_interrupts_the_running_turn_and_the_session_stays_followable() {
    // A turn of ~60 s: `stop` lands while it runs however loaded the machine is.
    let host = host().script(vec![slow_text(600, Duration::from_millis(100)), ScriptStep::text("after")]).start().await;
    let started = host.start_session("go slowly").await;
    let id = started.session_id.to_string();
    let mut stream = host.stream(&id, 0).await;
    stream.until("message.appended").await;

    let stop = host.post(&format!("/v1/session/{id}/stop"), &json!({})).await;
    assert_eq!(stop.status, 200, "{}", stop.text);
    assert_eq!(stop.body["ok"], json!(true));
    let events = stream.until("turn.failed").await;
    let failed = events.last().unwrap();
    match &failed.data {
        EventData::TurnFailed(f) => assert_eq!(f.message, bdk_engine::INTERRUPTED),
        other => panic!("{other:?}"),
    }
    stream.until("session.waiting").await;

    let reply = host.follow_up(&id, &started.continuation_token, "again").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    stream.until("turn.completed").await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_folds_usage_per_turn() {
    let usage = bdk_model::Usage { input_tokens: 100, output_tokens: 20, ..Default::default() };
    let host = host()
        .script(vec![ScriptStep::text("a").with_usage(usage), ScriptStep::text("b").with_usage(usage)])
        .start()
        .await;
    let started = host.start_session("first").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    let second = host.follow_up(&id, &started.continuation_token, "second").await;
    assert_eq!(second.status, 200);
    let waiting = host.wait_for(&id, "turn.completed", Some(5)).await;
    assert!(waiting.index > 5);

    let cost = within("cost", async {
        loop {
            let cost = host.get(&format!("/v1/session/{id}/cost")).await;
            if cost.body["turns"].as_array().is_some_and(|t| t.len() == 2) {
                return cost;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(cost.status, 200, "{}", cost.text);
    assert_eq!(cost.body["ok"], json!(true));
    assert_eq!(cost.body["sessionId"], json!(id));
    assert_eq!(cost.body["usage"]["inputTokens"], json!(200));
    assert_eq!(cost.body["usage"]["outputTokens"], json!(40));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_is_the_bare_manifest_and_sessions_are_listed() {
    let host = host().start().await;
    let info = host.get("/v1/info").await;
    assert_eq!(info.status, 200);
    assert_eq!(info.body["slug"], json!("hello"));
    assert_eq!(info.body["name"], json!("hello agent"));
    assert!(info.body.get("ok").is_none(), "info is the bare project-info object");

    let started = host.start_session("list me").await;
    let list = host.get("/v1/sessions").await;
    assert_eq!(list.status, 200, "{}", list.text);
    let sessions = list.body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["sessionId"], json!(started.session_id.to_string()));
    assert_eq!(sessions[0]["principal"], json!("local"));
    host.shutdown().await;
}
