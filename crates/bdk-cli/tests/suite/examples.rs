//! The example projects are part of the suite: each validates with no diagnostics but
//! `not_run_yet` warnings for parts this build does not run yet (`bdk-project/src/gaps.rs` lists
//! them; no example declares one today), and its `info` (text and JSON) is snapshotted so any
//! change to what it exposes is reviewed.

use super::support::{OutputWithin as _, example, run};
use crate::snapshot;

const EXAMPLES: &[&str] = &["hello", "pr-reviewer", "ops-bot", "refunds"];

#[test]
fn every_example_validates_without_diagnostics() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["validate", "--dir", &example(name), "--json"]);
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("validate --json prints JSON");
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
        assert_eq!(report["errors"], 0, "{name}: {stdout}");
        let not_run_yet = stdout.matches("\"not_run_yet\"").count();
        assert_eq!(report["warnings"], not_run_yet, "{name}: only not_run_yet warnings: {stdout}");
    }
}

#[test]
fn example_info_json_snapshots() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["info", "--dir", &example(name), "--json"]);
        assert_eq!(code, 0, "{name}: {stderr}");
        let info: serde_json::Value = serde_json::from_str(&stdout).expect("info --json prints JSON");
        assert_eq!(info["slug"], *name, "a single project prints the bare manifest");
        snapshot!(format!("info_json_{name}"), stdout);
    }
}

#[test]
fn example_info_text_snapshots() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["info", "--dir", &example(name)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        snapshot!(format!("info_text_{name}"), stdout);
    }
}

#[test]
fn several_projects_are_listed_as_agents() {
    let (code, stdout, stderr) = run(&["info", "--dir", &example("hello"), "--dir", &example("ops-bot"), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let slugs: Vec<&str> =
        info["agents"].as_array().expect("agents").iter().filter_map(|a| a["slug"].as_str()).collect();
    assert_eq!(slugs, ["hello", "ops-bot"]);
}

#[test]
fn the_examples_folder_is_a_serve_root() {
    let root = super::support::repo_root().join("examples").display().to_string();
    let (code, stdout, stderr) = run(&["info", "--dir", &root, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let slugs: Vec<&str> =
        info["agents"].as_array().expect("agents").iter().filter_map(|a| a["slug"].as_str()).collect();
    assert_eq!(slugs, ["hello", "ops-bot", "pr-reviewer", "refunds"], "children are discovered in name order");
}

/// Every `bdk` command in the examples' READMEs that runs offline runs, from the example's
/// folder, with the environment the line sets: validate, info, call and run exit 0; serve
/// starts and prints its address (then it is killed). Interactive `chat`, model-backed `eval`
/// and the `curl` lines are left out.
#[test]
fn the_readme_commands_of_every_example_run() {
    for name in EXAMPLES {
        let dir = super::support::repo_root().join("examples").join(name);
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut ran = 0;
        for line in sh_lines(&readme) {
            let words = split_words(&line);
            let Some(at) = words.iter().position(|w| w == "bdk") else { continue };
            let (env, args) = (&words[..at], &words[at + 1..]);
            if !env.iter().all(|w| w.contains('=')) || matches!(args[0].as_str(), "chat" | "eval") {
                continue;
            }
            let mut command = super::support::bdk();
            command.current_dir(&dir);
            for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"] {
                command.env_remove(var);
            }
            for pair in env {
                let (k, v) = pair.split_once('=').unwrap();
                command.env(k, v);
            }
            command.args(args);
            if args[0] == "serve" {
                serves(command.args(["--port", "0", "--state-root"]).arg(state.path()), &line);
            } else {
                if matches!(args[0].as_str(), "run" | "call") {
                    command.arg("--state-root").arg(state.path());
                }
                let out = command.output_within();
                assert_eq!(out.status.code(), Some(0), "{name}: `{line}`: {}", String::from_utf8_lossy(&out.stderr));
            }
            ran += 1;
        }
        assert!(ran >= 3, "{name}: only {ran} commands found in its README");
    }
}

/// The lines of the README's `sh` blocks, comments dropped, continuations joined.
fn sh_lines(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            inside = line.trim() == "```sh";
            continue;
        }
        if !inside {
            continue;
        }
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            continue;
        }
        pending.push_str(line);
        out.push(std::mem::take(&mut pending));
    }
    out
}

/// Shell words: single and double quotes group, an unquoted `#` starts a comment.
fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '#') if word.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// Starts the serve command, waits for its address, and kills it.
fn serves(command: &mut std::process::Command, line: &str) {
    use std::io::BufRead as _;
    let mut child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let first = rx.recv_timeout(std::time::Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    let first = first.unwrap_or_else(|_| panic!("`{line}` printed no address"));
    assert!(first.starts_with("listening on http://127.0.0.1:"), "`{line}`: {first}");
}
