//! The model's tool list: a registry whose list is fixed is asked once per definitions snapshot
//! and every request shares that one list (no schema is copied per turn or per step); a
//! registry whose list can change is asked on every turn; a reload builds a new list.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bdk_engine::{Admission, Capabilities, Definitions, Engine};
use bdk_model::{ModelRequest, ScriptStep, ScriptedProvider};
use bdk_tools::{BoxFuture, ToolInvocation, ToolOutcome, ToolRegistry, ToolSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{TestStore, config, follow, settled, start, within};

/// One tool, `add`; counts how often its list is asked for.
#[derive(Debug)]
struct Counted {
    fixed: bool,
    asked: AtomicUsize,
}

impl Counted {
    fn new(fixed: bool) -> Arc<Self> {
        Arc::new(Self { fixed, asked: AtomicUsize::new(0) })
    }

    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl ToolRegistry for Counted {
    fn specs(&self) -> Vec<ToolSpec> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        vec![ToolSpec::new("add", "adds", json!({"type": "object", "properties": {"a": {"type": "number"}}}))]
    }

    fn fixed_specs(&self) -> bool {
        self.fixed
    }

    fn call(&self, _invocation: ToolInvocation, _cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async { ToolOutcome::ok(json!(3)) })
    }
}

/// Runs a new session and one follow-up (the first turn calls `add`: two model steps), and
/// returns the model's requests.
async fn three_steps(engine: &Engine, provider: &ScriptedProvider) -> Vec<ModelRequest> {
    let started = within(engine.start_session(start("add", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    settled(engine, &started.session_id, 1).await;
    within(engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)))
        .await
        .unwrap();
    settled(engine, &started.session_id, 2).await;
    provider.requests()
}

fn script() -> ScriptedProvider {
    ScriptedProvider::new(vec![
        ScriptStep::tool_call("c1", "add", json!({"a": 1})),
        ScriptStep::text("three"),
        ScriptStep::text("again"),
    ])
}

#[tokio::test]
async fn a_fixed_list_is_built_once_per_snapshot_and_shared_by_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(script());
    let tools = Counted::new(true);
    let store = TestStore::open(&dir.path().join("test")).await;
    let engine = Engine::new(config(), store.stores(), provider.clone(), tools.clone());
    let requests = three_steps(&engine, &provider).await;
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].tools[0].name, "add");
    assert_eq!(requests[0].tools[0].input_schema["properties"]["a"]["type"], "number");
    assert!(requests.iter().all(|r| Arc::ptr_eq(&r.tools, &requests[0].tools)), "one list, shared");
    assert_eq!(tools.asked(), 1);

    // A reload is a new snapshot: its turns get a list built from it.
    let reloaded = Arc::new(script());
    engine.reload(Definitions {
        config: config(),
        provider: reloaded.clone(),
        tools: tools.clone(),
        price: None,
        capabilities: Capabilities::default(),
    });
    let after = three_steps(&engine, &reloaded).await;
    assert_eq!(tools.asked(), 2);
    assert!(!Arc::ptr_eq(&after[0].tools, &requests[0].tools));
    assert!(after.iter().all(|r| Arc::ptr_eq(&r.tools, &after[0].tools)));
}

#[tokio::test]
async fn a_list_that_can_change_is_asked_for_on_every_turn() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(script());
    let tools = Counted::new(false);
    let store = TestStore::open(&dir.path().join("test")).await;
    let engine = Engine::new(config(), store.stores(), provider.clone(), tools.clone());
    let requests = three_steps(&engine, &provider).await;
    assert_eq!(tools.asked(), 2, "once per turn");
    // The steps of one turn still share the turn's list.
    assert!(Arc::ptr_eq(&requests[0].tools, &requests[1].tools));
    assert!(!Arc::ptr_eq(&requests[1].tools, &requests[2].tools));
    assert_eq!(requests[2].tools[0].name, "add");
}
