//! `POST /v1/tools/:name` over a real socket, against a project with tiny `sh` command tools: every
//! row of the reference's error table (unknown_tool with the callable names, tool_not_callable,
//! invalid_tool_input with the validation errors, invalid_continuation_token, session_not_found,
//! session_busy, workspace_unavailable, and `isError: true` in a 200), the success envelope, the
//! scratch workspace's removal, session and token binding, the owner check and auth; approvals
//! never gate a direct call, and a bound call keeps its session's `dryRun` and `asOf`.

use std::path::PathBuf;
use std::time::Duration;

use bdk_model::ScriptStep;
use bdk_protocol::{Event, EventData};
use bdk_server::{AuthPolicy, BearerToken};
use serde_json::{Value, json};

use super::support::*;

/// Prints its request (`{"input", "context"}`) back: a read.
const ECHO_READ: &str = r#"description = "Echo the request."
effect = "read"
command = ["sh", "-c", "cat"]
"#;

/// Writes its request into the workspace, then prints it: effect undeclared, so a write.
const ECHO_WRITE: &str = r#"description = "Write the request into the workspace."
command = ["sh", "-c", "cat > \"$BDK_WORKSPACE_DIR/written.json\" && cat \"$BDK_WORKSPACE_DIR/written.json\""]
"#;

/// Fails with a message on stderr.
const FAIL: &str = r#"description = "Always fails."
effect = "read"
command = ["sh", "-c", "cat > /dev/null; echo 'the disk is on fire' >&2; exit 3"]
"#;

/// Wants `{n: integer}`.
const STRICT: &str = r#"description = "Wants a number."
effect = "read"
command = ["sh", "-c", "cat"]

[input_schema]
type = "object"
required = ["n"]
properties = { n = { type = "integer" } }
"#;

/// An agent tool: it runs in a session workspace, never on the host.
const AGENT_ECHO: &str = r##"description = "Echo from the agent workspace."
execution = "agent"
script = "#!/bin/sh\ncat\n"
"##;

/// Needs a person when the model calls it; a direct call is not the model's choice.
const GATED: &str = r#"description = "Needs approval."
effect = "read"
needs_approval = true
command = ["sh", "-c", "cat"]
"#;

/// A write with a dry-run stub; for real it leaves `published.txt` in the workspace.
const PUBLISH: &str = r#"description = "Publish."
effect = "write"
dry_run_result = { published = false }
command = ["sh", "-c", "cat > /dev/null; touch \"$BDK_WORKSPACE_DIR/published.txt\"; echo '{\"published\": true}'"]
"#;

/// A read whose `not_after` is a time bound under `asOf`.
const WINDOW: &str = r#"description = "Read up to an instant."
effect = "read"
time_args = ["not_after"]
command = ["sh", "-c", "cat"]

[input_schema]
type = "object"
properties = { not_after = { type = "string" } }
"#;

fn with_tools(builder: Builder) -> Builder {
    builder
        .file("bot/tools/echo_read.toml", ECHO_READ)
        .file("bot/tools/echo_write.toml", ECHO_WRITE)
        .file("bot/tools/fail.toml", FAIL)
        .file("bot/tools/strict.toml", STRICT)
        .file("bot/tools/agent_echo.toml", AGENT_ECHO)
}

async fn tools_host() -> Host {
    with_tools(host()).start().await
}

async fn call(host: &Host, tool: &str, body: Value) -> Reply {
    host.post(&format!("/v1/tools/{tool}"), &body).await
}

/// Asserts the success envelope and returns the tool's result.
fn ok_result(reply: &Reply, tool: &str) -> Value {
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text);
    assert_eq!(reply.body["ok"], json!(true), "{}", reply.text);
    assert_eq!(reply.body["toolName"], json!(tool));
    assert!(reply.body["callId"].as_str().unwrap().starts_with(&format!("tool_{tool}_")), "{}", reply.text);
    assert!(reply.body["durationMs"].is_u64(), "{}", reply.text);
    assert!(reply.body["isError"].is_boolean(), "{}", reply.text);
    reply.body["result"].clone()
}

/// Starts a chat session and waits until its first turn settled.
async fn idle_session(host: &Host) -> (String, String) {
    let started = host.start_session("hello").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    (id, started.continuation_token)
}

