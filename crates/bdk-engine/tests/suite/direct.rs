//! Direct tool calls (`Engine::call_tool`): where they run (a scratch workspace created and
//! removed, or the bound session's workspace), what they record (`actions.requested` +
//! `action.result` under a turnId of their own, marked `direct`, never sent to the model),
//! busy-session admission by effect, token binding, and every refusal before a tool runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bdk_engine::{DirectCall, DirectOutcome, Engine, EngineError, Principal, SessionStarted, Trajectory};
use bdk_model::{Message, ScriptedProvider};
use bdk_protocol::event::SessionMode;
use bdk_protocol::info::Source;
use bdk_protocol::{Event, EventData, SessionId};
use bdk_tools::{
    BoxFuture, Effect, ToolContext, ToolInfo, ToolInvocation, ToolKind, ToolOutcome, ToolRegistry, ToolSpec,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::support::*;

/// `peek` (read) and `poke` (write) answer where they ran; `poke` and `hold` (write) leave a file
/// in the workspace, `hold` only once released; `strict` wants `{n: integer}`; `boom` fails;
/// `agent_only` is an agent tool; `read_file` a built-in. `native_quiet` and `native_scratch` are
/// native: the first never touches its workspace and reports what `tool-calls/` holds while it
/// runs, the second asks `ToolContext::workspace` for it and leaves a file there.
#[derive(Debug, Default)]
struct DirectTools {
    hold_started: Arc<Notify>,
    release: Arc<Notify>,
}

const CALLABLE: [&str; 5] = ["peek", "poke", "hold", "strict", "boom"];
const NATIVE: [&str; 2] = ["native_quiet", "native_scratch"];

impl DirectTools {
    fn kind(name: &str) -> Option<ToolKind> {
        match name {
            "agent_only" => Some(ToolKind::Agent),
            "read_file" => Some(ToolKind::Builtin),
            name if CALLABLE.contains(&name) => Some(ToolKind::Command),
            name if NATIVE.contains(&name) => Some(ToolKind::Native),
            _ => None,
        }
    }
}

fn report(invocation: &ToolInvocation) -> Value {
    let workspace = invocation.workspace.clone().unwrap_or_default();
    json!({
        "workspace": workspace.display().to_string(),
        "existed": workspace.is_dir(),
        "sessionId": invocation.session_id,
        "turnId": invocation.turn_id,
        "dryRun": invocation.dry_run,
        "identity": invocation.identity.as_ref().map(|i| json!({"channel": i.channel, "key": i.key})),
    })
}

impl ToolRegistry for DirectTools {
    fn specs(&self) -> Vec<ToolSpec> {
        CALLABLE.iter().map(|n| ToolSpec::new(*n, "a direct-call test tool", json!({"type": "object"}))).collect()
    }

    fn call(&self, invocation: ToolInvocation, _cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        let hold = invocation.name == "hold";
        if hold {
            self.hold_started.notify_one();
        }
        let release = self.release.clone();
        Box::pin(async move {
            if hold {
                release.notified().await;
            }
            match invocation.name.as_str() {
                "boom" => ToolOutcome::error("boom: the tool failed"),
                "native_quiet" => {
                    let mut report = report(&invocation);
                    let calls = invocation.workspace.as_deref().and_then(|w| w.parent()).unwrap();
                    let held = calls.read_dir().map(|entries| entries.count()).unwrap_or(0);
                    report["toolCallsEntries"] = json!(held);
                    ToolOutcome::ok(report)
                }
                "native_scratch" => {
                    let ctx = ToolContext::from_invocation(&invocation, None);
                    let dir = ctx.workspace().unwrap();
                    std::fs::write(dir.join("notes.txt"), "x").unwrap();
                    ToolOutcome::ok(report(&invocation))
                }
                "poke" | "hold" => {
                    if let Some(dir) = &invocation.workspace {
                        std::fs::write(dir.join(format!("{}.txt", invocation.name)), "x").unwrap();
                    }
                    ToolOutcome::ok(report(&invocation))
                }
                _ => ToolOutcome::ok(report(&invocation)),
            }
        })
    }

    fn lookup(&self, name: &str) -> Option<ToolInfo> {
        let kind = Self::kind(name)?;
        Some(ToolInfo {
            name: name.into(),
            description: String::new(),
            kind,
            source: Source::File,
            input_schema: json!({"type": "object"}),
            output_schema: None,
            time_args: Vec::new(),
            timeout: Duration::from_secs(60),
            callable: kind.is_server(),
        })
    }

    fn effect(&self, name: &str, _input: &Value) -> Effect {
        if name == "peek" { Effect::Read } else { Effect::Write }
    }

    fn validate_input(&self, name: &str, input: &Value) -> Result<(), Vec<String>> {
        match name {
            "strict" if !input.get("n").is_some_and(Value::is_i64) => Err(vec!["/n: must be an integer".into()]),
            _ => Ok(()),
        }
    }

    fn callable_names(&self) -> Vec<String> {
        CALLABLE.iter().map(|n| (*n).to_owned()).collect()
    }
}

struct Direct {
    dir: TempDir,
    backend: TestStore,
    engine: Engine,
    provider: Arc<ScriptedProvider>,
    tools: Arc<DirectTools>,
}

impl Direct {
    async fn new(provider: ScriptedProvider) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let provider = Arc::new(provider);
        let tools = Arc::new(DirectTools::default());
        let backend = TestStore::open(&dir.path().join("test")).await;
        let engine = Engine::new(config(), backend.stores(), provider.clone(), tools.clone());
        Direct { dir, backend, engine, provider, tools }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("test")
    }

    async fn call(&self, call: DirectCall) -> Result<DirectOutcome, EngineError> {
        within(self.engine.call_tool(call)).await
    }

    async fn start(&self, channel: &str, key: Option<&str>) -> SessionStarted {
        let mut request = start("hello", SessionMode::Chat);
        request.channel = channel.into();
        request.continuation_key = key.map(str::to_owned);
        let started = within(self.engine.start_session(request)).await.unwrap();
        settled(&self.engine, &started.session_id, 1).await;
        started
    }

    async fn events(&self, id: &SessionId) -> Vec<Event> {
        within(self.engine.events(id, &alice(), 0)).await.unwrap()
    }
}

