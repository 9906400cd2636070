//! `bdk chat` and `bdk run` as a person uses them, on a pseudo-terminal (Python's `pty`
//! module types the lines when the expected text appears, every wait bounded): an approval
//! answered inline, a turn stopped with `/stop`, a session resumed by id, and `run` deciding
//! parked calls by policy, or exiting 4 with the flags to use instead of waiting forever; a
//! chat's follow-ups with the rotating token, `/new` and `/dry-run` (in process and by URL);
//! `run` showing each step before the turn ends; colour on a terminal, none under `NO_COLOR`.

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

/// Runs `bdk ARGS` on a terminal through the driver, with `NO_COLOR=1`; returns (exit code,
/// transcript).
fn on_pty(steps: Value, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut all = vec![("NO_COLOR", "1")];
    all.extend_from_slice(env);
    on_pty_with(steps, args, &all)
}

/// [`on_pty`] without `NO_COLOR` unless `env` sets it: the terminal gets colour.
fn on_pty_with(steps: Value, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new("python3");
    command.arg(DRIVER).arg(steps.to_string()).arg(env!("CARGO_BIN_EXE_bdk")).args(args);
    scrub(&mut command);
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

/// Starts `bdk serve` on `dir` with its state in `state` and `env` set; returns the child and
/// its origin.
fn serve(dir: &str, state: &Path, env: &[(&str, &str)]) -> (std::process::Child, String) {
    use std::io::BufRead as _;
    let mut serve = bdk();
    scrub(&mut serve);
    serve.args(["serve", "--port", "0", "--dir", dir, "--state-root"]).arg(state).envs(env.iter().copied());
    let mut child = serve.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    match rx.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(line) => (child, line.trim_start_matches("listening on ").to_string()),
        Err(_) => {
            let _ = child.kill();
            panic!("bdk serve printed no address");
        }
    }
}

