//! `bdk call`: `--dir` (an ephemeral in-process server on the project's state) on
//! examples/hello's `word_count`, and `--url` against a child `bdk serve`; both print the route's
//! JSON envelope, and the exit code says how it went (0 ran, 1 `isError`, 3 an error code).

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use super::serve::{Server, write_project};
use super::support::{OutputWithin, bdk, example};

/// Runs `bdk call ARGS`; returns the exit code, the parsed stdout envelope and stderr.
fn call(args: &[&str]) -> (i32, Value, String) {
    let Output { status, stdout, stderr } = bdk().arg("call").args(args).env_remove("BDK_TOKEN").output_within();
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let envelope = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("stdout is not JSON: {stdout}\n{stderr}"));
    (status.code().unwrap_or(-1), envelope, stderr)
}

/// A scripted project with a read tool that echoes its request and one that fails.
fn tool_project(root: &Path) -> String {
    let dir = write_project(root, "tooly", &["text = \"hi\""]);
    std::fs::create_dir_all(dir.join("bot/tools")).unwrap();
    std::fs::write(
        dir.join("bot/tools/echo.toml"),
        "description = \"Echo the request.\"\neffect = \"read\"\ncommand = [\"sh\", \"-c\", \"cat\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("bot/tools/fail.toml"),
        "description = \"Fails.\"\neffect = \"read\"\ncommand = [\"sh\", \"-c\", \"echo nope >&2; exit 2\"]\n",
    )
    .unwrap();
    dir.display().to_string()
}

#[test]
fn dir_runs_word_count_and_prints_the_envelope() {
    let state = tempfile::tempdir().unwrap();
    let hello = example("hello");
    let state_root = state.path().display().to_string();
    let (code, envelope, stderr) = call(&[
        "word_count",
        "--dir",
        &hello,
        "--state-root",
        &state_root,
        "--input",
        r#"{"text": "one two three\nfour"}"#,
    ]);
    assert_eq!(code, 0, "{envelope}\n{stderr}");
    assert_eq!(envelope["ok"], json!(true));
    assert_eq!(envelope["toolName"], json!("word_count"));
    assert_eq!(envelope["isError"], json!(false));
    assert_eq!(envelope["result"], json!({"words": 4, "lines": 2, "characters": 18}));
    assert!(envelope["callId"].as_str().unwrap().starts_with("tool_word_count_"));
    // The scratch workspace is gone.
    let calls = state.path().join("hello/tool-calls");
    assert!(!calls.exists() || calls.read_dir().unwrap().next().is_none());
}

#[test]
fn dir_error_codes_exit_3_with_the_error_envelope() {
    let state = tempfile::tempdir().unwrap();
    let hello = example("hello");
    let state_root = state.path().display().to_string();
    let base = ["--dir", hello.as_str(), "--state-root", state_root.as_str()];

    let (code, envelope, _) = call(&[&["nope"][..], &base, &["--input", "{}"]].concat());
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("unknown_tool"));
    assert_eq!(envelope["availableTools"], json!(["word_count"]));

    let (code, envelope, _) = call(&[&["word_count"][..], &base, &["--input", r#"{"text": 7}"#]].concat());
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("invalid_tool_input"));
    assert!(!envelope["errors"].as_array().unwrap().is_empty());

    let (code, envelope, _) = call(&[&["word_count"][..], &base, &["--input", "{not json"]].concat());
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("invalid_request"));

    let args = [&["word_count"][..], &base, &["--input", r#"{"text": "x"}"#, "--continuation-token", "nocolon"]];
    let (code, envelope, _) = call(&args.concat());
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("invalid_continuation_token"));

    let args = [&["word_count"][..], &base, &["--input", r#"{"text": "x"}"#, "--session", "ses_nothere"]];
    let (code, envelope, _) = call(&args.concat());
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("session_not_found"));
}

#[test]
fn is_error_exits_1() {
    let root = tempfile::tempdir().unwrap();
    let project = tool_project(&root.path().join("projects"));
    let state_root = root.path().join("state").display().to_string();
    let (code, envelope, _) = call(&["fail", "--dir", &project, "--state-root", &state_root]);
    assert_eq!(code, 1, "{envelope}");
    assert_eq!(envelope["ok"], json!(true));
    assert_eq!(envelope["isError"], json!(true));
    assert!(envelope["result"].as_str().unwrap().contains("nope"), "{envelope}");
}

#[test]
fn url_posts_to_a_running_server_and_prints_what_dir_prints() {
    let root = tempfile::tempdir().unwrap();
    let project = tool_project(&root.path().join("projects"));
    let state_root = root.path().join("state").display().to_string();
    let server =
        Server::start(&["--dir", &project, "--state-root", &state_root, "--bearer-token", "alice=alice-secret"]);
    let base = format!("{}/tooly", server.origin);
    let input = r#"{"city": "Paris"}"#;

    let (code, by_url, stderr) = call(&["echo", "--url", &base, "--input", input, "--token", "alice-secret"]);
    assert_eq!(code, 0, "{by_url}\n{stderr}");
    assert_eq!(by_url["result"]["input"], json!({"city": "Paris"}));
    let dir_state = root.path().join("dir-state").display().to_string();
    let (code, by_dir, _) = call(&["echo", "--dir", &project, "--state-root", &dir_state, "--input", input]);
    assert_eq!(code, 0, "{by_dir}");
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&by_url), keys(&by_dir));
    assert_eq!(by_url["result"]["input"], by_dir["result"]["input"]);

    // Error codes come back as the server's envelope, with exit 3.
    let (code, envelope, _) = call(&["nope", "--url", &base, "--input", "{}", "--token", "alice-secret"]);
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("unknown_tool"));
    let (code, envelope, _) = call(&["echo", "--url", &base, "--input", "{}"]);
    assert_eq!(code, 3, "{envelope}");
    assert_eq!(envelope["error"], json!("unauthorized"));
}

#[test]
fn input_dash_reads_the_input_from_stdin() {
    use std::io::Write;
    use std::process::Stdio;

    let state = tempfile::tempdir().unwrap();
    let mut child = bdk()
        .args(["call", "word_count", "--dir", &example("hello"), "--input", "-", "--state-root"])
        .arg(state.path())
        .env_remove("BDK_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"text": "read from stdin"}"#).unwrap();
    let deadline = std::time::Instant::now() + super::support::COMMAND_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "bdk call did not finish");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let Output { status, stdout, stderr } = child.wait_with_output().unwrap();
    let envelope: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(status.code(), Some(0), "{envelope}\n{}", String::from_utf8_lossy(&stderr));
    assert_eq!(envelope["result"]["words"], json!(3), "{envelope}");
}
