//! What a session's settings do to its tool calls, end to end through a real project: a dry run
//! stubs writes (marked `stubbed`) and runs reads, and does not park a stubbed write for
//! approval; `asOf` is checked when the session is created (future instants and `time_args`
//! naming no input property are refused before anything is recorded) and enforced on each call;
//! the workspace is prepared (seeds, `workspaceFiles`) before the turn that needs it, and a
//! preparation failure fails that turn only.

use std::fs;

use bdk_engine::{Admission, EngineError, ListScope};
use bdk_model::ScriptStep;
use bdk_protocol::EventData;
use bdk_protocol::event::{SessionMode, TurnFailStatus};
use chrono::{Duration, Utc};
use serde_json::json;

use super::support::*;
use super::tool_project::*;

#[tokio::test]
async fn a_dry_run_stubs_writes_and_runs_reads() {
    let steps =
        || vec![ScriptStep::tool_call("c1", "publish", json!({})).with_tool_call("c2", "lookup", json!({})), say("ok")];
    let fx = ToolFixture::standard(steps()).await;
    let mut request = start("publish it", SessionMode::Chat);
    request.dry_run = true;
    let started = fx.start(request).await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let Some(EventData::SessionStarted(opened)) = events.first().map(|e| &e.data) else { panic!() };
    assert_eq!(opened.dry_run, Some(true));
    let calls = requested_calls(&events);
    let publish = result_of(&events, &calls[0].0);
    assert_eq!((publish.stubbed, publish.is_error), (Some(true), false));
    assert_eq!(publish.result, json!({"published": false}));
    let lookup = result_of(&events, &calls[1].0);
    assert_eq!(lookup.stubbed, None);
    assert_eq!(lookup.result, json!("found"));
    assert!(!fx.bot().join("published.marker").exists(), "the write's body did not run");

    // Outside a dry run the write runs.
    let fx = ToolFixture::standard(steps()).await;
    let started = fx.chat("publish it").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let publish = result_of(&events, &requested_calls(&events)[0].0);
    assert_eq!(publish.stubbed, None);
    assert_eq!(publish.result, json!({"published": true}));
    assert!(fx.bot().join("published.marker").exists());
}

#[tokio::test]
async fn a_dry_run_write_is_stubbed_without_parking() {
    let fx =
        ToolFixture::standard(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})), say("ok")]).await;
    let mut request = start("promote it", SessionMode::Chat);
    request.dry_run = true;
    let started = fx.start(request).await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "action.approval_requested"), 0);
    let result = result_of(&events, &requested_calls(&events)[0].0);
    assert_eq!(result.stubbed, Some(true));
    assert_eq!(result.result, json!("Operation acknowledged."));
}

#[tokio::test]
async fn an_invalid_input_is_answered_without_parking() {
    let fx = ToolFixture::standard(vec![ScriptStep::tool_call("c1", "promote", json!({"envx": 1})), say("ok")]).await;
    let started = fx.chat("promote it").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "action.approval_requested"), 0);
    assert!(result_of(&events, &requested_calls(&events)[0].0).is_error);
}

#[tokio::test]
async fn as_of_bounds_time_args_on_every_call() {
    let as_of = Utc::now() - Duration::days(1);
    let later = (as_of + Duration::hours(1)).to_rfc3339();
    let earlier = (as_of - Duration::hours(1)).to_rfc3339();
    let fx = ToolFixture::new(
        &[("bot/tools/window.toml", WINDOW)],
        vec![
            ScriptStep::tool_call("c1", "window", json!({"since": later}))
                .with_tool_call("c2", "window", json!({"since": earlier}))
                .with_tool_call("c3", "window", json!({})),
            say("ok"),
        ],
    )
    .await;
    let mut request = start("query", SessionMode::Chat);
    request.as_of = Some(as_of);
    let started = fx.start(request).await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let calls = requested_calls(&events);
    let late = result_of(&events, &calls[0].0);
    assert!(late.is_error && late.result.as_str().unwrap().contains("later than the session's asOf"), "{late:?}");
    assert_eq!(result_of(&events, &calls[1].0).result, json!("window"));
    assert!(result_of(&events, &calls[2].0).result.as_str().unwrap().contains("missing"));
}