fn call(tool: &str) -> DirectCall {
    DirectCall::new(tool, json!({}), alice())
}

fn bound(tool: &str, session: &SessionId) -> DirectCall {
    DirectCall { session_id: Some(session.clone()), ..call(tool) }
}

fn by_token(tool: &str, token: &str) -> DirectCall {
    DirectCall { continuation_token: Some(token.into()), ..call(tool) }
}

/// The events recording a direct call: `actions.requested` then `action.result`, both marked.
fn direct_events(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| match &e.data {
            EventData::ActionsRequested(r) => r.direct == Some(true),
            EventData::ActionResult(r) => r.direct == Some(true),
            _ => false,
        })
        .collect()
}

#[tokio::test]
async fn an_unbound_call_runs_in_a_scratch_workspace_that_is_removed() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let outcome = fx.call(call("poke")).await.unwrap();
    assert!(!outcome.is_error, "{outcome:?}");
    assert!(!outcome.scratch_workspace, "a plain unbound call is not a fallback");
    assert_eq!(outcome.tool_name, "poke");
    assert!(outcome.call_id.as_str().starts_with("tool_poke_"));
    let workspace = PathBuf::from(outcome.result["workspace"].as_str().unwrap());
    assert_eq!(workspace, fx.state().join("tool-calls").join(outcome.call_id.as_str()));
    assert_eq!(outcome.result["existed"], json!(true));
    assert_eq!(outcome.result["sessionId"], Value::Null);
    assert!(!workspace.exists(), "the scratch workspace is removed when the call returns");
    assert!(fx.state().join("tool-calls").read_dir().unwrap().next().is_none());
    assert!(outcome.session_id.is_none() && outcome.turn_id.is_none());
}

#[tokio::test]
async fn a_native_tool_that_never_uses_its_scratch_workspace_gets_no_folder() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let outcome = fx.call(call("native_quiet")).await.unwrap();
    assert!(!outcome.is_error, "{outcome:?}");
    let workspace = PathBuf::from(outcome.result["workspace"].as_str().unwrap());
    assert_eq!(workspace, fx.state().join("tool-calls").join(outcome.call_id.as_str()));
    assert_eq!(outcome.result["existed"], json!(false), "the folder is not made before the call");
    assert_eq!(outcome.result["toolCallsEntries"], json!(0), "tool-calls/ stays empty during the call");
    assert!(!workspace.exists());
    let calls = fx.state().join("tool-calls");
    assert!(calls.read_dir().map_or(true, |mut entries| entries.next().is_none()));
}

