//! What every command shares: a closed stdout ends quietly, error lines start `error: `,
//! `--dir` defaults to `.`, `.env` fills in (never overrides) the environment, `help --json`
//! prints the command tree and `completions` prints a shell script.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::support::{COMMAND_TIMEOUT, OutputWithin as _, bdk, example, run, wait_until};

/// Runs `bdk ARGS` with stdout a pipe whose reader is already closed.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = bdk().args(args).stdin(Stdio::null()).stdout(writer).stderr(Stdio::piped()).spawn().unwrap();
    let (status, in_time) = wait_until(&mut child, COMMAND_TIMEOUT);
    assert!(in_time, "`bdk {}` ran past {COMMAND_TIMEOUT:?}", args.join(" "));
    // It has exited: what it wrote to stderr is all in the pipe.
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let examples = super::support::repo_root().join("examples").display().to_string();
    // A session for `cost` to read (`bdk cost ... | head`).
    let state = tempfile::tempdir().unwrap();
    let state_arg = state.path().display().to_string();
    let hello = example("hello");
    let out = bdk()
        .env_remove("BDK_MODEL")
        .env_remove("BDK_MODEL_BASE_URL")
        .env("BDK_MODEL_PROVIDER", "scripted")
        .args(["run", "--dir", &hello, "-m", "count me", "--state-root", &state_arg, "--json"])
        .output_within();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ran: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = ran["sessionId"].as_str().unwrap().to_owned();
    for args in [
        vec!["info", "--dir", examples.as_str()],
        vec!["info", "--dir", examples.as_str(), "--json"],
        vec!["validate", "--dir", examples.as_str()],
        vec!["help", "--json"],
        vec!["completions", "zsh"],
        vec!["cost", "--dir", hello.as_str(), "--session", id.as_str(), "--state-root", state_arg.as_str()],
        vec!["cost", "--dir", hello.as_str(), "--session", &id, "--state-root", &state_arg, "--json"],
    ] {
        let (code, stderr) = into_closed_pipe(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn error_lines_start_the_same_way() {
    let (code, _, stderr) = run(&["help", "nope"]);
    assert_eq!(code, 3);
    assert!(stderr.starts_with("error: no command `nope`"), "{stderr}");
    let (code, _, stderr) = run(&["cost", "--session", "not-an-id", "--dir", &example("hello")]);
    assert_eq!(code, 3);
    assert!(stderr.starts_with("error: "), "{stderr}");
    // clap's own errors (exit 2) start the same way.
    let (code, _, stderr) = run(&["run"]);
    assert_eq!(code, 2);
    assert!(stderr.starts_with("error: "), "{stderr}");
}

#[test]
fn call_and_cost_default_to_the_current_folder_and_report_diagnostics_on_stderr() {
    let out = bdk()
        .current_dir(example("hello"))
        .args(["call", "word_count", "--input", r#"{"text":"one two"}"#])
        .output_within();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["result"]["words"], 2);

    let empty = tempfile::tempdir().unwrap();
    let out = bdk().current_dir(empty.path()).args(["call", "word_count"]).output_within();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "diagnostics go to stderr");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_project"));
    let out = bdk().current_dir(empty.path()).args(["cost", "--session", "ses_x"]).output_within();
    assert_ne!(out.status.code(), Some(2), "--dir is not required");
}

#[test]
fn help_json_lists_every_command_and_flag() {
    let (code, stdout, stderr) = run(&["help", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let tree: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = tree["subcommands"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    for verb in ["validate", "info", "init", "serve", "run", "chat", "call", "cost", "eval", "completions"] {
        assert!(names.contains(&verb), "{verb} in {names:?}");
    }
    // `--dir` defaults to `.` wherever a command takes it (`call` and `cost` without a
    // default only because `--url` excludes it; they use `.` too, tested below).
    let mut with_dir = 0;
    let mut stack: Vec<&Value> = vec![&tree];
    while let Some(command) = stack.pop() {
        stack.extend(command["subcommands"].as_array().into_iter().flatten());
        let Some(dir) = command["args"].as_array().into_iter().flatten().find(|a| a["long"] == "dir") else { continue };
        with_dir += 1;
        if !matches!(command["name"].as_str(), Some("call" | "cost")) {
            assert_eq!(dir["default"], Value::from(vec!["."]), "{}: {dir}", command["name"]);
        }
    }
    assert!(with_dir >= 10, "{with_dir} commands take --dir");
    let (code, stdout, _) = run(&["help", "run", "--json"]);
    assert_eq!(code, 0);
    let run_tree: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(run_tree["name"], "run");
    let approve = run_tree["args"].as_array().unwrap().iter().find(|a| a["long"] == "approve").unwrap();
    assert_eq!(approve["repeatable"], true);
    let (code, stdout, _) = run(&["help", "run"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("--session <ID>"), "{stdout}");
}

#[test]
fn completions_print_a_script_per_shell() {
    for (shell, marker) in [("bash", "complete -F"), ("zsh", "#compdef bdk"), ("fish", "complete -c bdk")] {
        let (code, stdout, stderr) = run(&["completions", shell]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(marker), "{shell}: {stdout}");
        assert!(stdout.contains("chat"), "{shell} completes the verbs");
    }
}

#[test]
fn dot_env_fills_in_the_environment_but_never_overrides_it() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("p");
    std::fs::create_dir_all(project.join("bot")).unwrap();
    std::fs::write(project.join("bot/instructions.md"), "Echo.\n").unwrap();
    std::fs::write(project.join(".env"), "# offline\nexport BDK_MODEL_PROVIDER=scripted\nnot a line\n").unwrap();
    let state = root.path().join("state");
    let scrubbed = || {
        let mut command: Command = bdk();
        for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY", "XAI_API_KEY"] {
            command.env_remove(var);
        }
        command.args(["run", "-m", "from dotenv", "--dir"]).arg(&project).arg("--state-root").arg(&state);
        command
    };
    let out = scrubbed().output_within();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("from dotenv"), "the echo model answered");
    assert!(stderr.contains(".env:3: not a NAME=VALUE line"), "{stderr}");

    // A variable the environment sets wins over .env.
    std::fs::write(project.join(".env"), "BDK_MODEL_PROVIDER=scripted\n").unwrap();
    let out = scrubbed().env("BDK_MODEL_PROVIDER", "no-such-provider").output_within();
    assert_ne!(out.status.code(), Some(0), "the environment's bad provider is used");
}
