//! `bdk chat` and `bdk run` as a person uses them, on a pseudo-terminal (Python's `pty`
//! module types the lines when the expected text appears, every wait bounded): an approval
//! answered inline, a turn stopped with `/stop`, a session resumed by id, and `run` deciding
//! parked calls by policy, or exiting 4 with the flags to use instead of waiting forever.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::support::{OutputWithin as _, bdk, example};

const DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/suite/pty_driver.py");

fn scrub(command: &mut Command) {
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY", "NO_COLOR"] {
        command.env_remove(var);
    }
}

/// Runs `bdk ARGS` on a terminal through the driver; returns (exit code, transcript).
fn on_pty(steps: Value, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new("python3");
    command.arg(DRIVER).arg(steps.to_string()).arg(env!("CARGO_BIN_EXE_bdk")).args(args);
    scrub(&mut command);
    command.env("NO_COLOR", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output_within();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn session_id(transcript: &str) -> String {
    let start = transcript.find("ses_").expect("a session id is printed");
    transcript[start..start + 30].to_string()
}

fn status(state: &Path, slug: &str, id: &str) -> String {
    let path = state.join(slug).join("sessions").join(id).join("session.json");
    let record: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    record["status"].as_str().unwrap_or_default().to_string()
}

#[test]
fn chat_asks_for_an_approval_inline_and_runs_the_approved_call() {
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let steps = json!([
        { "expect": "/help for commands", "send": "My teapot arrived broken, order A-1001" },
        { "expect": "approve refund? [y/n] ", "send": "maybe" },
        { "expect": "approve refund? [y/n] ", "send": "y" },
        { "expect": "refund approved" },
        { "expect": "\"refunded\":true" },
        { "expect": "Done: I asked for a refund" },
        { "expect": "> ", "send": "/cost" },
        { "expect": "1 turns:" },
        { "expect": "> ", "send": "/trace" },
        { "expect": "trace: " },
        { "expect": "> ", "eof": true },
        { "expect": "session: ses_" },
    ]);
    let (code, transcript) = on_pty(steps, &["chat", "--dir", &example("refunds"), "--state-root", &state_arg], &[]);
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("→ lookup_order {\"order_id\":\"A-1001\"}"), "tool calls stream: {transcript}");
    assert!(transcript.contains("The customer wants a refund"), "reasoning is shown: {transcript}");
    let id = session_id(&transcript);
    assert_eq!(status(state.path(), "refunds", &id), "waiting", "a chat session waits for the next message");
    let refunds = state.path().join("refunds/sessions").join(&id).join("workspace/refunds.jsonl");
    assert!(std::fs::read_to_string(refunds).unwrap().contains("A-1001"), "the approved call ran");
    assert!(state.path().join("refunds/traces").join(format!("{id}.ndjson")).exists());
}

#[test]
fn chat_stops_a_running_turn_and_resumes_a_session_by_id() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("slow");
    std::fs::create_dir_all(project.join("bot")).unwrap();
    std::fs::write(project.join("bot/instructions.md"), "Be slow.\n").unwrap();
    // One step whose first event waits ten minutes: only /stop ends the turn.
    std::fs::write(
        project.join("bot/agent.toml"),
        "[model]\nprovider = \"scripted\"\n\n[[model.params.script]]\ntext = \"never\"\ndelay_ms = 600000\n",
    )
    .unwrap();
    let state = root.path().join("state").display().to_string();
    let dir = project.display().to_string();
    let steps = json!([
        { "expect": "/help for commands", "send": "take your time" },
        { "expect": "session ses_", "send": "hello?" },
        { "expect": "a turn is running", "send": "/stop" },
        { "expect": "turn cancelled" },
        { "expect": "> ", "send": "/quit" },
        { "expect": "session: ses_" },
    ]);
    let (code, transcript) = on_pty(steps, &["chat", "--dir", &dir, "--state-root", &state], &[]);
    assert_eq!(code, 0, "{transcript}");
    let id = session_id(&transcript);
    assert_eq!(status(&root.path().join("state"), "slow", &id), "waiting");

    // Resume it with the echoing model: the message goes to the same session (its token read
    // from session.json), and the reply streams.
    let hello_state = root.path().join("hello-state").display().to_string();
    let mut first = bdk();
    scrub(&mut first);
    let out = first
        .env("BDK_MODEL_PROVIDER", "scripted")
        .args(["run", "--dir", &example("hello"), "-m", "first message", "--state-root", &hello_state])
        .output_within();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let id = session_id(&String::from_utf8_lossy(&out.stdout));
    let steps = json!([
        { "expect": "resumed session", "send": "second message" },
        { "expect": "second message" },
        { "expect": "> ", "eof": true },
        { "expect": "session: " },
    ]);
    let args = ["chat", "--dir", &example("hello"), "--state-root", &hello_state, "--session", &id];
    let (code, transcript) = on_pty(steps, &args, &[("BDK_MODEL_PROVIDER", "scripted")]);
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains(&format!("session: {id}")), "{transcript}");
    let log = std::fs::read_to_string(Path::new(&hello_state).join("hello/sessions").join(&id).join("events.ndjson"))
        .unwrap();
    assert_eq!(log.matches("\"message.received\"").count(), 2, "both messages are in one session");
}

