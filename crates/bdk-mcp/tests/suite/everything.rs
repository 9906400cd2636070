//! Guards the client against the reference MCP server from npm, over stdio and streamable HTTP:
//! listing, calling, tool errors, `structuredContent`, advertised tools and the `mcp` tool, a
//! server killed mid-session and used again, and shutdown leaving no process behind.

use std::sync::Arc;
use std::time::Duration;

use bdk_mcp::McpTools;
use bdk_project::model::{Advertise, Transport};
use bdk_tools::{Effect, ToolInvocation, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::support::{alive, def, eventually, everything, everything_stdio, hub, stdio};

async fn call(tools: &McpTools, name: &str, input: Value) -> bdk_tools::ToolOutcome {
    let invocation = ToolInvocation::generate(name, input);
    tokio::time::timeout(Duration::from_secs(30), tools.call(invocation, CancellationToken::new()))
        .await
        .expect("the call returns")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_lists_calls_and_reports_tool_errors() {
    let Some(entry) = everything() else { return };
    let mut everything = def("everything", everything_stdio(&entry));
    everything.advertise = Advertise::Only(vec!["echo".into(), "get-structured-content".into()]);
    let hub = hub(&[everything], &[]);
    let tools = McpTools::new(Arc::new(bdk_tools::NoTools), hub.clone());

    // Before a refresh only the `mcp` tool is there; the server has not started.
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["mcp"]);
    tools.refresh().await;
    let specs = tools.specs();
    let echo = specs.iter().find(|s| s.name == "echo").expect("echo is advertised");
    assert!(echo.input_schema["properties"]["message"].is_object(), "{:?}", echo.input_schema);
    assert!(specs.iter().any(|s| s.name == "get-structured-content" && s.output_schema.is_some()));
    assert!(!specs.iter().any(|s| s.name == "get-sum"), "get-sum is not advertised");
    assert_eq!(tools.effect("echo", &json!({"message": "x"})), Effect::Write);
    assert!(tools.lookup("echo").is_some_and(|i| i.callable));

    let outcome = call(&tools, "echo", json!({"message": "hello"})).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert_eq!(outcome.result, json!("Echo: hello"));

    let outcome = call(&tools, "get-structured-content", json!({"location": "Chicago"})).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert!(outcome.result["temperature"].is_number(), "structuredContent is kept: {outcome:?}");

    // The `mcp` tool reaches what is not advertised.
    let listed = call(&tools, "mcp", json!({"action": "list_servers"})).await;
    assert_eq!(listed.result["servers"][0]["name"], "everything");
    assert_eq!(listed.result["servers"][0]["transport"], "stdio");
    let listed = call(&tools, "mcp", json!({"action": "list_tools", "server": "everything"})).await;
    let names: Vec<&str> =
        listed.result["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"get-sum"), "{names:?}");
    let sum = call(
        &tools,
        "mcp",
        json!({"action": "call", "server": "everything", "tool": "get-sum", "arguments": {"a": 2, "b": 3}}),
    )
    .await;
    assert!(!sum.is_error, "{sum:?}");
    assert!(sum.result.as_str().unwrap().contains('5'), "{sum:?}");

    // A tool error reaches the model as a tool error, naming what went wrong.
    let bad = call(
        &tools,
        "mcp",
        json!({"action": "call", "server": "everything", "tool": "get-sum", "arguments": {"a": "two"}}),
    )
    .await;
    assert!(bad.is_error, "{bad:?}");
    let unknown = call(&tools, "mcp", json!({"action": "call", "server": "everything", "tool": "nope"})).await;
    assert!(unknown.is_error);
    assert!(unknown.result.as_str().unwrap().contains("`everything` has no tool `nope`"), "{unknown:?}");

    tools.shutdown().await;
    let closed = call(&tools, "echo", json!({"message": "late"})).await;
    assert!(closed.is_error, "a closed hub refuses: {closed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_session_is_restarted_and_closing_leaves_no_process() {
    let Some(entry) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > '{}'; exec node '{}' stdio", pid_file.display(), entry.display());
    let hub = hub(&[def("everything", stdio("sh", &["-c", &script]))], &[]);
    let read_pid = || std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse::<i32>().ok());

    let first = hub.call("everything", "echo", json!({"message": "one"})).await.unwrap();
    assert_ne!(first.is_error, Some(true));
    let pid = read_pid().expect("the server wrote its pid");
    assert!(alive(pid));

    // Killed while a long call is in flight: that call fails with the server's name.
    let long = {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.call("everything", "trigger-long-running-operation", json!({"duration": 20, "steps": 2})).await
        })
    };
    rustix_kill(pid);
    let failed = tokio::time::timeout(Duration::from_secs(20), long).await.expect("the call ends").unwrap();
    let error = failed.expect_err("the call fails when its server dies").to_string();
    assert!(error.contains("`everything`"), "{error}");

    // Used again: the next calls open a new process (a start right after the death may race
    // the old session's teardown, so calls are retried until one works, within a generous
    // deadline rather than a count that a loaded machine can use up).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let again = loop {
        match hub.call("everything", "echo", json!({"message": "two"})).await {
            Ok(result) => break result,
            Err(error) => {
                assert!(tokio::time::Instant::now() < deadline, "the server is not used again: {error}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    };
    assert_ne!(again.is_error, Some(true));
    let new_pid = read_pid().unwrap();
    assert_ne!(new_pid, pid, "a new process serves");

    hub.close().await;
    eventually("the server process to end", || !alive(new_pid)).await;
}

fn rustix_kill(pid: i32) {
    let status = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_lists_and_calls_with_resolved_placeholders() {
    let Some(entry) = everything() else { return };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new("node")
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "the HTTP server did not listen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let transport = Transport::Http {
        url: "http://127.0.0.1:${EVERYTHING_PORT}/mcp".into(),
        headers: vec![("X-Api-Key".into(), "${EVERYTHING_KEY}".into())],
    };
    let port_text = port.to_string();
    let hub = hub(&[def("remote", transport)], &[("EVERYTHING_PORT", &port_text), ("EVERYTHING_KEY", "k")]);
    let tools = hub.tools("remote").await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let result = hub.call("remote", "echo", json!({"message": "over http"})).await.unwrap();
    assert_eq!(bdk_mcp::convert::result_value(&result), json!("Echo: over http"));
    let error = hub.call("remote", "get-sum", json!({"a": "x"})).await;
    match error {
        Ok(result) => assert_eq!(result.is_error, Some(true)),
        Err(error) => assert!(error.to_string().contains("`remote`"), "{error}"),
    }
    hub.close().await;
    let _ = server.kill().await;
}