#[tokio::test]
async fn as_of_is_refused_before_anything_is_recorded() {
    const TYPO: &str = r#"description = "Query."
effect = "read"
time_args = ["sincee"]
command = ["true"]

[input_schema]
type = "object"
properties = { since = { type = "string" } }
"#;
    let fx = ToolFixture::new(&[("bot/tools/typo.toml", TYPO)], vec![say("ok"), say("ok")]).await;
    let mut request = start("query", SessionMode::Chat);
    request.as_of = Some(Utc::now() - Duration::days(1));
    let refused = within(fx.engine.start_session(request.clone())).await.unwrap_err();
    assert!(matches!(&refused, EngineError::InvalidTimeArgs(m) if m.contains("sincee")), "{refused:?}");
    assert_eq!(refused.code(), "invalid_time_args");

    request.as_of = Some(Utc::now() + Duration::hours(1));
    let future = within(fx.engine.start_session(request.clone())).await.unwrap_err();
    assert!(matches!(&future, EngineError::InvalidRequest(m) if m.contains("future")), "{future:?}");
    assert!(within(fx.engine.list(ListScope::All)).await.unwrap().is_empty(), "nothing was recorded");

    // Without asOf the declaration is ignored.
    request.as_of = None;
    let started = within(fx.engine.start_session(request)).await.unwrap();
    settled(&fx.engine, &started.session_id, 1).await;
}

#[tokio::test]
async fn the_workspace_is_prepared_before_the_turn_that_needs_it() {
    let fx = ToolFixture::new(
        &[("bot/tools/cat_notes.toml", CAT_NOTES), ("bot/sandbox/workspace/seed.txt", "seeded\n")],
        vec![ScriptStep::tool_call("c1", "cat_notes", json!({})), say("read it"), say("second"), say("third")],
    )
    .await;
    let mut request = start("read my notes", SessionMode::Chat);
    request.workspace_files = vec![("notes.txt".into(), "hello notes".into())];
    let started = fx.start(request).await;
    let id = &started.session_id;
    let events = settled(&fx.engine, id, 1).await;
    assert_eq!(result_of(&events, &requested_calls(&events)[0].0).result, json!("hello notes"));
    let workspace = fx.workspace(id).await;
    assert_eq!(fs::read_to_string(workspace.join("seed.txt")).unwrap(), "seeded\n");

    // A follow-up's files are written before its turn; the session's edits to seeds survive.
    fs::write(workspace.join("seed.txt"), "edited\n").unwrap();
    let mut next = follow("more", &started.continuation_token, Admission::Preempt);
    next.workspace_files = vec![("dir/later.txt".into(), "later".into())];
    let accepted = within(fx.engine.follow_up(id, next)).await.unwrap();
    settled(&fx.engine, id, 2).await;
    assert_eq!(fs::read_to_string(workspace.join("dir/later.txt")).unwrap(), "later");
    assert_eq!(fs::read_to_string(workspace.join("seed.txt")).unwrap(), "edited\n");

    // A file that cannot be written fails that turn with a clear message; the session goes on.
    let mut bad = follow("break", &accepted.continuation_token, Admission::Preempt);
    bad.workspace_files = vec![("seed.txt/inside".into(), "x".into())];
    let accepted = within(fx.engine.follow_up(id, bad)).await.unwrap();
    let events = settled(&fx.engine, id, 3).await;
    let failed = events
        .iter()
        .rev()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(f) => Some(f),
            _ => None,
        })
        .unwrap();
    assert_eq!(failed.status, TurnFailStatus::Failed);
    assert!(failed.message.contains("could not prepare the session workspace"), "{failed:?}");
    within(fx.engine.follow_up(id, follow("again", &accepted.continuation_token, Admission::Preempt))).await.unwrap();
    let events = settled(&fx.engine, id, 4).await;
    assert_eq!(count(&events, "turn.completed"), 3);
}
