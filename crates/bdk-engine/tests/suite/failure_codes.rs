//! Typed failures: every way a turn can fail puts a stable `error` code on `turn.failed` (and,
//! for task sessions, on `session.failed`) beside the message, so a client tells a rate limit
//! from a bad credential without reading English.

use std::time::Duration;

use bdk_model::{ModelError, ScriptStep, ScriptedProvider, TimeoutPhase};
use bdk_protocol::event::{FailureCode, SessionMode, TurnFailStatus, TurnFailed};
use bdk_protocol::{Event, EventData};
use serde_json::json;

use super::support::*;

fn turn_failed(events: &[Event]) -> TurnFailed {
    events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(f) => Some(f.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn.failed in {:?}", types(events)))
}

#[tokio::test]
async fn each_model_failure_class_has_its_code_on_turn_and_session() {
    let cases = [
        (ModelError::RateLimited { message: "slow down".into(), retry_after: None }, FailureCode::RateLimited),
        (ModelError::Authentication { message: "bad key".into() }, FailureCode::Authentication),
        (ModelError::ContextLengthExceeded { message: "too long".into() }, FailureCode::ContextLength),
        (ModelError::InvalidRequest { status: 400, message: "no".into() }, FailureCode::InvalidRequest),
        (ModelError::Server { status: 503, message: "down".into() }, FailureCode::ProviderError),
        (ModelError::Network { message: "reset".into() }, FailureCode::Network),
        (ModelError::Timeout { phase: TimeoutPhase::Idle, after: Duration::from_millis(5) }, FailureCode::Timeout),
        (ModelError::MalformedStream { message: "bad json".into() }, FailureCode::MalformedStream),
        (ModelError::ModelUnavailable { message: "no key".into() }, FailureCode::ModelUnavailable),
    ];
    for (error, code) in cases {
        let fx = Fixture::new(vec![ScriptStep::error(error.clone())]).await;
        let started = within(fx.engine.start_session(start("go", SessionMode::Task))).await.unwrap();
        let events = settled(&fx.engine, &started.session_id, 1).await;
        let failed = turn_failed(&events);
        assert_eq!(failed.status, TurnFailStatus::Failed);
        assert_eq!(failed.error, Some(code), "{error}");
        let Some(EventData::SessionFailed(session)) = events.last().map(|e| &e.data) else {
            panic!("{:?}", types(&events))
        };
        assert_eq!(session.error, Some(code), "{error}");
        // On the wire the code sits beside the message.
        let wire = serde_json::to_value(events.last().unwrap()).unwrap();
        assert_eq!(wire["data"]["error"], json!(code.as_str()));
    }
}

#[tokio::test]
async fn running_out_of_steps_is_max_steps() {
    let mut config = config();
    config.max_steps = 1;
    let fx =
        Fixture::with(config, ScriptedProvider::new(vec![ScriptStep::tool_call("c0", "add", json!({"a": 1}))])).await;
    let started = fx.start("loop").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(turn_failed(&events).error, Some(FailureCode::MaxSteps));
}

#[tokio::test]
async fn a_stopped_turn_is_cancelled() {
    let fx = Fixture::new(vec![hang()]).await;
    let started = fx.start("wait").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.stop(&started.session_id, &alice())).await.unwrap();
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let failed = turn_failed(&events);
    assert_eq!(failed.status, TurnFailStatus::Cancelled);
    assert_eq!(failed.error, Some(FailureCode::Cancelled));
}

#[tokio::test]
async fn a_draining_host_says_shutting_down() {
    let fx = Fixture::new(vec![hang()]).await;
    let started = fx.start("wait").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.drain(Duration::from_millis(1))).await;
    let events = within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
    assert_eq!(turn_failed(&events).error, Some(FailureCode::ShuttingDown));
}