fn run_refunds(state: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut command = bdk();
    scrub(&mut command);
    command.args(["run", "--dir", &example("refunds"), "-m", "order A-1001 arrived broken", "--state-root"]);
    command.arg(state).args(extra);
    let out = command.output_within();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_exits_4_naming_the_flags_when_nothing_decides_a_parked_call() {
    let state = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = run_refunds(state.path(), &[]);
    assert_eq!(code, 4, "{stdout}{stderr}");
    assert!(stderr.starts_with("error: the refund call needs approval"), "{stderr}");
    assert!(stderr.contains("--approve refund") && stderr.contains("--deny refund"), "{stderr}");
    let id = session_id(&stdout);
    assert!(stderr.contains(&format!("--session {id}")), "{stderr}");
    assert_eq!(status(state.path(), "refunds", &id), "waiting", "the stopped turn is closed; the session waits");

    // Continue the same session with a policy: the call is denied and the model is told.
    let (code, stdout, stderr) = run_refunds(state.path(), &["--session", &id, "--deny", "refund"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("refund denied"), "{stdout}");
    assert!(stdout.contains(&format!("session: {id}")), "{stdout}");
    assert_eq!(status(state.path(), "refunds", &id), "waiting");
}

#[test]
fn run_approves_by_policy_and_streams_on_a_terminal() {
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let steps = json!([{ "expect": "refund approved" }, { "expect": "session: ses_" }]);
    let args = ["run", "--dir", &example("refunds"), "-m", "broken", "--state-root", &state_arg, "--approve", "all"];
    let (code, transcript) = on_pty(steps, &args, &[]);
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("\"refunded\":true"), "{transcript}");
    let id = session_id(&transcript);
    assert_eq!(status(state.path(), "refunds", &id), "waiting");
}

#[test]
fn chat_talks_to_a_running_server_by_url() {
    use std::io::BufRead as _;
    let state = tempfile::tempdir().unwrap();
    let mut serve = bdk();
    scrub(&mut serve);
    serve.args(["serve", "--port", "0", "--dir", &example("refunds"), "--state-root"]).arg(state.path());
    let mut child = serve.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(std::time::Duration::from_secs(30));
    let origin = match first {
        Ok(line) => line.trim_start_matches("listening on ").to_string(),
        Err(_) => {
            let _ = child.kill();
            panic!("bdk serve printed no address");
        }
    };
    let url = format!("{origin}/refunds");
    let steps = json!([
        { "expect": "/help for commands", "send": "My teapot arrived broken" },
        { "expect": "approve refund? [y/n] ", "send": "n" },
        { "expect": "refund denied" },
        { "expect": "> ", "send": "/cost" },
        { "expect": "1 turns:" },
        { "expect": "> ", "eof": true },
        { "expect": "session: ses_" },
    ]);
    let (code, transcript) = on_pty(steps, &["chat", "--url", &url], &[]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains(&format!("chatting with {url}")), "{transcript}");
    assert!(transcript.contains("← refund error:") || transcript.contains("denied"), "{transcript}");
    let id = session_id(&transcript);
    assert_eq!(status(state.path(), "refunds", &id), "waiting");
}
