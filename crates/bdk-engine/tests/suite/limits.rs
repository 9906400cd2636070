//! Per-step limits: a model step that asks for hundreds of tool calls runs at most
//! `max_tool_calls_per_step` of them (the rest get an error result naming the limit, and the
//! turn goes on); a step whose output passes the byte or token cap is cut off, only the capped
//! part reaches the log, and the turn fails with `output_too_large`.

use std::sync::Arc;

use bdk_engine::{Engine, EngineOptions};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_protocol::EventData;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn three_hundred_calls_in_one_step_are_bounded() {
    let mut step = ScriptStep::tool_call("c0", "add", json!({"a": 0, "b": 1}));
    for i in 1..300 {
        step = step.with_tool_call(format!("c{i}"), "add", json!({"a": i, "b": 1}));
    }
    let fx = Fixture::new(vec![step, say("done")]).await;
    let started = fx.start("go").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let results: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 300);
    let refused: Vec<_> = results.iter().filter(|r| r.is_error).collect();
    assert_eq!(refused.len(), 300 - 64);
    assert!(refused[0].result.as_str().unwrap().contains("at most 64 run per step"), "{:?}", refused[0]);
    // Only the admitted calls reached the registry.
    assert_eq!(fx.tools.calls.lock().unwrap().len(), 64);
    assert_eq!(bdk_engine::Trajectory::from_events(&events).reply.as_deref(), Some("done"));
}

#[tokio::test]
async fn the_per_step_cap_is_configurable() {
    let step = ScriptStep::tool_call("c0", "add", json!({"a": 1, "b": 1}))
        .with_tool_call("c1", "add", json!({"a": 2, "b": 2}))
        .with_tool_call("c2", "add", json!({"a": 3, "b": 3}));
    let dir = tempfile::tempdir().unwrap();
    let tools = Arc::new(TestTools::default());
    let store = TestStore::open(&dir.path().join("test")).await;
    let options = EngineOptions { max_tool_calls_per_step: Some(2), ..EngineOptions::default() };
    let provider = Arc::new(ScriptedProvider::new(vec![step, say("ok")]));
    let engine = Engine::with_options(config(), store.stores(), provider, tools.clone(), options);
    let started = within(engine.start_session(start("go", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let events = settled(&engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "action.result"), 3);
    assert_eq!(tools.calls.lock().unwrap().len(), 2);
}

/// An engine over a fresh store with `options`.
async fn engine_with(steps: Vec<ScriptStep>, options: EngineOptions) -> ((tempfile::TempDir, TestStore), Engine) {
    let dir = tempfile::tempdir().unwrap();
    let store = TestStore::open(&dir.path().join("test")).await;
    let provider = Arc::new(ScriptedProvider::new(steps));
    let engine = Engine::with_options(config(), store.stores(), provider, Arc::new(TestTools::default()), options);
    ((dir, store), engine)
}

#[tokio::test]
async fn a_20_mib_answer_is_capped() {
    let huge = "é".repeat(10 * 1024 * 1024);
    let ((dir, _store), engine) =
        engine_with(vec![ScriptStep::text(huge), say("small")], EngineOptions::default()).await;
    let started = within(engine.start_session(start("go", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let events = settled(&engine, &started.session_id, 1).await;
    let failed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(f) => Some(f.clone()),
            _ => None,
        })
        .expect("turn.failed");
    assert_eq!(failed.error, Some(bdk_protocol::event::FailureCode::OutputTooLarge));
    assert!(failed.message.contains("1048576 bytes"), "{}", failed.message);
    // What reached the log is the capped part, not 20 MiB.
    let appended: usize = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageAppended(d) => Some(d.delta.len()),
            _ => None,
        })
        .sum();
    assert!(appended <= 1024 * 1024, "{appended}");
    if filesystem_only("a_20_mib_answer_is_capped (its log file's size)", "a file on disk") {
        return;
    }
    let log = dir.path().join("test/sessions").join(started.session_id.to_string()).join("events.ndjson");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < 2 * 1024 * 1024, "the log holds {size} bytes");
}

#[tokio::test]
async fn the_token_cap_fails_a_step_that_reports_more() {
    let step = ScriptStep::text("short").with_usage(bdk_model::Usage { output_tokens: 500, ..Default::default() });
    let options = EngineOptions { max_output_tokens: Some(100), ..EngineOptions::default() };
    let (_dir, engine) = engine_with(vec![step], options).await;
    let started = within(engine.start_session(start("go", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let events = settled(&engine, &started.session_id, 1).await;
    let failed = events.iter().find_map(|e| match &e.data {
        EventData::TurnFailed(f) => Some(f.clone()),
        _ => None,
    });
    assert_eq!(failed.expect("turn.failed").error, Some(bdk_protocol::event::FailureCode::OutputTooLarge));
}
