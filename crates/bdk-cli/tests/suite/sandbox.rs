//! `local.sandbox = true` through the real binary (`bdk run` with a scripted model): the model's
//! `shell` calls and agent tools run under Landlock, writing in the session workspace but not
//! outside it, reading the system but not the project, and reaching no TCP port unless
//! `local.sandbox_network = true`. The same calls unconfined do reach outside (so the checks
//! can fail). Skipped loudly where the kernel has no Landlock.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::support::{OutputWithin, bdk};

/// A project whose scripted model makes `calls` (TOML inline tables), then says "done".
fn project(root: &Path, local: &str, calls: &[String], extra: &[(&str, &str)]) -> PathBuf {
    let dir = root.join("boxed");
    std::fs::create_dir_all(dir.join("bot/tools")).unwrap();
    let mut toml = format!("name = \"boxed\"\n[local]\n{local}\n[model]\nid = \"script\"\nprovider = \"scripted\"\n");
    for call in calls {
        toml.push_str(&format!("[[model.params.script]]\ntool_calls = [{call}]\n"));
    }
    toml.push_str("[[model.params.script]]\ntext = \"done\"\n");
    std::fs::write(dir.join("bot/agent.toml"), toml).unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Be brief.\n").unwrap();
    for (path, content) in extra {
        std::fs::write(dir.join(path), content).unwrap();
    }
    dir
}

fn shell(command: &str) -> String {
    format!("{{ name = \"shell\", arguments = {{ command = {} }} }}", toml_string(command))
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// Runs one turn; returns the tool calls of `run --json` and the state root.
fn run(project: &Path, state: &Path) -> Vec<Value> {
    let mut command = bdk();
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"] {
        command.env_remove(var);
    }
    let out = command
        .args(["run", "--message", "go", "--json", "--dir"])
        .arg(project)
        .arg("--state-root")
        .arg(state)
        .output_within();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let run: Value = serde_json::from_str(&stdout).unwrap();
    run["toolCalls"].as_array().cloned().unwrap_or_default()
}

fn stderr_of(call: &Value) -> String {
    call["result"]["stderr"].as_str().map(str::to_owned).unwrap_or_else(|| call["result"].to_string())
}

fn landlock() -> bool {
    match bdk_tools::sandbox::probe() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("\n==========\nSKIPPED: this kernel cannot confine tools: {why}\n==========\n");
            false
        }
    }
}

#[test]
fn a_sandboxed_shell_writes_in_its_workspace_only() {
    if !landlock() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside.txt");
    let script = format!("echo in > inside.txt && echo out > {}", outside.display());
    let read = format!(
        "cat {}/boxed/bot/agent.toml; cat /etc/hostname > /dev/null && echo system-readable",
        root.path().display()
    );
    let project = project(root.path(), "sandbox = true", &[shell(&script), shell(&read)], &[]);
    let state = root.path().join("state");
    let calls = run(&project, &state);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(stderr_of(&calls[0]).contains("Permission denied"), "{}", calls[0]);
    assert!(!outside.exists(), "the write outside the workspace happened");
    let inside: Vec<_> = walk(&state).into_iter().filter(|p| p.ends_with("workspace/inside.txt")).collect();
    assert_eq!(inside.len(), 1, "the write inside the workspace happened");
    // The project's own files are not readable; the system is.
    assert!(stderr_of(&calls[1]).contains("Permission denied"), "{}", calls[1]);
    assert_eq!(calls[1]["result"]["stdout"].as_str().unwrap_or_default().trim(), "system-readable", "{}", calls[1]);
}

#[test]
fn the_same_shell_unconfined_does_reach_outside() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside.txt");
    let script = format!("echo out > {}", outside.display());
    let project = project(root.path(), "sandbox = false", &[shell(&script)], &[]);
    let calls = run(&project, &root.path().join("state"));
    assert_eq!(calls[0]["isError"], Value::Bool(false), "{}", calls[0]);
    assert!(outside.exists());
}

/// An agent tool that connects to `port` on 127.0.0.1 and prints what happened.
const CONNECT: &str = r##"description = "Connect to a port."
execution = "agent"
script = """#!/bin/sh
python3 -c 'import json, socket, sys
port = json.load(sys.stdin)["port"]
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    print(json.dumps({"connected": True}))
except OSError as e:
    print(json.dumps({"connected": False, "error": str(e)}))'
"""

[input_schema]
type = "object"
properties = { port = { type = "integer" } }
"##;

fn connect_call(port: u16) -> String {
    format!("{{ name = \"connect\", arguments = {{ port = {port} }} }}")
}

#[test]
fn a_sandboxed_agent_tool_reaches_tcp_only_when_allowed() {
    if !landlock() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for (local, connected) in [("sandbox = true", false), ("sandbox = true\nsandbox_network = true", true)] {
        let root = tempfile::tempdir().unwrap();
        let project = project(root.path(), local, &[connect_call(port)], &[("bot/tools/connect.toml", CONNECT)]);
        let calls = run(&project, &root.path().join("state"));
        assert_eq!(calls[0]["isError"], Value::Bool(false), "{}", calls[0]);
        assert_eq!(calls[0]["result"]["connected"], Value::Bool(connected), "{local}: {}", calls[0]);
    }
}

#[test]
fn serve_refuses_a_sandboxed_agent_where_landlock_is_missing() {
    let root = tempfile::tempdir().unwrap();
    let project = project(root.path(), "sandbox = true", &[], &[]);
    if bdk_tools::sandbox::probe().is_ok() {
        // Here the kernel confines: the agent validates with no warning (it has no command tool).
        let out = bdk().args(["validate", "--dir"]).arg(&project).output_within();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("0 errors, 0 warnings"), "{stdout}");
        return;
    }
    let out = bdk().args(["serve", "--port", "0", "--dir"]).arg(&project).output_within();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-unconfined"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}
