//! schemathesis (PyPI, `scripts/peers/schemathesis.sh`) reads `GET /v1/openapi.json` from a live
//! `bdk serve --dev --no-control-plane` (every conditional route present) and sends generated
//! requests to every operation: none may answer 5xx. Skipped loudly without python3.
//!
//! The live stream (`GET .../stream`) is left out: schemathesis feeds it the ids of sessions it
//! just opened, and a stream of a live session stays open by design, so each such request only
//! ends at the client's timeout. The same handler path (owner check, replay) is fuzzed through
//! `GET .../events`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::serve::Server;
use super::support::{OutputWithin, text};

const RUN_TIMEOUT: Duration = Duration::from_secs(420);

fn echo_project(root: &Path) -> std::path::PathBuf {
    let dir = root.join("fuzzed");
    std::fs::create_dir_all(dir.join("bot/tools")).unwrap();
    std::fs::write(
        dir.join("bot/agent.toml"),
        "name = \"fuzzed\"\n\n[model]\nprovider = \"scripted\"\nid = \"echo\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(
        dir.join("bot/tools/shout.toml"),
        r#"description = "Upper-case a text."
effect = "read"
command = ["python3", "-c", "import json,sys; print(json.dumps(json.load(sys.stdin)['input']['text'].upper()))"]

[input_schema]
type = "object"
required = ["text"]
properties = { text = { type = "string", maxLength = 200 } }
"#,
    )
    .unwrap();
    dir
}

#[test]
fn schemathesis_finds_no_server_errors() {
    let Some(peer) = bdk_test_support::peers::require("schemathesis") else { return };
    let root = tempfile::tempdir().unwrap();
    let project = echo_project(root.path());
    let state = root.path().join("state");
    let server = Server::start(&[
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
        "--dev",
        "--no-control-plane",
    ]);
    let reports = root.path().join("reports");
    let output = Command::new(peer.join("venv/bin/schemathesis"))
        // One worker: hypothesis describes lambdas through `ast`, whose recursion guard CPython 3.11
        // does not keep per thread ("AST constructor recursion depth mismatch" with two workers).
        .arg("run")
        .arg(format!("{}/v1/openapi.json", server.origin))
        .args(["--checks", "not_a_server_error", "--max-examples", "25", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing", "--request-timeout", "10", "--seed", "1"])
        .args(["--suppress-health-check", "all", "--no-color", "--max-redirects", "0"])
        .args(["--exclude-path-regex", "/stream$"])
        .arg("--report-dir")
        .arg(&reports)
        // Its cache (`.schemathesis/`) goes to the temporary folder, not the checkout.
        .current_dir(root.path())
        .output_until(RUN_TIMEOUT)
        .unwrap_or_else(|partial| panic!("schemathesis ran over {RUN_TIMEOUT:?}:\n{}", text(&partial)));
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{stdout}\n{stderr}");
    assert!(output.status.success(), "schemathesis found failures:\n{stdout}\n{stderr}");
    // It really tested the API (not an empty document).
    assert!(stdout.contains("/v1/session"), "{stdout}");
    drop(server);
}
