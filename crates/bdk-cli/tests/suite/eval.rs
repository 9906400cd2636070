//! `bdk eval` end to end (the binary, a project whose model is the fake OpenAI server): listing
//! with `--tag`/`--filter`, a run's exit code, summary and saved snapshot, JUnit XML read back by
//! a JUnit XML parser (Python's `xml.etree`), `--compare` of two saved runs (regressions first),
//! and the diagnostics that stop a run before anything runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
use serde_json::Value;

use super::support::{OutputWithin, bdk};

fn write(dir: &Path, rel: &str, body: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

/// A project on the fake model at `url` with evals `smoke` (tag smoke) and `pairs/a`,
/// `pairs/b` (tag pairs).
fn project(root: &Path, url: &str) -> PathBuf {
    let dir = root.join("evalbot");
    write(
        &dir,
        "bot/agent.toml",
        &format!(
            "description = \"t\"\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{url}\"\n"
        ),
    );
    write(&dir, "bot/instructions.md", "Answer briefly.\n");
    write(&dir, "evals/evals.toml", "max_concurrency = 1\ntimeout = \"20s\"\n");
    write(
        &dir,
        "evals/smoke.eval.toml",
        "description = \"Says yes.\"\ntags = [\"smoke\"]\nmessage = \"Say yes.\"\n[expect]\nreply_includes = [\"yes\"]\n",
    );
    write(
        &dir,
        "evals/pairs.eval.toml",
        "tags = [\"pairs\"]\n[[cases]]\nid = \"a\"\nmessage = \"Say a.\"\nexpect = { reply_includes = [\"a\"] }\n[[cases]]\nid = \"b\"\nmessage = \"Say b.\"\nexpect = { reply_includes = [\"b\"] }\n",
    );
    dir
}

fn text(body: &str) -> Reply {
    Reply::sse(oa::text_reply(body, 10, 5))
}

/// `bdk` with no model settings from the environment.
fn hermetic() -> Command {
    let mut command = bdk();
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"] {
        command.env_remove(var);
    }
    command
}

