//! End to end through a real provider: `bdk serve` (a child process) on a project whose
//! `agent.toml` points `openai-compatible` at the fake OpenAI server. The model calls a command
//! tool (a small `sh` script), gets its result back in the second request, and answers; the
//! session's stream shows the reference's events in order, `turn.completed` carries usage and
//! cost, and the cost route folds them. Also: with no usable credential the server starts
//! anyway and a turn fails with `model_unavailable` naming the variable to set.

use std::path::{Path, PathBuf};

use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
use serde_json::{Value, json};

use super::serve::{Server, client, stream_until, within};

/// A project `slug` with `[model]` written as given and an `add` command tool.
fn write_project(root: &Path, slug: &str, model: &str) -> PathBuf {
    let bot = root.join(slug).join("bot");
    std::fs::create_dir_all(bot.join("tools")).unwrap();
    std::fs::create_dir_all(bot.join("lib")).unwrap();
    std::fs::write(bot.join("agent.toml"), format!("name = \"{slug}\"\n\n{model}")).unwrap();
    std::fs::write(bot.join("instructions.md"), "Use the add tool for sums.\n").unwrap();
    std::fs::write(
        bot.join("tools/add.toml"),
        r#"description = "Adds two integers."
effect = "read"
command = ["sh", "lib/add.sh"]

[input_schema]
type = "object"
required = ["a", "b"]
properties = { a = { type = "integer" }, b = { type = "integer" } }
"#,
    )
    .unwrap();
    // The request is `{"input": {...}, "context": {...}}` on stdin, compact JSON.
    std::fs::write(
        bot.join("lib/add.sh"),
        r#"request=$(cat)
a=$(printf '%s' "$request" | sed -n 's/.*"input":{[^}]*"a":\([0-9]*\).*/\1/p')
b=$(printf '%s' "$request" | sed -n 's/.*"input":{[^}]*"b":\([0-9]*\).*/\1/p')
printf '{"sum":%d}\n' $((a + b))
"#,
    )
    .unwrap();
    root.join(slug)
}

