//! `bdk run`, `bdk trajectory` and `bdk cost --dir` on the hello example with the offline
//! scripted model: the reply, the trace file, the same JSON from `run --json` and from the
//! saved trace (torn last line included), and the cost report.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::support::{OutputWithin, bdk, example};

/// `bdk` with the scripted model and no model settings inherited from the environment.
fn offline() -> Command {
    let mut command = bdk();
    for var in ["BDK_MODEL", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"] {
        command.env_remove(var);
    }
    command.env("BDK_MODEL_PROVIDER", "scripted");
    command
}

fn output(command: &mut Command) -> (i32, String, String) {
    let out = command.output_within();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn run_json(state: &Path, message: &str) -> Value {
    let (code, stdout, stderr) = output(
        offline().args(["run", "--dir", &example("hello"), "--message", message, "--json", "--state-root"]).arg(state),
    );
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn filters() -> Vec<(&'static str, &'static str)> {
    vec![(r"ses_[0-9a-z]{26}", "[session]"), (r"turn_[0-9a-z]{26}", "[turn]"), (r"/tmp/[^\s\x22]+", "[tmp]")]
}

#[test]
fn run_prints_the_reply_and_usage_and_writes_a_trace() {
    let state = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = output(
        offline()
            .args(["run", "--dir", &example("hello"), "--message", "Say hello.", "--state-root"])
            .arg(state.path()),
    );
    assert_eq!(code, 0, "{stderr}");
    insta::with_settings!({ filters => filters(), prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("run_text_hello", stdout);
    });
    let traces: Vec<_> = std::fs::read_dir(state.path().join("hello/traces")).unwrap().collect();
    assert_eq!(traces.len(), 1);
}

#[test]
fn trajectory_of_the_trace_matches_run_json() {
    let state = tempfile::tempdir().unwrap();
    let ran = run_json(state.path(), "What is two and two?");
    assert_eq!(ran["reply"], "What is two and two?");
    assert_eq!(ran["status"], "waiting");
    assert_eq!(ran["events"], 10, "session.started, agent.bound, message.received, the turn, session.waiting");
    assert!(ran["usage"]["inputTokens"].as_u64().unwrap() > 0);
    let id = ran["sessionId"].as_str().unwrap();
    let trace = state.path().join("hello/traces").join(format!("{id}.ndjson"));

    let (code, stdout, stderr) = output(bdk().args(["trajectory", "--events"]).arg(&trace));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), ran);

    // The session's own log folds the same way.
    let log = state.path().join("hello/sessions").join(id).join("events.ndjson");
    let (code, stdout, _) = output(bdk().args(["trajectory", "--events"]).arg(&log));
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), ran);

    // A torn last line (a crash mid-write) is skipped.
    let torn = state.path().join("torn.ndjson");
    let mut bytes = std::fs::read(&trace).unwrap();
    bytes.extend_from_slice(br#"{"type":"message.app"#);
    std::fs::write(&torn, bytes).unwrap();
    let (code, stdout, stderr) = output(bdk().args(["trajectory", "--events"]).arg(&torn));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("torn"), "{stderr}");
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), ran);

    // Damage that is not a torn tail is an error.
    let broken = state.path().join("broken.ndjson");
    std::fs::write(&broken, "not json\n").unwrap();
    let (code, _, stderr) = output(bdk().args(["trajectory", "--events"]).arg(&broken));
    assert_ne!(code, 0);
    assert!(stderr.contains("line 1"), "{stderr}");
}

#[test]
fn cost_reads_the_session_from_the_state_directory() {
    let state = tempfile::tempdir().unwrap();
    let ran = run_json(state.path(), "Count my tokens.");
    let id = ran["sessionId"].as_str().unwrap();
    let (code, stdout, stderr) = output(
        bdk().args(["cost", "--dir", &example("hello"), "--session", id, "--json", "--state-root"]).arg(state.path()),
    );
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["turns"].as_array().unwrap().len(), 1);
    assert_eq!(report["usage"], ran["usage"]);
    assert_eq!(report["costUsd"], ran["costUsd"]);

    let missing = "ses_00000000000000000000000000";
    let (code, _, stderr) = output(
        bdk().args(["cost", "--dir", &example("hello"), "--session", missing, "--state-root"]).arg(state.path()),
    );
    assert_ne!(code, 0);
    assert!(stderr.contains("not found"), "{stderr}");
}

#[test]
fn a_failed_turn_exits_3_with_its_error() {
    // A model server that refuses connections: the turn fails, and `run` says so.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let state = tempfile::tempdir().unwrap();
    let mut command = bdk();
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_API_KEY"] {
        command.env_remove(var);
    }
    command.env("BDK_MODEL_BASE_URL", &url).env("BDK_MODEL_API_KEY", "test-key");
    let (code, stdout, stderr) =
        output(command.args(["run", "--dir", &example("hello"), "--message", "hi", "--state-root"]).arg(state.path()));
    assert_eq!(code, 3, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("Connection refused"), "the failure is printed: {stderr}");
}

#[test]
fn a_missing_key_names_the_variable_and_both_offline_ways() {
    let state = tempfile::tempdir().unwrap();
    let mut command = bdk();
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY", "XAI_API_KEY"] {
        command.env_remove(var);
    }
    let (code, stdout, stderr) =
        output(command.args(["run", "--dir", &example("hello"), "--message", "hi", "--state-root"]).arg(state.path()));
    assert_eq!(code, 3, "stdout: {stdout}\nstderr: {stderr}");
    for needle in
        ["error: ", "set XAI_API_KEY", "BDK_MODEL_PROVIDER=scripted", "[[model.params.script]]", "examples/refunds"]
    {
        assert!(stderr.contains(needle), "{needle} in {stderr}");
    }
}