async fn output(mut command: Command) -> (i32, String, String) {
    let out = tokio::task::spawn_blocking(move || command.output_within()).await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn eval(dir: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = hermetic();
    command.arg("eval").arg("--dir").arg(dir).arg("--state-root").arg(state).args(args);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_selects_by_tag_and_filter() {
    let root = tempfile::tempdir().unwrap();
    let dir = project(root.path(), "http://127.0.0.1:9/v1");
    let state = root.path().join("state");
    let (code, stdout, stderr) = output(eval(&dir, &state, &["--list"])).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("pairs/a") && stdout.contains("pairs/b") && stdout.contains("smoke"), "{stdout}");
    assert!(stdout.contains("3 eval(s)"), "{stdout}");

    let (code, stdout, _) = output(eval(&dir, &state, &["--list", "--json", "--tag", "smoke"])).await;
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["id"], "smoke");

    let (_, stdout, _) = output(eval(&dir, &state, &["--list", "--filter", "pairs", "--filter", "smoke"])).await;
    assert!(stdout.contains("3 eval(s)"), "{stdout}");

    let (code, _, stderr) = output(eval(&dir, &state, &["--list", "--filter", "nope"])).await;
    assert_eq!(code, 3);
    assert!(stderr.contains("no eval matches"), "{stderr}");
    let (code, _, stderr) = output(eval(&dir, &state, &["--iterations", "0"])).await;
    assert_eq!(code, 2, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_write_junit_and_compare_shows_regressions_first() {
    let server = FakeServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let dir = project(root.path(), &server.url());
    let state = root.path().join("state");

    // Run 1: every case passes (one at a time, in discovery order: pairs/a, pairs/b, smoke).
    for reply in ["a", "b", "yes"] {
        server.push(text(reply));
    }
    let (code, stdout, stderr) = output(eval(&dir, &state, &["--json"])).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let first: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(first["status"], "completed");
    assert_eq!(first["totals"]["passed"], 3);
    let first_id = first["runId"].as_str().unwrap().to_owned();
    let saved = state.join("evalbot/evals").join(&first_id).join("run.json");
    assert!(saved.is_file());
    // Not a terminal: one plain progress line per finished attempt.
    assert_eq!(stderr.matches("PASS ").count(), 3, "{stderr}");

    // Run 2: smoke now fails; JUnit XML is written.
    for reply in ["a", "b", "no"] {
        server.push(text(reply));
    }
    let junit = root.path().join("out/junit.xml");
    let (code, stdout, stderr) = output(eval(&dir, &state, &["--junit", junit.to_str().unwrap()])).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("smoke"), "{stdout}");
    assert!(stdout.contains("x reply_includes yes: not in the reply: no"), "{stdout}");
    assert!(stdout.contains("2 passed, 1 failed"), "{stdout}");
    let second_id = stdout.split("run ").last().unwrap().split_whitespace().next().unwrap().to_owned();

    // The JUnit file, read back by a JUnit XML parser.
    let script = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find('testsuite')
print(root.tag, suite.get('tests'), suite.get('failures'))
for case in suite.findall('testcase'):
    failure = case.find('failure')
    rate = [p.get('value') for p in case.iter('property') if p.get('name') == 'passRate'][0]
    print(case.get('name'), 'failed' if failure is not None else 'passed', rate, (failure.get('message') if failure is not None else ''))
"#;
    let parsed = std::process::Command::new("python3").arg("-c").arg(script).arg(&junit).output_within();
    assert!(parsed.status.success(), "{}", String::from_utf8_lossy(&parsed.stderr));
    let parsed = String::from_utf8(parsed.stdout).unwrap();
    let lines: Vec<&str> = parsed.lines().collect();
    assert_eq!(lines[0], "testsuites 3 1");
    assert_eq!(lines[1], "pairs/a passed 1.000 ");
    assert_eq!(lines[3], "smoke failed 0.000 passed 0/1 iterations (pass rate 0%)");

    // --compare: the regression first, with the failed check; exit 1.
    let (code, stdout, stderr) = output(eval(&dir, &state, &["--compare", &first_id, &second_id])).await;
    assert_eq!(code, 1, "{stderr}");
    let regressions = stdout.find("regressions (1):").unwrap_or_else(|| panic!("{stdout}"));
    assert!(stdout[regressions..].starts_with("regressions (1):\n  smoke  passed 100% -> failed 0%"), "{stdout}");
    assert!(stdout.contains("reply_includes yes"), "{stdout}");
    assert!(stdout.contains("1 regression(s), 0 fixed, 0 new, 0 removed, 2 unchanged"), "{stdout}");

    // The other way round it is a fix; JSON, and a path to run.json works as well as an id.
    let (code, stdout, _) =
        output(eval(&dir, &state, &["--compare", &second_id, saved.to_str().unwrap(), "--json"])).await;
    assert_eq!(code, 0);
    let comparison: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(comparison["fixes"][0]["id"], "smoke");
    assert_eq!(comparison["regressions"], serde_json::json!([]));

    let (code, _, stderr) = output(eval(&dir, &state, &["--compare", &first_id, "evr_missing"])).await;
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("evr_missing"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eval_naming_an_unknown_tool_stops_the_run_before_it_starts() {
    let server = FakeServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let dir = project(root.path(), &server.url());
    write(&dir, "evals/ghost.eval.toml", "message = \"hi\"\n[expect]\ncalled_tool = [\"ghost\"]\n");
    let state = root.path().join("state");
    let (code, _, stderr) = output(eval(&dir, &state, &[])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("unknown_tool_reference"), "{stderr}");
    assert!(server.requests().is_empty(), "no model call was made");

    // Other evals still run when the selection leaves it out.
    server.push(text("yes"));
    let (code, _, stderr) = output(eval(&dir, &state, &["--filter", "smoke"])).await;
    assert_eq!(code, 0, "{stderr}");

    // A bad regex is an error diagnostic: nothing runs.
    write(&dir, "evals/ghost.eval.toml", "message = \"hi\"\n[expect]\nreply_matches = [\"(\"]\n");
    let (code, _, stderr) = output(eval(&dir, &state, &[])).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("invalid_regex"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_gets_a_live_progress_bar() {
    let server = FakeServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let dir = project(root.path(), &server.url());
    let state = root.path().join("state");
    server.push(text("yes"));
    // Python's pty module gives bdk a terminal on stdin, stdout and stderr, and copies what
    // bdk writes there to its own stdout (a pipe).
    let mut command = Command::new("python3");
    command.args(["-c", "import pty, sys; sys.exit(0 if pty.spawn(sys.argv[1:]) == 0 else 1)"]);
    command.arg(env!("CARGO_BIN_EXE_bdk")).args(["eval", "--filter", "smoke", "--dir"]).arg(&dir);
    command.arg("--state-root").arg(&state);
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"] {
        command.env_remove(var);
    }
    let (code, stdout, stderr) = output(command).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("\r\x1b[2K["), "the bar is redrawn in place: {stdout:?}");
    assert!(stdout.contains("1/1 attempts"), "{stdout:?}");
    assert!(!stdout.contains("PASS smoke"), "no plain progress lines on a terminal: {stdout:?}");
}