/// Starts a session on `origin` with `message`; returns its id.
pub(super) async fn start_session(origin: &str, message: &str) -> String {
    let response = within(
        "POST /v1/session",
        client().post(format!("{origin}/v1/session")).json(&json!({"message": message})).send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["sessionId"].as_str().unwrap_or_else(|| panic!("no sessionId in {body}")).to_owned()
}

/// Reads the session's NDJSON stream up to and including the first `session.waiting`.
async fn until_waiting(origin: &str, session: &str) -> Vec<Value> {
    stream_until(format!("{origin}/v1/session/{session}/stream?startIndex=0"), "session.waiting").await
}

/// Event types with each run of `message.appended` shown once.
fn shape(events: &[Value]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for event in events {
        let kind = event["type"].as_str().unwrap();
        if !(kind == "message.appended" && out.last() == Some(&kind)) {
            out.push(kind);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_against_the_fake_openai_server() {
    let model = FakeServer::start().await;
    // Step 1: the `add` call, arguments in fragments. Step 2: the answer, in three deltas.
    model.push(Reply::sse(vec![
        oa::role(),
        oa::tool_call(0, Some("call_1"), Some("add"), ""),
        oa::tool_call(0, None, None, r#"{"a": "#),
        oa::tool_call(0, None, None, r#"2, "b": 40}"#),
        oa::finish("tool_calls"),
        oa::usage(100, 20, 0, 0),
        oa::done(),
    ]));
    model.push(Reply::sse(vec![
        oa::role(),
        oa::text("The sum"),
        oa::text(" is "),
        oa::text("42."),
        oa::finish("stop"),
        oa::usage(150, 10, 100, 0),
        oa::done(),
    ]));
    let root = tempfile::tempdir().unwrap();
    let project = write_project(
        root.path(),
        "adder",
        &format!(
            "[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{}\"\n\n\
             [model.pricing]\ninput = 1.0\noutput = 2.0\ncached_input = 0.5\n",
            model.url()
        ),
    );
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);

    let session = start_session(&server.origin, "What is 2 + 40?").await;
    let events = until_waiting(&server.origin, &session).await;
    assert_eq!(
        shape(&events),
        [
            "session.started",
            "agent.bound",
            "message.received",
            "turn.started",
            "step.started",
            "step.completed",
            "actions.requested",
            "action.result",
            "step.started",
            "message.appended",
            "message.completed",
            "step.completed",
            "turn.completed",
            "session.waiting",
        ],
        "{events:#?}"
    );
    let find = |kind: &str| events.iter().find(|e| e["type"] == kind).unwrap();
    let step = &find("step.completed")["data"];
    assert_eq!((&step["step"], &step["finishReason"]), (&json!(0), &json!("tool_calls")), "{step}");
    let calls = &find("actions.requested")["data"]["calls"];
    assert_eq!((&calls[0]["toolName"], &calls[0]["input"]), (&json!("add"), &json!({"a": 2, "b": 40})), "{calls}");
    // The engine names calls itself (`tool_<name>_<ulid>`); the model sees the ulid.
    let call_id = calls[0]["callId"].as_str().unwrap();
    let result = &find("action.result")["data"];
    assert_eq!(result["callId"], json!(call_id));
    assert_eq!((&result["isError"], &result["result"]), (&json!(false), &json!({"sum": 42})), "{result}");
    let appended: String = events
        .iter()
        .filter(|e| e["type"] == "message.appended")
        .map(|e| e["data"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(appended, "The sum is 42.");
    assert_eq!(find("message.completed")["data"]["text"], json!("The sum is 42."));

    // Usage is the two steps' sum; cost = (250 - 100) × 1 + 100 × 0.5 + 30 × 2 per million tokens.
    let completed = &find("turn.completed")["data"];
    assert_eq!(
        completed["usage"],
        json!({"inputTokens": 250, "outputTokens": 30, "cachedInputTokens": 100, "reasoningTokens": 0}),
        "{completed}"
    );
    let cost = completed["estimatedCostUsd"].as_f64().unwrap();
    assert!((cost - 0.00026).abs() < 1e-9, "{completed}");
    assert_eq!(completed["model"], json!("fake-model"));
    assert_eq!(completed["result"], json!("The sum is 42."));

    // What the fake server was sent: the tool in the first request, its result in the second.
    let requests = model.wait_for_requests(2).await;
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body["model"], json!("fake-model"));
    assert_eq!(requests[0].body["tools"][0]["function"]["name"], json!("add"));
    let messages = requests[1].body["messages"].as_array().unwrap();
    let model_call_id = &call_id[call_id.len() - 26..];
    let call = messages.iter().find(|m| m["role"] == "assistant").expect("the assistant's tool call is sent back");
    assert_eq!(call["tool_calls"][0]["id"], json!(model_call_id), "{call}");
    assert_eq!(call["tool_calls"][0]["function"]["name"], json!("add"), "{call}");
    let tool = messages.iter().find(|m| m["role"] == "tool").expect("the tool result is sent back");
    assert_eq!(tool["tool_call_id"], json!(model_call_id), "{tool}");
    assert!(tool["content"].as_str().unwrap().contains("42"), "{tool}");

    // The cost route folds the same events.
    let report: Value = within("GET cost", async {
        client().get(format!("{}/v1/session/{session}/cost", server.origin)).send().await.unwrap().json().await.unwrap()
    })
    .await;
    assert!((report["costUsd"].as_f64().unwrap() - 0.00026).abs() < 1e-9, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_credential_the_server_starts_and_turns_fail_saying_what_to_set() {
    let root = tempfile::tempdir().unwrap();
    // `Server::start` clears XAI_API_KEY and BDK_MODEL_API_KEY.
    let project = write_project(root.path(), "keyless", "[model]\nid = \"grok-4.5\"\nprovider = \"xai\"\n");
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let health: Value = within("health", async {
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap()
    })
    .await;
    assert_eq!(health["ok"], json!(true));

    let session = start_session(&server.origin, "hello?").await;
    let events = until_waiting(&server.origin, &session).await;
    let failed = events.iter().find(|e| e["type"] == "turn.failed").unwrap_or_else(|| panic!("{events:#?}"));
    let message = failed["data"]["message"].as_str().unwrap();
    assert!(message.contains("model_unavailable") || message.contains("model unavailable"), "{message}");
    assert!(message.contains("XAI_API_KEY"), "{message}");
    assert_eq!(failed["data"]["status"], json!("failed"));
    assert!(events.iter().all(|e| e["type"] != "turn.completed"));
}