fn direct(events: &[Event]) -> Vec<&Event> {
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
async fn an_unbound_call_answers_the_envelope_and_removes_its_scratch_workspace() {
    let host = tools_host().await;
    let reply = call(&host, "echo_write", json!({"input": {"city": "Paris"}})).await;
    let result = ok_result(&reply, "echo_write");
    assert_eq!(reply.body["isError"], json!(false));
    assert!(reply.body.get("scratchWorkspace").is_none(), "{}", reply.text);
    let keys: Vec<&str> = reply.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["ok", "toolName", "callId", "isError", "result", "durationMs"]);
    assert_eq!(result["input"], json!({"city": "Paris"}));
    assert_eq!(result["context"]["callId"], reply.body["callId"]);
    assert_eq!(result["context"]["sessionId"], Value::Null);
    let workspace = PathBuf::from(result["context"]["workspaceDir"].as_str().unwrap());
    assert_eq!(workspace.file_name().unwrap().to_str(), reply.body["callId"].as_str());
    assert_eq!(workspace.parent().unwrap().file_name().unwrap(), "tool-calls");
    assert!(!workspace.exists(), "the scratch workspace is removed when the call returns");
    // No input at all is `{}`.
    let reply = call(&host, "echo_read", json!({})).await;
    assert_eq!(ok_result(&reply, "echo_read")["input"], json!({}));
}

#[tokio::test]
async fn is_error_is_a_200_with_the_tools_failure() {
    let host = tools_host().await;
    let reply = call(&host, "fail", json!({"input": {}})).await;
    let result = ok_result(&reply, "fail");
    assert_eq!(reply.body["isError"], json!(true));
    assert!(result.as_str().unwrap().contains("the disk is on fire"), "{}", reply.text);
}

#[tokio::test]
async fn unknown_tool_is_404_and_lists_the_callable_names() {
    let host = tools_host().await;
    let reply = call(&host, "nope", json!({"input": {}})).await;
    reply.assert_error(404, "unknown_tool");
    let available: Vec<&str> =
        reply.body["availableTools"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for name in ["echo_read", "echo_write", "fail", "strict"] {
        assert!(available.contains(&name), "{name} missing from {available:?}");
    }
    assert!(!available.contains(&"agent_echo"), "agent tools are not callable: {available:?}");
    assert!(!available.contains(&"read"), "built-ins are not callable: {available:?}");
    assert!(reply.body["message"].as_str().unwrap().contains("echo_read"), "{}", reply.text);
}

#[tokio::test]
async fn tool_not_callable_is_400_for_agent_tools() {
    let host = tools_host().await;
    let reply = call(&host, "agent_echo", json!({"input": {"message": "hi"}})).await;
    reply.assert_error(400, "tool_not_callable");
    assert!(reply.body["message"].as_str().unwrap().contains("agent tool"), "{}", reply.text);
}

#[tokio::test]
async fn invalid_tool_input_is_400_with_the_validation_errors() {
    let host = tools_host().await;
    let reply = call(&host, "strict", json!({"input": {"n": "one"}})).await;
    reply.assert_error(400, "invalid_tool_input");
    let errors = reply.body["errors"].as_array().unwrap();
    assert!(!errors.is_empty() && errors[0].as_str().unwrap().contains("/n"), "{}", reply.text);
    let missing = call(&host, "strict", json!({"input": {}})).await;
    missing.assert_error(400, "invalid_tool_input");
    ok_result(&call(&host, "strict", json!({"input": {"n": 3}})).await, "strict");
}

#[tokio::test]
async fn invalid_continuation_token_is_400_when_malformed_or_paired_with_a_session_id() {
    let host = tools_host().await;
    for token in ["no-colon", ":key", "slack:", "sl ack:key"] {
        call(&host, "echo_read", json!({"input": {}, "continuationToken": token}))
            .await
            .assert_error(400, "invalid_continuation_token");
    }
    let (id, token) = idle_session(&host).await;
    let both = call(&host, "echo_read", json!({"input": {}, "sessionId": id, "continuationToken": token})).await;
    both.assert_error(400, "invalid_continuation_token");
    assert!(both.body["message"].as_str().unwrap().contains("mutually exclusive"), "{}", both.text);
    // A malformed id with a token is still the pair's error.
    call(&host, "echo_read", json!({"sessionId": "nope", "continuationToken": "slack:C1"}))
        .await
        .assert_error(400, "invalid_continuation_token");
}

#[tokio::test]
async fn session_not_found_is_404() {
    let host = tools_host().await;
    let missing = bdk_protocol::SessionId::generate();
    call(&host, "echo_read", json!({"input": {}, "sessionId": missing})).await.assert_error(404, "session_not_found");
    call(&host, "echo_read", json!({"input": {}, "sessionId": "nope"})).await.assert_error(404, "session_not_found");
}

#[tokio::test]
async fn a_bound_call_uses_the_session_workspace_and_is_recorded() {
    let host = tools_host().await;
    let (id, token) = idle_session(&host).await;
    let reply = call(&host, "echo_write", json!({"input": {"x": 1}, "sessionId": id})).await;
    let result = ok_result(&reply, "echo_write");
    assert_eq!(result["context"]["sessionId"], json!(id));
    let workspace = PathBuf::from(result["context"]["workspaceDir"].as_str().unwrap());
    assert!(workspace.ends_with(format!("sessions/{id}/workspace")), "{}", workspace.display());
    assert!(workspace.join("written.json").exists());

    let events = host.events(&id).await;
    let recorded = direct(&events);
    assert_eq!(recorded.len(), 2, "{:?}", types(&events));
    let turn = recorded[0].turn_id.clone().unwrap();
    assert_eq!(recorded[1].turn_id.as_ref(), Some(&turn));
    assert_eq!(result["context"]["turnId"], json!(turn));
    assert!(events.iter().filter(|e| e.event_type() == "turn.started").all(|e| e.turn_id.as_ref() != Some(&turn)));
    // The session is still listed as waiting.
    let listed = host.get("/v1/sessions").await;
    assert_eq!(listed.body["sessions"][0]["status"], json!("waiting"), "{}", listed.text);

    // Its current token binds the same way.
    let reply = call(&host, "echo_read", json!({"input": {}, "continuationToken": token})).await;
    let result = ok_result(&reply, "echo_read");
    assert_eq!(result["context"]["sessionId"], json!(id));
    assert_eq!(result["context"]["channel"], json!("http"));
    assert_eq!(direct(&host.events(&id).await).len(), 4);
}

#[tokio::test]
async fn a_token_with_no_session_runs_scratch_with_its_identity() {
    let host = tools_host().await;
    let reply = call(&host, "echo_read", json!({"input": {}, "continuationToken": "slack:C123"})).await;
    let result = ok_result(&reply, "echo_read");
    assert_eq!(result["context"]["sessionId"], Value::Null);
    assert_eq!(result["context"]["channel"], json!("slack"));
    assert_eq!(result["context"]["continuationKey"], json!("C123"));
    assert!(result["context"]["workspaceDir"].as_str().unwrap().contains("tool-calls"));
}

#[tokio::test]
async fn session_busy_is_409_for_writes_while_reads_run_beside_the_turn() {
    let hang = ScriptStep::text("never said").with_delay(Duration::from_secs(3600));
    let host = with_tools(host()).script(vec![hang]).start().await;
    let started = host.start_session("hello").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "step.started", None).await;

    call(&host, "echo_write", json!({"input": {}, "sessionId": id})).await.assert_error(409, "session_busy");
    let read = call(&host, "echo_read", json!({"input": {}, "sessionId": id})).await;
    let result = ok_result(&read, "echo_read");
    assert_eq!(result["context"]["sessionId"], json!(id));
    let turn = started.turn_id.clone().unwrap();
    assert_ne!(result["context"]["turnId"], json!(turn), "the read runs under its own turnId");

    let events = host.events(&id).await;
    assert_eq!(direct(&events).len(), 2, "only the read is recorded: {:?}", types(&events));
    let stop = host.post(&format!("/v1/session/{id}/stop"), &json!({})).await;
    assert_eq!(stop.status.as_u16(), 200, "{}", stop.text);
    host.wait_for(&id, "session.waiting", None).await;
    ok_result(&call(&host, "echo_write", json!({"input": {}, "sessionId": id})).await, "echo_write");
}

