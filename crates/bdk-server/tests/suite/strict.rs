//! Request bodies are strict on every route of the session API that takes one: an unknown field
//! (a typo such as `dryrun`) is a 400 `invalid_request` that names it and lists the accepted
//! fields, so it never silently starts a live session; a value of the wrong type names its
//! field. (The host routes are covered in host_services.rs, the eval-run route in evals.rs.)

use serde_json::json;

use super::support::{Reply, host};

fn assert_names(reply: &Reply, needles: &[&str]) {
    reply.assert_error(400, "invalid_request");
    let message = reply.body["message"].as_str().unwrap_or_default();
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_and_wrong_types_are_named() {
    let host = host().file("bot/tools/ask.toml", ASK_TOML).start().await;

    let typo = host.post("/v1/session", &json!({"message": "hi", "dryrun": true})).await;
    assert_names(&typo, &["unknown field `dryrun`", "`dryRun`", "`message`", "`workspaceFiles`"]);
    let wrong = host.post("/v1/session", &json!({"message": "hi", "dryRun": "yes"})).await;
    assert_names(&wrong, &["field `dryRun`", "expected a boolean"]);
    let wrong = host.post("/v1/session", &json!({"message": 7})).await;
    assert_names(&wrong, &["field `message`", "expected a string"]);
    assert!(host.get("/v1/sessions").await.body["sessions"].as_array().is_none_or(Vec::is_empty), "nothing started");

    let started = host.start_session("hi").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    let follow = json!({"continuationToken": started.continuation_token, "message": "x", "admision": "coalesce"});
    let typo = host.post(&format!("/v1/session/{id}"), &follow).await;
    assert_names(&typo, &["unknown field `admision`", "`admission`", "`continuationToken`"]);
    let wrong = json!({"continuationToken": started.continuation_token, "message": "x", "workspaceFiles": {"a": 1}});
    let wrong = host.post(&format!("/v1/session/{id}"), &wrong).await;
    assert_names(&wrong, &["field `workspaceFiles.a`", "expected a string"]);

    let typo = host.post("/v1/tools/ask", &json!({"inputs": {}})).await;
    assert_names(&typo, &["unknown field `inputs`", "`input`", "`sessionId`"]);
    let wrong = host.post("/v1/tools/ask", &json!({"sessionId": 5})).await;
    assert_names(&wrong, &["field `sessionId`"]);

    let approval = format!("/v1/session/{id}/approvals/tool_ask_01m8t4b3h8ccgm4302sfs41kfm");
    let typo = host.post(&approval, &json!({"decision": "approve", "note": "ok"})).await;
    assert_names(&typo, &["unknown field `note`", "`decision`"]);
    host.shutdown().await;
}

const ASK_TOML: &str = r#"
description = "Ask for something."
effect = "read"
command = ["python3", "-c", "print('{}')"]
[input_schema]
type = "object"
"#;
