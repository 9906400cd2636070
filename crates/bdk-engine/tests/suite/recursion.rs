//! `callTool` recursion: a tool that calls itself through its host services is stopped at
//! `MAX_CALL_DEPTH` nested calls with `call_depth_exceeded`, and the turn goes on.

use std::sync::Arc;

use bdk_engine::{Engine, MAX_CALL_DEPTH};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_project::model::Predicate;
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError};
use serde_json::{Value, json};

use super::support::*;

/// Calls itself through `callTool` until the host refuses; returns the chain of results.
#[derive(Clone, Default)]
struct Recurse;

impl NativeTool for Recurse {
    type Input = Value;

    fn name(&self) -> &str {
        "recurse"
    }

    fn description(&self) -> &str {
        "Calls itself."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, _input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let host = ctx.services()?;
        match host.call_tool("recurse".into(), json!({})).await {
            Ok(outcome) => Ok(json!({ "inner": outcome.result })),
            Err(error) => Ok(json!({ "stopped": error.code, "message": error.message })),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_calling_itself_is_stopped_at_the_documented_depth() {
    let dir = tempfile::tempdir().unwrap();
    let tools = ProjectTools::empty(dir.path()).without_builtins().native(Recurse).build().unwrap();
    let store = TestStore::open(&dir.path().join("state")).await;
    let provider =
        Arc::new(ScriptedProvider::new(vec![ScriptStep::tool_call("c0", "recurse", json!({})), say("done")]));
    let engine = Engine::new(config(), store.stores(), provider, Arc::new(tools));
    let started = within(engine.start_session(start("go", SessionMode::Chat))).await.unwrap();
    let events = settled(&engine, &started.session_id, 1).await;
    // The model's call is the last `action.result` of the turn (nested ones are direct calls).
    let result = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) if r.direct.is_none() => Some(r.clone()),
            _ => None,
        })
        .next_back()
        .expect("the model's call has a result");
    let mut level = &result.result;
    let mut nested = 0;
    while let Some(inner) = level.get("inner") {
        nested += 1;
        level = inner;
    }
    assert_eq!(nested, MAX_CALL_DEPTH, "{}", result.result);
    assert_eq!(level["stopped"], json!("call_depth_exceeded"), "{level}");
    assert_eq!(bdk_engine::Trajectory::from_events(&events).reply.as_deref(), Some("done"));
}
