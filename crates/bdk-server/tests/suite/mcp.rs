//! Guards every agent as an MCP server: `/v1/mcp` (`ask`, `check`, `call_tool`) and
//! `/v1/mcp/tools` against the official Python MCP SDK client (PyPI `mcp`, installed by
//! `scripts/peers/mcp-python.sh`), the transport's 405s and the auth chain in front of it, and
//! two agents of one host talking as peers over an `agent = "<slug>"` connection.

use std::time::Duration;

use bdk_model::ScriptStep;
use bdk_server::{AuthPolicy, BearerToken};
use serde_json::{Value, json};

use super::support::{host, within};

const TOKEN: &str = "mcp-test-token";

const ADD_TOOL: &str = r#"description = "Add two integers."
effect = "read"
command = ["python3", "-c", "import json,sys; d=json.load(sys.stdin)['input']; print(json.dumps({'sum': d['a'] + d['b']}))"]

[input_schema]
type = "object"
required = ["a", "b"]
properties = { a = { type = "integer" }, b = { type = "integer" } }

[output_schema]
type = "object"
properties = { sum = { type = "integer" } }
"#;

fn bearer(options: &mut bdk_server::ServeOptions) {
    options.auth = AuthPolicy::from_flags(vec![BearerToken::parse(TOKEN).unwrap()], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_initializes_lists_asks_checks_and_calls_tools() {
    let Some(python) = bdk_test_support::peers::require("mcp-python") else { return };
    let host = host().options(bearer).token(TOKEN).file("bot/tools/add.toml", ADD_TOOL).start().await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/mcp_client.py");
    let run = tokio::process::Command::new(python.join("bin/python"))
        .arg(&script)
        .arg(&host.base)
        .arg(TOKEN)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run).await.expect("the client finishes").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "client failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let steps: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let step =
        |name: &str| steps.iter().find(|s| s["step"] == name).unwrap_or_else(|| panic!("no {name}: {stdout}")).clone();

    assert_eq!(step("no_token")["status"], 401);
    assert_eq!(step("sdk_no_token")["refused"], true);
    assert_eq!(step("initialize")["server"], "hello");
    assert_eq!(step("list_tools")["names"], json!(["ask", "check", "call_tool"]));

    let asked = step("ask");
    assert_eq!(asked["report"]["sessionId"].as_str().map(|s| s.starts_with("ses_")), Some(true), "{asked}");
    let checked = step("check")["report"].clone();
    assert_eq!(checked["status"], "completed", "{checked}");
    assert_eq!(checked["sessionId"], asked["report"]["sessionId"]);
    assert!(checked["reply"].as_str().unwrap().contains("hello from python"), "the echo model replies: {checked}");
    let again = step("follow_up")["report"].clone();
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["sessionId"], checked["sessionId"], "a follow-up continues the session");
    assert!(again["reply"].as_str().unwrap().contains("second"), "{again}");

    let called = step("call_tool");
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(called["result"]["ok"], true);
    assert_eq!(called["result"]["toolName"], "add");
    assert_eq!(called["result"]["result"], json!({"sum": 5}));
    let unknown = step("call_tool_unknown");
    assert_eq!(unknown["isError"], true);
    assert_eq!(unknown["result"]["error"], "unknown_tool", "the direct-call error table: {unknown}");

    let listed = step("tools_list")["tools"].clone();
    assert_eq!(listed[0]["name"], "add");
    assert_eq!(listed[0]["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(listed[0]["outputSchema"]["properties"]["sum"]["type"], "integer");
    let added = step("tools_call");
    assert_eq!(added["structured"], json!({"sum": 42}));
    assert_eq!(added["isError"], false);
    let invalid = step("tools_invalid");
    assert_eq!(invalid["isError"], true);
    assert_eq!(invalid["structured"]["error"], "invalid_tool_input", "{invalid}");
    step("done");
    host.shutdown().await;
}

#[tokio::test]
async fn the_endpoint_is_post_only_and_behind_the_auth_chain() {
    let host = host().options(bearer).token(TOKEN).start().await;
    for path in ["/v1/mcp", "/v1/mcp/tools"] {
        let get = host.request(reqwest::Method::GET, path).send().await.unwrap();
        assert_eq!(get.status(), 405, "GET {path}");
        let delete = host.request(reqwest::Method::DELETE, path).send().await.unwrap();
        assert_eq!(delete.status(), 405, "DELETE {path}");
        let anonymous = host.as_token(None);
        let refused = anonymous.request(reqwest::Method::POST, path).json(&json!({})).send().await.unwrap();
        assert_eq!(refused.status(), 401, "POST {path} without a token");
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_of_one_host_talk_as_peers() {
    // The one scripted model answers both agents in turn: `front` asks `back` through its
    // `mcp` tool, `back` answers, then `front` reports what it heard.
    let ask =
        json!({"action": "call", "server": "back", "tool": "ask", "arguments": {"message": "ping", "waitSeconds": 15}});
    let host = host()
        .agents(&["front", "back"])
        .file("bot/mcp-connections/back.toml", "description = \"The back office agent.\"\nagent = \"back\"\n")
        .script(vec![
            ScriptStep::tool_call("c1", "mcp", ask),
            ScriptStep::text("pong from back"),
            ScriptStep::text("back said pong"),
        ])
        .start()
        .await;
    let started = host.start_session("ask the back office").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "turn.completed", None).await;
    let events = host.events(&id).await;
    let result = events.iter().find(|e| e.event_type() == "action.result").expect("the mcp call has a result");
    let data = result.data.data_value().unwrap();
    let text = serde_json::to_string(&data).unwrap();
    assert!(text.contains("pong from back"), "the peer's reply reaches the model: {text}");
    assert!(text.contains("completed"), "{text}");
    // The peer's session is its own, owned by the calling agent.
    let back = host.state.agents.iter().find(|a| a.slug() == "back").unwrap();
    let sessions = within("the back sessions", back.engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].principal, "agent:front");
    assert_eq!(sessions[0].channel, "mcp");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_in_one_process_serving_the_same_folders_keep_their_peers_apart() {
    //! Guards: an agent's `agent = "<slug>"` connection reaches the peer mounted by its own host,
    //! even when another host in the process mounted the same project folders after it.
    let projects = tempfile::tempdir().unwrap();
    let connection = "description = \"The back office agent.\"\nagent = \"back\"\n";
    let ask =
        json!({"action": "call", "server": "back", "tool": "ask", "arguments": {"message": "ping", "waitSeconds": 15}});
    let first = host()
        .agents(&["front", "back"])
        .projects_root(projects.path())
        .file("bot/mcp-connections/back.toml", connection)
        .script(vec![
            ScriptStep::tool_call("c1", "mcp", ask),
            ScriptStep::text("pong from the first host"),
            ScriptStep::text("done"),
        ])
        .start()
        .await;
    // Mounted second, on the same folders; its model would answer differently.
    let second = host()
        .agents(&["front", "back"])
        .projects_root(projects.path())
        .file("bot/mcp-connections/back.toml", connection)
        .start()
        .await;
    let started = first.start_session("ask the back office").await;
    let id = started.session_id.to_string();
    first.wait_for(&id, "turn.completed", None).await;
    let events = first.events(&id).await;
    let result = events.iter().find(|e| e.event_type() == "action.result").expect("the mcp call has a result");
    let text = serde_json::to_string(&result.data.data_value().unwrap()).unwrap();
    assert!(text.contains("pong from the first host"), "{text}");
    for (host, expected) in [(&first, 1), (&second, 0)] {
        let back = host.state.agents.iter().find(|a| a.slug() == "back").unwrap();
        let sessions = within("the back sessions", back.engine.list(bdk_engine::ListScope::All)).await.unwrap();
        assert_eq!(sessions.len(), expected, "the peer session belongs to the calling agent's host");
    }
    second.shutdown().await;
    first.shutdown().await;
}

/// A command tool that calls `host.mcp` through `BDK_HOST_URL`: lists servers, then echoes.
const PROBE_TOOL: &str = r#"description = "Reach the host MCP connections."
command = ["python3", "-c", """
import json, os, urllib.request
def post(path, body):
    request = urllib.request.Request(os.environ['BDK_HOST_URL'] + path, data=json.dumps(body).encode(),
        headers={'authorization': 'Bearer ' + os.environ['BDK_HOST_TOKEN'], 'content-type': 'application/json'})
    return json.load(urllib.request.urlopen(request))
servers = json.load(urllib.request.urlopen(urllib.request.Request(os.environ['BDK_HOST_URL'] + '/mcp/servers',
    headers={'authorization': 'Bearer ' + os.environ['BDK_HOST_TOKEN']})))
tools = post('/mcp/tools', {'server': 'everything'})
echoed = post('/mcp/call', {'server': 'everything', 'tool': 'echo', 'arguments': {'message': 'via host'}})
print(json.dumps({'servers': servers['servers'], 'tools': len(tools['tools']), 'echoed': echoed}))
"""]

[input_schema]
type = "object"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_connections_reach_host_code_and_never_the_model() {
    let Some(dir) = bdk_test_support::peers::require("mcp-everything") else { return };
    let entry = std::fs::read_to_string(dir.join("entry")).unwrap();
    let connection = format!("command = \"node\"\nargs = [\"{}\", \"stdio\"]\n", entry.trim());
    let host = host()
        .file("bot/host-connections/everything.toml", &connection)
        .file("bot/tools/probe.toml", PROBE_TOOL)
        .start()
        .await;
    let agent = &host.state.agents[0];
    let names: Vec<String> = agent.engine.tools().specs().into_iter().map(|s| s.name).collect();
    assert!(!names.iter().any(|n| n == "mcp" || n == "echo"), "the model never sees host connections: {names:?}");

    let reply = host.post("/v1/tools/probe", &json!({"input": {}})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["isError"], false, "{:?}", reply.body);
    let result = &reply.body["result"];
    assert_eq!(result["servers"][0]["name"], "everything");
    assert_eq!(result["servers"][0]["scope"], "host");
    assert!(result["tools"].as_u64().unwrap() > 3, "{result}");
    assert_eq!(result["echoed"]["ok"], true);
    assert_eq!(result["echoed"]["isError"], false);
    assert_eq!(result["echoed"]["content"][0]["text"], "Echo: via host");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_peer_is_an_http_connection_with_a_bearer_token_from_the_environment() {
    // `back` is served by another host behind --bearer-token; a connection reaches its /v1/mcp
    // with `Authorization: Bearer ${BACK_TOKEN}`, the token read when the client opens.
    let back = host().agents(&["back"]).options(bearer).token(TOKEN).start().await;
    let def = bdk_project::model::ConnectionDef {
        name: "back".into(),
        scope: bdk_project::model::ConnectionScope::Model,
        source: bdk_protocol::info::Source::File,
        file: "bot/mcp-connections/back.toml".into(),
        description: None,
        transport: bdk_project::model::Transport::Http {
            url: "${BACK_URL}".into(),
            headers: vec![("Authorization".into(), "Bearer ${BACK_TOKEN}".into())],
        },
        advertise: bdk_project::model::Advertise::None,
        placeholders: vec!["BACK_TOKEN".into(), "BACK_URL".into()],
        namespace: None,
        allow_tools: None,
        deny_tools: Vec::new(),
        timeout: Duration::from_secs(20),
    };
    let url = format!("{}/v1/mcp", back.base);
    let env = move |token: &'static str| {
        let url = url.clone();
        std::sync::Arc::new(move |name: &str| match name {
            "BACK_URL" => Some(url.clone()),
            "BACK_TOKEN" => Some(token.to_owned()),
            _ => None,
        })
    };
    let hub = bdk_mcp::McpHub::with_lookup(std::slice::from_ref(&def), ".", bdk_mcp::PeerSlot::default(), env(TOKEN));
    let tools = within("listing the peer's tools", hub.tools("back")).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ask", "check"]);
    let asked =
        within("ask", hub.call("back", "ask", json!({"message": "over the wire", "waitSeconds": 10}))).await.unwrap();
    let report = asked.structured_content.expect("a structured report");
    assert_eq!(report["status"], "completed", "{report}");
    assert!(report["reply"].as_str().unwrap().contains("over the wire"), "{report}");
    hub.close().await;

    let wrong = bdk_mcp::McpHub::with_lookup(&[def], ".", bdk_mcp::PeerSlot::default(), env("not-the-token"));
    let refused = within("a refused open", wrong.tools("back")).await.unwrap_err().to_string();
    assert!(refused.contains("`back`"), "{refused}");
    back.shutdown().await;
}