#[tokio::test]
async fn a_native_tool_that_asks_for_its_workspace_gets_a_folder_removed_afterwards() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let outcome = fx.call(call("native_scratch")).await.unwrap();
    assert!(!outcome.is_error, "{outcome:?}");
    let workspace = PathBuf::from(outcome.result["workspace"].as_str().unwrap());
    assert_eq!(workspace, fx.state().join("tool-calls").join(outcome.call_id.as_str()));
    assert_eq!(outcome.result["existed"], json!(true), "ctx.workspace() made it");
    assert!(!workspace.exists(), "the scratch workspace, file and all, is removed when the call returns");
    assert!(fx.state().join("tool-calls").read_dir().unwrap().next().is_none());
}

#[tokio::test]
async fn a_tool_failure_is_an_outcome_and_the_scratch_is_still_removed() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let outcome = fx.call(call("boom")).await.unwrap();
    assert!(outcome.is_error);
    assert_eq!(outcome.result, json!("boom: the tool failed"));
    let calls = fx.state().join("tool-calls");
    assert!(!calls.exists() || calls.read_dir().unwrap().next().is_none());
}

#[tokio::test]
async fn refusals_before_the_tool_runs() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    match fx.call(call("nope")).await {
        Err(EngineError::UnknownTool { name, available }) => {
            assert_eq!(name, "nope");
            assert_eq!(available, CALLABLE.map(str::to_owned).to_vec());
        }
        other => panic!("{other:?}"),
    }
    for name in ["agent_only", "read_file"] {
        let err = fx.call(call(name)).await.unwrap_err();
        assert_eq!(err.code(), "tool_not_callable", "{name}: {err}");
    }
    match fx.call(DirectCall::new("strict", json!({"n": "one"}), alice())).await {
        Err(EngineError::InvalidToolInput { name, errors }) => {
            assert_eq!(name, "strict");
            assert_eq!(errors, ["/n: must be an integer"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(fx.call(DirectCall::new("strict", json!({"n": 1}), alice())).await.is_ok());
    let missing = SessionId::generate();
    assert!(matches!(fx.call(bound("peek", &missing)).await, Err(EngineError::SessionNotFound(id)) if id == missing));
    // Nothing ran, so nothing was left behind.
    let calls = fx.state().join("tool-calls");
    assert!(!calls.exists() || calls.read_dir().unwrap().next().is_none());
}

#[tokio::test]
async fn malformed_tokens_and_both_identifiers_are_refused() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    for token in ["", "no-colon", ":key", "slack:", "sl ack:key", "slack:k\u{7}"] {
        let err = fx.call(by_token("peek", token)).await.unwrap_err();
        assert_eq!(err.code(), "invalid_continuation_token", "{token:?}: {err}");
    }
    let both = DirectCall { session_id: Some(SessionId::generate()), ..by_token("peek", "slack:c1") };
    let err = fx.call(both).await.unwrap_err();
    assert_eq!(err.code(), "invalid_continuation_token");
    assert!(err.to_string().contains("mutually exclusive"), "{err}");
}

#[tokio::test]
async fn a_bound_call_runs_in_the_session_workspace_and_is_recorded_under_its_own_turn() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("http", None).await;
    let id = &started.session_id;
    let outcome = fx.call(bound("poke", id)).await.unwrap();
    assert!(!outcome.is_error && !outcome.scratch_workspace, "{outcome:?}");
    let workspace = fx.state().join("sessions").join(id.as_str()).join("workspace");
    assert_eq!(outcome.result["workspace"], json!(workspace.display().to_string()));
    assert!(workspace.join("poke.txt").exists(), "the write stays in the session workspace");
    assert_eq!(outcome.result["sessionId"], json!(id));
    let turn = outcome.turn_id.clone().unwrap();
    assert_ne!(turn, started.turn_id);
    assert_eq!(outcome.result["turnId"], json!(turn));

    let events = fx.events(id).await;
    let recorded = direct_events(&events);
    assert_eq!(recorded.len(), 2, "{:?}", types(&events));
    assert_eq!(recorded[0].event_type(), "actions.requested");
    assert_eq!(recorded[1].event_type(), "action.result");
    assert!(recorded.iter().all(|e| e.turn_id.as_ref() == Some(&turn)));
    let EventData::ActionResult(result) = &recorded[1].data else { panic!() };
    assert_eq!(result.call_id, outcome.call_id);
    // They tell nothing about the session's status: it is still waiting.
    assert_eq!(Trajectory::from_events(&events).status, "waiting");
    let listed = within(fx.engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(listed[0].status, "waiting");
}

#[tokio::test]
async fn the_model_never_sees_a_direct_call() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("http", None).await;
    let id = &started.session_id;
    fx.call(bound("peek", id)).await.unwrap();
    let accepted =
        within(fx.engine.follow_up(id, follow("again", &started.continuation_token, bdk_engine::Admission::Preempt)))
            .await
            .unwrap();
    assert!(accepted.turn_id.is_some());
    settled(&fx.engine, id, 2).await;
    let requests = fx.provider.requests();
    let last = requests.last().unwrap();
    assert!(
        last.messages.iter().all(|m| !matches!(m, Message::Tool { .. })
            && !matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty())),
        "{:#?}",
        last.messages
    );
    assert_eq!(last.messages.iter().filter(|m| matches!(m, Message::User { .. })).count(), 2);
}

