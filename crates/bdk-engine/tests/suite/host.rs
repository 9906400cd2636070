//! Guards the host services as native tools see them (the typed `ToolContext::services`): a call
//! of a turn gets kv, files and send bound to its session, with the credentials the engine's
//! `HostAuthority` granted; both are revoked when the call returns; one session's data is not
//! another's; `send` starts, then resumes, a channel session owned by the caller's principal.

use std::sync::{Arc, Mutex};

use bdk_engine::{Engine, EngineOptions, HostAuthority, HostScope};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_project::model::Predicate;
use bdk_protocol::event::{ActionResult, SessionMode};
use bdk_protocol::{CallId, EventData, SessionId};
use bdk_tools::host::{HostErrorKind, SendRequest};
use bdk_tools::{HostAccess, HostServices, NativeTool, ProjectTools, Scope, ToolContext, ToolError};
use serde_json::{Value, json};

use super::support::*;

/// Grants `tok-<n>` and remembers what it granted and revoked.
#[derive(Debug, Default)]
struct RecordingAuthority {
    granted: Mutex<Vec<(HostScope, String)>>,
    revoked: Mutex<Vec<String>>,
}

impl HostAuthority for RecordingAuthority {
    fn grant(&self, scope: &HostScope) -> Option<HostAccess> {
        let mut granted = self.granted.lock().unwrap();
        let token = format!("tok-{}", granted.len());
        granted.push((scope.clone(), token.clone()));
        Some(HostAccess { url: "http://127.0.0.1:9/v1/host".into(), token })
    }

    fn revoke(&self, access: &HostAccess) {
        self.revoked.lock().unwrap().push(access.token.clone());
    }
}

/// Uses every service its input names, and keeps its services to try them after it returned.
#[derive(Clone, Default)]
struct Memo {
    kept: Arc<Mutex<Option<Arc<dyn HostServices>>>>,
}

impl NativeTool for Memo {
    type Input = Value;

    fn name(&self) -> &str {
        "memo"
    }

    fn description(&self) -> &str {
        "Remembers things through the host services."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let host = ctx.services()?;
        let text = |k: &str| input[k].as_str().unwrap_or_default().to_owned();
        let mut out = json!({
            "token": ctx.host.as_ref().map(|h| h.token.clone()),
            "sessionId": host.identity().session_id.as_ref().map(ToString::to_string),
        });
        if let Some(value) = input.get("remember") {
            host.kv_put(Scope::Session, "note".into(), value.clone()).await?;
            host.kv_put(Scope::Agent, "shared".into(), value.clone()).await?;
            host.file_write(Scope::Session, "notes/today.txt".into(), text("remember").into_bytes()).await?;
        }
        out["note"] = host.kv_get(Scope::Session, "note".into()).await?.unwrap_or(Value::Null);
        out["shared"] = host.kv_get(Scope::Agent, "shared".into()).await?.unwrap_or(Value::Null);
        let file = host.file_read(Scope::Session, "notes/today.txt".into()).await?;
        out["file"] = json!(file.map(|b| String::from_utf8_lossy(&b).into_owned()));
        out["files"] = json!(host.file_list(Scope::Session, String::new()).await?.len());
        out["escape"] = match host.file_read(Scope::Session, "../kv/note.json".into()).await {
            Err(error) => json!(error.code),
            Ok(_) => json!("read outside its area"),
        };
        if input.get("send").is_some() {
            let request = |message: &str| SendRequest {
                channel: "ops".into(),
                message: message.into(),
                continuation_key: Some("incident-7".into()),
                title: None,
                admission: None,
            };
            let first = host.send(request("page the on-call")).await?;
            let second = host.send(request("and again")).await?;
            out["sent"] = json!([first, second]);
        }
        *self.kept.lock().unwrap() = ctx.services.clone();
        Ok(out)
    }
}

struct HostFixture {
    _dir: tempfile::TempDir,
    _store: TestStore,
    engine: Engine,
    authority: Arc<RecordingAuthority>,
    memo: Memo,
}

async fn fixture(steps: Vec<ScriptStep>) -> HostFixture {
    let dir = tempfile::tempdir().unwrap();
    let memo = Memo::default();
    let tools = ProjectTools::empty(dir.path()).without_builtins().native(memo.clone()).build().unwrap();
    let store = TestStore::open(&dir.path().join("state")).await;
    let authority = Arc::new(RecordingAuthority::default());
    let options = EngineOptions { host: Some(authority.clone()), ..EngineOptions::default() };
    let provider = Arc::new(ScriptedProvider::new(steps));
    let engine = Engine::with_options(config(), store.stores(), provider, Arc::new(tools), options);
    HostFixture { _dir: dir, _store: store, engine, authority, memo }
}