#[tokio::test]
async fn workspace_unavailable_is_500_for_writes_while_reads_fall_back_to_scratch() {
    let host = tools_host().await;
    let (id, _) = idle_session(&host).await;
    let reply = call(&host, "echo_read", json!({"input": {}, "sessionId": id})).await;
    let workspace = PathBuf::from(ok_result(&reply, "echo_read")["context"]["workspaceDir"].as_str().unwrap());
    std::fs::remove_dir_all(&workspace).unwrap();
    std::fs::write(&workspace, "not a folder").unwrap();

    let write = call(&host, "echo_write", json!({"input": {}, "sessionId": id})).await;
    write.assert_error(500, "workspace_unavailable");
    assert!(!write.body["message"].as_str().unwrap().contains(&*workspace.to_string_lossy()), "{}", write.text);

    let read = call(&host, "echo_read", json!({"input": {}, "sessionId": id})).await;
    let result = ok_result(&read, "echo_read");
    assert_eq!(read.body["scratchWorkspace"], json!(true), "{}", read.text);
    let scratch = PathBuf::from(result["context"]["workspaceDir"].as_str().unwrap());
    assert!(scratch.to_string_lossy().contains("tool-calls"), "{}", scratch.display());
    assert!(!scratch.exists());
}

#[tokio::test]
async fn the_auth_chain_and_the_owner_check_apply() {
    let tokens = vec![BearerToken::named("alice", "a-secret"), BearerToken::named("bob", "b-secret")];
    let host =
        with_tools(host()).options(|o| o.auth = AuthPolicy::from_flags(tokens, false)).token("a-secret").start().await;
    let (id, token) = idle_session(&host).await;
    let bob = host.as_token(Some("b-secret"));
    call(&bob, "echo_read", json!({"input": {}, "sessionId": id})).await.assert_error(403, "forbidden");
    call(&bob, "echo_read", json!({"input": {}, "continuationToken": token})).await.assert_error(403, "forbidden");
    ok_result(&call(&bob, "echo_read", json!({"input": {}})).await, "echo_read");
    let nobody = host.as_token(None);
    call(&nobody, "echo_read", json!({"input": {}})).await.assert_error(401, "unauthorized");
    assert!(direct(&host.events(&id).await).is_empty());
}