#[tokio::test]
async fn a_busy_session_runs_reads_beside_the_turn_and_refuses_writes() {
    let fx = Direct::new(ScriptedProvider::new(vec![hang()])).await;
    let mut request = start("hello", SessionMode::Chat);
    request.channel = "http".into();
    let started = within(fx.engine.start_session(request)).await.unwrap();
    let id = &started.session_id;
    in_step(&fx.engine, id, 1).await;
    assert!(fx.engine.is_busy(id));

    let read = fx.call(bound("peek", id)).await.unwrap();
    assert!(!read.is_error);
    let read_turn = read.turn_id.clone().unwrap();
    assert_ne!(read_turn, started.turn_id, "a read beside a turn has its own turnId");

    for write in ["poke", "hold"] {
        match fx.call(bound(write, id)).await {
            Err(EngineError::SessionBusy(busy)) => assert_eq!(&busy, id),
            other => panic!("{write}: {other:?}"),
        }
    }
    let events = fx.events(id).await;
    assert_eq!(direct_events(&events).len(), 2, "only the read is recorded: {:?}", types(&events));
    assert!(!fx.state().join("sessions").join(id.as_str()).join("workspace/poke.txt").exists());

    within(fx.engine.stop(id, &alice())).await.unwrap();
    let events = settled(&fx.engine, id, 1).await;
    // The read's events sit inside the turn's, and the turn still closes normally.
    assert_eq!(events.last().unwrap().event_type(), "session.waiting");
    assert_eq!(Trajectory::from_events(&events).status, "waiting");
    // Now idle, the write runs.
    assert!(!fx.call(bound("poke", id)).await.unwrap().is_error);
}

#[tokio::test]
async fn a_write_on_an_idle_session_holds_off_the_next_turn() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("http", None).await;
    let id = started.session_id.clone();
    let engine = fx.engine.clone();
    let write = tokio::spawn({
        let id = id.clone();
        async move { engine.call_tool(bound("hold", &id)).await }
    });
    within(fx.tools.hold_started.notified()).await;
    let engine = fx.engine.clone();
    let token = started.continuation_token.clone();
    let follow_up = tokio::spawn({
        let id = id.clone();
        async move { engine.follow_up(&id, follow("next", &token, bdk_engine::Admission::Preempt)).await }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!follow_up.is_finished(), "a turn may not start while a direct write runs");
    fx.tools.release.notify_one();
    let outcome = within(write).await.unwrap().unwrap();
    assert!(!outcome.is_error);
    within(follow_up).await.unwrap().unwrap();
    let events = settled(&fx.engine, &id, 2).await;
    let result_at = events.iter().position(|e| matches!(&e.data, EventData::ActionResult(r) if r.direct == Some(true)));
    let message_at = events.iter().rposition(|e| e.event_type() == "message.received");
    assert!(result_at.unwrap() < message_at.unwrap(), "{:?}", types(&events));
}

