//! The approvals routes and the tool-policy fields of `POST /v1/session`, over a real socket
//! with a project whose tools are tiny `sh` commands: listing a parked call, approving and
//! denying it, 403 for another principal, 404 for a call that is not parked, 400 for a bad
//! decision; `dryRun` (stubbed writes), `asOf` (400 when in the future or without a timezone;
//! the `time_args` refusal is the engine suite's, as a project naming an unknown property does
//! not load) and `workspaceFiles` (written before the turn).

use bdk_model::ScriptStep;
use bdk_server::{AuthPolicy, BearerToken};
use serde_json::{Value, json};

use super::support::{Host, host};

const PROMOTE: &str = r#"description = "Promote a build."
needs_approval = true
command = ["sh", "-c", "cat > /dev/null; echo '{\"promoted\": true}'"]

[input_schema]
type = "object"
required = ["env"]
properties = { env = { type = "string" } }
"#;

const PUBLISH: &str = r#"description = "Publish."
effect = "write"
dry_run_result = { published = false }
command = ["sh", "-c", "cat > /dev/null; echo '{\"published\": true}'"]
"#;

const CAT_NOTES: &str = r#"description = "Read notes.txt from the workspace."
effect = "read"
command = ["sh", "-c", "cat > /dev/null; cat \"$BDK_WORKSPACE_DIR/notes.txt\""]
"#;

fn two_principals() -> AuthPolicy {
    AuthPolicy::from_flags(
        vec![BearerToken::parse("alice=alice-secret").unwrap(), BearerToken::parse("bob=bob-secret").unwrap()],
        false,
    )
}

async fn promote_host(steps: Vec<ScriptStep>) -> Host {
    host()
        .options(|o| o.auth = two_principals())
        .token("alice-secret")
        .file("bot/tools/promote.toml", PROMOTE)
        .script(steps)
        .start()
        .await
}

/// The `action.result` of the session's only call, as JSON.
async fn only_result(host: &Host, id: &str) -> Value {
    data(&host.wait_for(id, "action.result", None).await)
}