#[tokio::test]
async fn a_malformed_body_is_invalid_request() {
    let host = tools_host().await;
    call(&host, "echo_read", json!({"input": {}, "session_id": "ses_x"})).await.assert_error(400, "invalid_request");
    call(&host, "echo_read", json!("text")).await.assert_error(400, "invalid_request");
}

#[tokio::test]
async fn direct_calls_skip_approvals() {
    let host = with_tools(host()).file("bot/tools/gated.toml", GATED).start().await;
    let result = ok_result(&call(&host, "gated", json!({"input": {"x": 1}})).await, "gated");
    assert_eq!(result["input"], json!({"x": 1}));

    let (id, _) = idle_session(&host).await;
    let bound = call(&host, "gated", json!({"input": {}, "sessionId": id})).await;
    assert_eq!(bound.body["isError"], json!(false), "{}", bound.text);
    let kinds = types(&host.events(&id).await);
    assert!(!kinds.iter().any(|t| t.starts_with("action.approval")), "nothing was parked: {kinds:?}");
    let parked = host.get(&format!("/v1/session/{id}/approvals")).await;
    assert_eq!(parked.body["approvals"], json!([]), "{}", parked.text);
}

#[tokio::test]
async fn a_bound_call_keeps_the_sessions_dry_run() {
    let host = with_tools(host()).file("bot/tools/publish.toml", PUBLISH).start().await;
    let started = host.post("/v1/session", &json!({"message": "hi", "dryRun": true})).await;
    assert_eq!(started.status.as_u16(), 200, "{}", started.text);
    let id = started.body["sessionId"].as_str().unwrap().to_owned();
    host.wait_for(&id, "session.waiting", None).await;

    let stubbed = ok_result(&call(&host, "publish", json!({"input": {}, "sessionId": id})).await, "publish");
    assert_eq!(stubbed, json!({"published": false}), "the write was stubbed");
    // Reads still run, and see the session's dry-run.
    let read = ok_result(&call(&host, "echo_read", json!({"input": {}, "sessionId": id})).await, "echo_read");
    assert_eq!(read["context"]["dryRun"], json!(true), "{read}");
    let workspace = PathBuf::from(read["context"]["workspaceDir"].as_str().unwrap());
    assert!(!workspace.join("published.txt").exists(), "the stubbed write never ran");
    // Unbound, the same call runs for real.
    assert_eq!(ok_result(&call(&host, "publish", json!({"input": {}})).await, "publish"), json!({"published": true}));
}

#[tokio::test]
async fn a_bound_call_keeps_the_sessions_as_of() {
    let host = with_tools(host()).file("bot/tools/window.toml", WINDOW).start().await;
    let started = host.post("/v1/session", &json!({"message": "hi", "asOf": "2025-01-31T12:00:00Z"})).await;
    assert_eq!(started.status.as_u16(), 200, "{}", started.text);
    let id = started.body["sessionId"].as_str().unwrap().to_owned();
    host.wait_for(&id, "session.waiting", None).await;

    let late = json!({"input": {"not_after": "2025-02-01T00:00:00Z"}, "sessionId": id});
    let refused = call(&host, "window", late).await;
    assert_eq!(refused.status.as_u16(), 200, "{}", refused.text);
    assert_eq!(refused.body["isError"], json!(true), "a bound past asOf is refused: {}", refused.text);
    assert!(refused.body["result"].to_string().contains("not_after"), "{}", refused.text);

    let early = json!({"input": {"not_after": "2025-01-01T00:00:00Z"}, "sessionId": id});
    let result = ok_result(&call(&host, "window", early).await, "window");
    assert_eq!(result["context"]["asOf"], json!("2025-01-31T12:00:00Z"), "{result}");
    // Unbound, there is no frozen time to enforce.
    let free = call(&host, "window", json!({"input": {"not_after": "2025-02-01T00:00:00Z"}})).await;
    assert_eq!(free.body["isError"], json!(false), "{}", free.text);
}