#[tokio::test]
async fn a_token_of_a_live_session_binds_like_its_id() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("slack", Some("C42")).await;
    assert_eq!(started.continuation_token, "slack:C42");
    let outcome = fx.call(by_token("peek", "slack:C42")).await.unwrap();
    assert_eq!(outcome.session_id.as_ref(), Some(&started.session_id));
    assert_eq!(outcome.result["identity"], json!({"channel": "slack", "key": "C42"}));
    assert_eq!(direct_events(&fx.events(&started.session_id).await).len(), 2);

    // An HTTP session's current token binds too; once rotated, the old one names no session.
    let http = fx.start("http", None).await;
    let outcome = fx.call(by_token("peek", &http.continuation_token)).await.unwrap();
    assert_eq!(outcome.session_id.as_ref(), Some(&http.session_id));
    let accepted = within(
        fx.engine.follow_up(&http.session_id, follow("more", &http.continuation_token, bdk_engine::Admission::Preempt)),
    )
    .await
    .unwrap();
    settled(&fx.engine, &http.session_id, 2).await;
    let stale = fx.call(by_token("peek", &http.continuation_token)).await.unwrap();
    assert_eq!(stale.session_id, None, "a rotated-away token binds nothing");
    let fresh = fx.call(by_token("peek", &accepted.continuation_token)).await.unwrap();
    assert_eq!(fresh.session_id.as_ref(), Some(&http.session_id));
}

#[tokio::test]
async fn a_token_from_before_a_restart_still_binds() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("github", Some("pr:acme/app#7")).await;
    let engine = Engine::new(config(), fx.backend.stores(), Arc::new(ScriptedProvider::echo()), fx.tools.clone());
    let outcome = within(engine.call_tool(by_token("peek", "github:pr:acme/app#7"))).await.unwrap();
    assert_eq!(outcome.session_id.as_ref(), Some(&started.session_id));
}

#[tokio::test]
async fn a_token_with_no_session_runs_scratch_with_its_identity() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    fx.start("slack", Some("C1")).await;
    let outcome = fx.call(by_token("poke", "slack:C2")).await.unwrap();
    assert_eq!(outcome.session_id, None);
    assert!(!outcome.scratch_workspace);
    assert_eq!(outcome.result["identity"], json!({"channel": "slack", "key": "C2"}));
    let workspace = PathBuf::from(outcome.result["workspace"].as_str().unwrap());
    assert!(workspace.starts_with(fx.state().join("tool-calls")));
    assert!(!workspace.exists());
}

#[tokio::test]
async fn another_principals_session_is_forbidden() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("slack", Some("C9")).await;
    let bob = Principal::new("bob");
    let by_id = DirectCall { principal: bob.clone(), ..bound("peek", &started.session_id) };
    assert!(matches!(fx.call(by_id).await, Err(EngineError::Forbidden(_))));
    let by_token = DirectCall { principal: bob, ..by_token("peek", "slack:C9") };
    assert!(matches!(fx.call(by_token).await, Err(EngineError::Forbidden(_))));
    assert!(direct_events(&fx.events(&started.session_id).await).is_empty());
}

#[tokio::test]
async fn without_a_session_workspace_reads_fall_back_and_writes_fail() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let started = fx.start("http", None).await;
    let id = &started.session_id;
    let workspace = fx.state().join("sessions").join(id.as_str()).join("workspace");
    if workspace.exists() {
        std::fs::remove_dir_all(&workspace).unwrap();
    }
    std::fs::create_dir_all(workspace.parent().unwrap()).unwrap();
    std::fs::write(&workspace, "a file where the workspace should be").unwrap();

    let read = fx.call(bound("peek", id)).await.unwrap();
    assert!(read.scratch_workspace, "{read:?}");
    assert!(read.result["workspace"].as_str().unwrap().contains("tool-calls"));
    assert_eq!(read.session_id.as_ref(), Some(id), "the read is still the session's, and recorded");
    match fx.call(bound("poke", id)).await {
        Err(EngineError::WorkspaceUnavailable(message)) => assert!(!message.contains('/'), "{message}"),
        other => panic!("{other:?}"),
    }
    let events = fx.events(id).await;
    assert_eq!(direct_events(&events).len(), 2, "the refused write records nothing");
}

#[tokio::test]
async fn a_dry_run_session_passes_dry_run_to_its_calls() {
    let fx = Direct::new(ScriptedProvider::echo()).await;
    let mut request = start("hello", SessionMode::Chat);
    request.dry_run = true;
    let started = within(fx.engine.start_session(request)).await.unwrap();
    settled(&fx.engine, &started.session_id, 1).await;
    let outcome = fx.call(bound("peek", &started.session_id)).await.unwrap();
    assert_eq!(outcome.result["dryRun"], json!(true));
    let unbound = fx.call(call("peek")).await.unwrap();
    assert_eq!(unbound.result["dryRun"], json!(false));
}