#[test]
fn chat_talks_to_a_running_server_by_url() {
    let state = tempfile::tempdir().unwrap();
    let (mut child, origin) = serve(&example("refunds"), state.path(), &[]);
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

/// Every `session ses_...` line of a transcript: the sessions a chat started, in order.
fn started_sessions(transcript: &str) -> Vec<String> {
    transcript.match_indices("session ses_").map(|(at, _)| transcript[at + 8..at + 38].to_string()).collect()
}

fn record(state: &Path, slug: &str, id: &str) -> Value {
    let path = state.join(slug).join("sessions").join(id).join("session.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn received(state: &Path, slug: &str, id: &str) -> usize {
    let log = std::fs::read_to_string(state.join(slug).join("sessions").join(id).join("events.ndjson")).unwrap();
    log.matches("\"message.received\"").count()
}

/// Three messages in one session (each follow-up carries the token the last answer rotated
/// to), then `/new` and `/dry-run` each start a new session with the next message: in process
/// (`--dir`) and against a running server (`--url`), where the first session is then resumed
/// by id with its current token.
#[test]
fn chat_keeps_the_rotating_token_and_starts_new_and_dry_run_sessions() {
    let steps = json!([
        { "expect": "/help for commands", "send": "alpha one" },
        { "expect": "session ses_" },
        { "expect": "> ", "send": "beta two" },
        { "expect": "beta two" },
        { "expect": "beta two" },
        { "expect": "> ", "send": "gamma three" },
        { "expect": "gamma three" },
        { "expect": "gamma three" },
        { "expect": "> ", "send": "/new" },
        { "expect": "the next message starts a new session" },
        { "expect": "> ", "send": "delta four" },
        { "expect": "session ses_" },
        { "expect": "> ", "send": "/dry-run" },
        { "expect": "dry run on" },
        { "expect": "> ", "send": "epsilon five" },
        { "expect": "(dry run)" },
        { "expect": "> ", "eof": true },
        { "expect": "session: ses_" },
    ]);
    let echo = [("BDK_MODEL_PROVIDER", "scripted")];
    let check = |transcript: &str, state: &Path| {
        assert!(!transcript.contains("error:"), "{transcript}");
        let ids = started_sessions(transcript);
        assert_eq!(ids.len(), 3, "three sessions started: {transcript}");
        assert_eq!(received(state, "hello", &ids[0]), 3, "three messages in the first session");
        assert_eq!(received(state, "hello", &ids[1]), 1);
        assert_eq!(record(state, "hello", &ids[1])["dryRun"], Value::Null, "/new keeps dry run off");
        assert_eq!(record(state, "hello", &ids[2])["dryRun"], true, "/dry-run turns it on for the next session");
        assert!(
            transcript.contains(&format!("session: {}", ids[2])),
            "the chat ends naming the last session: {transcript}"
        );
    };

    let local = tempfile::tempdir().unwrap();
    let state = local.path().display().to_string();
    let (code, transcript) =
        on_pty(steps.clone(), &["chat", "--dir", &example("hello"), "--state-root", &state], &echo);
    assert_eq!(code, 0, "{transcript}");
    check(&transcript, local.path());

    let remote = tempfile::tempdir().unwrap();
    let (mut child, origin) = serve(&example("hello"), remote.path(), &echo);
    let url = format!("{origin}/hello");
    let (code, transcript) = on_pty(steps, &["chat", "--url", &url], &[]);
    assert_eq!(code, 0, "{transcript}");
    check(&transcript, remote.path());

    // Resume the first session over --url with its current token.
    let first = started_sessions(&transcript)[0].clone();
    let token = record(remote.path(), "hello", &first)["continuationToken"].as_str().unwrap().to_owned();
    let steps = json!([
        { "expect": "resumed session", "send": "zeta six" },
        { "expect": "zeta six" },
        { "expect": "zeta six" },
        { "expect": "> ", "eof": true },
        { "expect": "session: " },
    ]);
    let args = ["chat", "--url", &url, "--session", &first, "--continuation-token", &token];
    let (code, transcript) = on_pty(steps, &args, &[]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 0, "{transcript}");
    assert_eq!(received(remote.path(), "hello", &first), 4, "the resumed session got the message: {transcript}");
}

/// `run` prints each step as it happens: the first step's text, tool call and result are on
/// the terminal while the second model call has not answered (it never does; ctrl-c ends it).
#[test]
fn run_streams_each_step_before_the_turn_ends() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("streamy");
    std::fs::create_dir_all(project.join("bot/tools")).unwrap();
    std::fs::write(project.join("bot/instructions.md"), "Look things up.\n").unwrap();
    std::fs::write(
        project.join("bot/agent.toml"),
        "[model]\nprovider = \"scripted\"\n\n[[model.params.script]]\ntext = \"Looking it up. \"\n\
         tool_calls = [{ name = \"echo\", arguments = { order = \"A-7\" } }]\n\n\
         [[model.params.script]]\ntext = \"never\"\ndelay_ms = 600000\n",
    )
    .unwrap();
    std::fs::write(
        project.join("bot/tools/echo.toml"),
        "description = \"Echoes.\"\neffect = \"read\"\ncommand = [\"cat\"]\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let state = root.path().join("state").display().to_string();
    let steps = json!([
        { "expect": "Looking it up." },
        { "expect": "→ echo {\"order\":\"A-7\"}" },
        { "expect": "← echo", "send": "\u{3}" },
    ]);
    let (code, transcript) =
        on_pty(steps, &["run", "--dir", &project.display().to_string(), "-m", "find A-7", "--state-root", &state], &[]);
    // 1: every expectation was met and then ctrl-c ended the process (2 would be a timeout).
    assert_eq!(code, 1, "{transcript}");
    assert!(!transcript.contains("never") && !transcript.contains("usage:"), "the turn had not ended: {transcript}");
}

/// On a terminal without `NO_COLOR`, `run` shows reasoning dimmed and `validate` colours
/// severities; with `NO_COLOR` set, the same text comes without escapes.
#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let args = ["run", "--dir", &example("refunds"), "-m", "broken", "--state-root", &state_arg, "--approve", "all"];
    let steps = json!([{ "expect": "session: ses_" }]);
    let (code, transcript) = on_pty_with(steps.clone(), &args, &[]);
    assert_eq!(code, 0, "{transcript}");
    assert!(transcript.contains("\u{1b}[2mThe customer wants a refund"), "reasoning is dimmed: {transcript:?}");
    let (code, transcript) = on_pty_with(steps, &args, &[("NO_COLOR", "1")]);
    assert_eq!(code, 0, "{transcript}");
    assert!(!transcript.contains('\u{1b}'), "{transcript:?}");

    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bot")).unwrap();
    std::fs::write(root.path().join("bot/agent.toml"), "max_step = 3\n").unwrap();
    let dir = root.path().display().to_string();
    let steps = json!([{ "expect": "validation failed" }]);
    let (code, transcript) = on_pty_with(steps.clone(), &["validate", "--dir", &dir], &[]);
    assert_eq!(code, 1, "validate failed: {transcript}");
    assert!(transcript.contains("\u{1b}[31merror[unknown_key]"), "{transcript:?}");
    let (_, transcript) = on_pty_with(steps, &["validate", "--dir", &dir], &[("NO_COLOR", "1")]);
    assert!(transcript.contains("error[unknown_key]") && !transcript.contains('\u{1b}'), "{transcript:?}");
}