/// Runs one turn that calls `memo` with `input`; returns the session and the call's result.
async fn memo_turn(fx: &HostFixture, input: Value) -> (SessionId, ActionResult) {
    let started = within(fx.engine.start_session(start("go", SessionMode::Chat))).await.unwrap();
    let id = started.session_id;
    let events = settled(&fx.engine, &id, 1).await;
    let result = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::ActionResult(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no action.result: {:?}", types(&events)));
    assert!(!result.is_error, "{input}: {:?}", result.result);
    (id, result)
}

fn steps(inputs: &[Value]) -> Vec<ScriptStep> {
    let mut steps = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        steps.push(ScriptStep::tool_call(format!("c{i}"), "memo", input.clone()));
        steps.push(say("done"));
    }
    // Turns of the sessions `send` starts.
    steps.extend((0..4).map(|_| say("ok")));
    steps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tool_uses_its_sessions_kv_and_files() {
    let first = json!({"remember": "buy milk"});
    let fx = fixture(steps(&[first.clone(), json!({})])).await;
    let (a, result) = memo_turn(&fx, first).await;
    let out = result.result;
    assert_eq!(out["sessionId"], json!(a.to_string()));
    assert_eq!(out["note"], json!("buy milk"));
    assert_eq!(out["shared"], json!("buy milk"));
    assert_eq!(out["file"], json!("buy milk"));
    assert_eq!(out["files"], json!(1));
    assert_eq!(out["escape"], json!("invalid_path"));

    // Another session sees the agent-wide value but none of the first session's own data.
    let (b, other) = memo_turn(&fx, json!({})).await;
    assert_ne!(a, b);
    assert_eq!(other.result["note"], Value::Null);
    assert_eq!(other.result["file"], Value::Null);
    assert_eq!(other.result["files"], json!(0));
    assert_eq!(other.result["shared"], json!("buy milk"));

    // Through the engine's own entry (what the server's routes use), scopes hold the same way.
    let as_b = fx.engine.host_services(HostScope::session(b.clone(), CallId::generate("memo")));
    assert_eq!(as_b.kv_get(Scope::Session, "note".into()).await.unwrap(), None);
    let as_a = fx.engine.host_services(HostScope::session(a.clone(), CallId::generate("memo")));
    assert_eq!(as_a.kv_get(Scope::Session, "note".into()).await.unwrap(), Some(json!("buy milk")));
    let unbound =
        fx.engine.host_services(HostScope { session_id: None, call_id: CallId::generate("x"), principal: None });
    assert_eq!(unbound.kv_get(Scope::Session, "note".into()).await.unwrap_err().code, "no_session");
    assert_eq!(unbound.kv_get(Scope::Agent, "shared".into()).await.unwrap(), Some(json!("buy milk")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_revoked_when_the_call_returns() {
    let fx = fixture(steps(&[json!({"remember": "x"})])).await;
    let (id, result) = memo_turn(&fx, json!({"remember": "x"})).await;
    let granted = fx.authority.granted.lock().unwrap().clone();
    assert_eq!(granted.len(), 1);
    let (scope, token) = &granted[0];
    assert_eq!(scope.session_id.as_ref(), Some(&id));
    assert_eq!(scope.call_id, result.call_id);
    assert_eq!(result.result["token"], json!(token), "the call saw the granted credentials");
    assert_eq!(*fx.authority.revoked.lock().unwrap(), vec![token.clone()]);

    let kept = fx.memo.kept.lock().unwrap().clone().unwrap();
    let error = kept.kv_get(Scope::Session, "note".into()).await.unwrap_err();
    assert_eq!(error.kind, HostErrorKind::Revoked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_starts_then_resumes_a_channel_session_as_the_caller() {
    let fx = fixture(steps(&[json!({"send": true})])).await;
    let (caller, result) = memo_turn(&fx, json!({"send": true})).await;
    let sent = &result.result["sent"];
    assert_eq!(sent[0]["created"], json!(true), "{sent}");
    assert_eq!(sent[1]["created"], json!(false), "{sent}");
    assert_eq!(sent[0]["sessionId"], sent[1]["sessionId"]);
    assert_eq!(sent[0]["continuationToken"], json!("ops:incident-7"));
    let id = SessionId::parse(sent[0]["sessionId"].as_str().unwrap()).unwrap();
    assert_ne!(id, caller);
    let record = within(fx.engine.session(&id, &alice())).await.unwrap();
    assert_eq!(record.channel, "ops");
    assert_eq!(record.principal, "alice");
}