/// An event's payload (`data`) as JSON.
fn data(event: &bdk_protocol::Event) -> Value {
    serde_json::to_value(event).unwrap()["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_is_listed_then_approved() {
    let host = promote_host(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})),
        ScriptStep::text("Promoted."),
    ])
    .await;
    let started = host.start_session("promote it").await;
    let id = started.session_id.to_string();
    let requested = data(&host.wait_for(&id, "action.approval_requested", None).await);
    let call = requested["callId"].as_str().unwrap().to_owned();

    let listed = host.get(&format!("/v1/session/{id}/approvals")).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body["ok"], json!(true));
    let approvals = listed.body["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{}", listed.text);
    assert_eq!(approvals[0]["callId"], json!(call));
    assert_eq!(approvals[0]["toolName"], json!("promote"));
    assert_eq!(approvals[0]["input"], json!({"env": "prod"}));
    assert_eq!(approvals[0]["turnId"], json!(started.turn_id.as_ref().unwrap().to_string()));
    assert!(approvals[0]["requestedAt"].as_str().is_some());

    let path = format!("/v1/session/{id}/approvals/{call}");
    host.post(&path, &json!({"decision": "maybe"})).await.assert_error(400, "invalid_request");
    host.post(&path, &json!({"decision": "expired"})).await.assert_error(400, "invalid_request");
    host.post(&path, &json!({})).await.assert_error(400, "invalid_request");
    let bob = host.as_token(Some("bob-secret"));
    bob.get(&format!("/v1/session/{id}/approvals")).await.assert_error(403, "forbidden");
    bob.post(&path, &json!({"decision": "approve"})).await.assert_error(403, "forbidden");
    host.post(&format!("/v1/session/{id}/approvals/tool_promote_nope"), &json!({"decision": "approve"}))
        .await
        .assert_error(404, "approval_not_found");
    host.post(&format!("/v1/session/{id}/approvals/not-an-id"), &json!({"decision": "approve"}))
        .await
        .assert_error(404, "approval_not_found");

    let approved = host.post(&path, &json!({"decision": "approve"})).await;
    assert_eq!(approved.status, 200, "{}", approved.text);
    assert_eq!(approved.body["decision"], json!("approve"));
    assert_eq!(approved.body["callId"], json!(call));
    // Once answered, `action.approval_resolved` is already in the log.
    let events = host.events(&id).await;
    assert!(events.iter().any(|e| e.event_type() == "action.approval_resolved"));
    host.post(&path, &json!({"decision": "approve"})).await.assert_error(404, "approval_not_found");

    let result = only_result(&host, &id).await;
    assert_eq!(result["isError"], json!(false));
    assert_eq!(result["result"], json!({"promoted": true}));
    host.wait_for(&id, "session.waiting", None).await;
    let listed = host.get(&format!("/v1/session/{id}/approvals")).await;
    assert_eq!(listed.body["approvals"], json!([]));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_answers_the_model_with_an_error() {
    let host = promote_host(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})),
        ScriptStep::text("Not promoted."),
    ])
    .await;
    let started = host.start_session("promote it").await;
    let id = started.session_id.to_string();
    let requested = data(&host.wait_for(&id, "action.approval_requested", None).await);
    let call = requested["callId"].as_str().unwrap();
    let denied = host.post(&format!("/v1/session/{id}/approvals/{call}"), &json!({"decision": "deny"})).await;
    assert_eq!(denied.status, 200, "{}", denied.text);
    let resolved = data(&host.wait_for(&id, "action.approval_resolved", None).await);
    assert_eq!(resolved["decision"], json!("deny"));
    assert_eq!(resolved["principal"], json!("alice"));
    let result = only_result(&host, &id).await;
    assert_eq!(result["isError"], json!(true));
    assert_eq!(result["result"], json!(bdk_engine::DENIED));
    host.wait_for(&id, "session.waiting", None).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_have_no_approvals() {
    let host = promote_host(vec![]).await;
    host.get("/v1/session/ses_nope/approvals").await.assert_error(404, "session_not_found");
    host.post("/v1/session/ses_nope/approvals/tool_x_y", &json!({"decision": "approve"}))
        .await
        .assert_error(404, "session_not_found");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_sessions_stub_writes() {
    let host = host()
        .file("bot/tools/publish.toml", PUBLISH)
        .script(vec![ScriptStep::tool_call("c1", "publish", json!({})), ScriptStep::text("ok")])
        .start()
        .await;
    let reply = host.post("/v1/session", &json!({"message": "publish", "dryRun": true})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let id = reply.body["sessionId"].as_str().unwrap();
    let result = only_result(&host, id).await;
    assert_eq!(result["stubbed"], json!(true));
    assert_eq!(result["result"], json!({"published": false}));
    let started = data(&host.events(id).await[0]);
    assert_eq!(started["dryRun"], json!(true));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_of_must_be_a_past_instant_with_a_timezone() {
    let host = host().script(vec![ScriptStep::text("ok")]).start().await;
    for as_of in ["2024-01-01T00:00:00", "yesterday", "2999-01-01T00:00:00Z"] {
        let reply = host.post("/v1/session", &json!({"message": "q", "asOf": as_of})).await;
        reply.assert_error(400, "invalid_request");
        assert!(reply.body["message"].as_str().unwrap().contains("asOf"), "{}", reply.text);
    }
    let listed = host.get("/v1/sessions").await;
    assert_eq!(listed.body["sessions"], json!([]), "nothing was recorded: {}", listed.text);
    let accepted = host.post("/v1/session", &json!({"message": "q", "asOf": "2024-01-01T00:00:00+02:00"})).await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    let id = accepted.body["sessionId"].as_str().unwrap();
    let started = data(&host.events(id).await[0]);
    assert_eq!(started["asOf"], json!("2023-12-31T22:00:00Z"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_files_are_written_before_the_turn() {
    let host = host()
        .file("bot/tools/cat_notes.toml", CAT_NOTES)
        .script(vec![
            ScriptStep::tool_call("c1", "cat_notes", json!({})),
            ScriptStep::text("read"),
            ScriptStep::tool_call("c2", "cat_notes", json!({})),
            ScriptStep::text("read again"),
        ])
        .start()
        .await;
    let body = json!({"message": "read", "workspaceFiles": {"notes.txt": "first notes"}});
    let reply = host.post("/v1/session", &body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let id = reply.body["sessionId"].as_str().unwrap().to_owned();
    let token = reply.body["continuationToken"].as_str().unwrap().to_owned();
    assert_eq!(only_result(&host, &id).await["result"], json!("first notes"));
    let waiting = host.wait_for(&id, "session.waiting", None).await;

    let bad = json!({"continuationToken": token, "message": "x", "workspaceFiles": {"../escape": "x"}});
    host.post(&format!("/v1/session/{id}"), &bad).await.assert_error(400, "invalid_request");
    let next = json!({"continuationToken": token, "message": "again", "workspaceFiles": {"notes.txt": "second notes"}});
    let reply = host.post(&format!("/v1/session/{id}"), &next).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let result = data(&host.wait_for(&id, "action.result", Some(waiting.index)).await);
    assert_eq!(result["result"], json!("second notes"));
    host.shutdown().await;
}
