//! Guards what a broken connection looks like to the caller: a placeholder with no value, a
//! server that cannot start (then backs off), one that answers garbage (its stderr quoted),
//! allow/deny lists, and a call that runs past its timeout. Each is an error naming the server.

use std::time::Duration;

use bdk_project::model::Transport;
use serde_json::json;

use super::support::{def, everything, everything_stdio, hub, stdio};

#[tokio::test]
async fn a_missing_placeholder_is_named() {
    let transport = Transport::Stdio {
        command: "node".into(),
        args: vec![],
        env: vec![("TOKEN".into(), "${BDK_TEST_UNSET_TOKEN}".into())],
    };
    let hub = hub(&[def("needs-token", transport)], &[]);
    let error = hub.tools("needs-token").await.unwrap_err().to_string();
    assert!(error.contains("`needs-token`"), "{error}");
    assert!(error.contains("`BDK_TEST_UNSET_TOKEN` is not set"), "{error}");
}

#[tokio::test]
async fn a_server_that_cannot_start_is_retried_after_a_backoff() {
    let hub = hub(&[def("ghost", stdio("/nonexistent/mcp-server", &[]))], &[]);
    // A call within the backoff after a failed start (1 s, doubling with each failure) is
    // refused without a start. A loaded machine may take longer than that between two calls:
    // then that call is a new failed start (only allowed once the backoff has passed), and the
    // next window is twice as long.
    let mut failed_starts = 0;
    let mut previous_call = std::time::Instant::now();
    while failed_starts < 6 {
        let called = std::time::Instant::now();
        let error = hub.call("ghost", "x", json!({})).await.unwrap_err().to_string();
        if error.contains("next attempt in") {
            assert!(failed_starts > 0, "refused before any start: {error}");
            return;
        }
        assert!(error.contains("`ghost`") && error.contains("cannot run `/nonexistent/mcp-server`"), "{error}");
        if failed_starts > 0 {
            let window = bdk_mcp::server::backoff(failed_starts);
            assert!(previous_call.elapsed() >= window, "started again within the {window:?} backoff: {error}");
        }
        failed_starts += 1;
        previous_call = called;
    }
    panic!("no call came within the backoff after {failed_starts} failed starts");
}

#[tokio::test]
async fn a_server_answering_garbage_fails_with_its_stderr_tail() {
    let script = "echo 'boom: config missing' >&2; echo 'this is not json-rpc'; exit 3";
    let hub = hub(&[def("garbage", stdio("sh", &["-c", script]))], &[]);
    let error = hub.tools("garbage").await.unwrap_err().to_string();
    assert!(error.contains("`garbage`"), "{error}");
    assert!(error.contains("boom: config missing"), "the stderr tail is quoted: {error}");
}

#[tokio::test]
async fn unknown_servers_are_refused() {
    let hub = hub(&[], &[]);
    let error = hub.call("nope", "x", json!({})).await.unwrap_err().to_string();
    assert_eq!(error, "unknown MCP server `nope`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_deny_lists_and_timeouts_apply() {
    let Some(entry) = everything() else { return };
    let mut limited = def("limited", everything_stdio(&entry));
    limited.deny_tools = vec!["echo".into()];
    limited.timeout = Duration::from_millis(1500);
    let hub = hub(&[limited], &[]);
    let tools = hub.tools("limited").await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "echo"), "a denied tool is not listed");
    assert!(tools.iter().any(|t| t.name == "get-sum"));
    let denied = hub.call("limited", "echo", json!({"message": "x"})).await.unwrap_err().to_string();
    assert!(denied.contains("not allowed"), "{denied}");
    let slow = hub
        .call("limited", "trigger-long-running-operation", json!({"duration": 30, "steps": 2}))
        .await
        .unwrap_err()
        .to_string();
    assert!(slow.contains("timed out after 1.5s"), "{slow}");
    // The server is still usable after a timed-out call.
    let sum = hub.call("limited", "get-sum", json!({"a": 1, "b": 2})).await.unwrap();
    assert_ne!(sum.is_error, Some(true));
    hub.close().await;
}
