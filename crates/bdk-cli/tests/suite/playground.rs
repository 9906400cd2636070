//! The playground in a real browser: headless Chromium (`scripts/peers/chromium.sh`) driven by
//! playwright-core (`scripts/peers/playwright.sh`) through `tests/browser/playground.mjs`,
//! against `bdk serve` with the scripted model and two bearer principals. Guards: a message and
//! its streamed reply, approving a parked call, the trace, a tool called from its form (and
//! copied as curl), keyboard tabs, a phone-width layout, no console errors, and a deep link
//! opened by another principal being refused. Screenshots land in
//! `target/browser-artifacts/playground/`. Skipped loudly where the peers cannot be installed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::serve::{Server, write_project};
use super::support::{OutputWithin, text};

/// The whole browser run (seconds of work; generous for a loaded machine).
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

fn write_tools(project: &Path) {
    let tools = project.join("bot/tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(
        tools.join("add.toml"),
        r#"description = "Add two whole numbers."
effect = "read"
command = ["python3", "-c", "import json,sys; i=json.load(sys.stdin)['input']; print(json.dumps({'sum': i['a'] + i['b']}))"]

[input_schema]
type = "object"
required = ["a", "b"]
additionalProperties = false
properties = { a = { type = "integer", description = "The first number." }, b = { type = "integer" } }
"#,
    )
    .unwrap();
    std::fs::write(
        tools.join("deploy.toml"),
        r#"description = "Deploy a service. A person approves every deploy."
effect = "write"
needs_approval = true
command = ["python3", "-c", "import json,sys; i=json.load(sys.stdin)['input']; print(json.dumps({'deployed': True, 'service': i['service']}))"]

[input_schema]
type = "object"
required = ["service"]
properties = { service = { type = "string", enum = ["web", "api"] } }
"#,
    )
    .unwrap();
}

#[test]
fn the_playground_works_in_a_real_browser() {
    let Some(chromium) = bdk_test_support::peers::require("chromium") else { return };
    let Some(playwright) = bdk_test_support::peers::require("playwright") else { return };
    let chromium = std::fs::read_to_string(chromium.join("chromium-path")).unwrap().trim().to_owned();

    let root = tempfile::tempdir().unwrap();
    let project = write_project(
        root.path(),
        "shop",
        &[
            "reasoning = \"The user greets me.\"\ntext = \"Hello from the scripted agent.\"",
            "tool_calls = [{ name = \"deploy\", arguments = { service = \"web\" } }]",
            "text = \"Deployed web.\"",
        ],
    );
    write_tools(&project);
    let state = root.path().join("state");
    let server = Server::start(&[
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
        "--bearer-token",
        "alice=alice-browser-secret,bob=bob-browser-secret",
    ]);

    let workspace = bdk_test_support::peers::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), Into::into);
    let artifacts = target.join("browser-artifacts/playground");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/playground.mjs");
    let output = Command::new("node")
        .arg(&script)
        .env("BDK_URL", &server.origin)
        .env("BDK_TOKEN_ALICE", "alice-browser-secret")
        .env("BDK_TOKEN_BOB", "bob-browser-secret")
        .env("CHROMIUM", &chromium)
        .env("PLAYWRIGHT", &playwright)
        .env("ARTIFACTS", &artifacts)
        .output_until(RUN_TIMEOUT)
        .unwrap_or_else(|partial| panic!("the browser run took over {RUN_TIMEOUT:?}:\n{}", text(&partial)));
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("{stdout}\n{stderr}\nscreenshots: {}", artifacts.display());
    assert!(output.status.success(), "the browser run failed:\n{stdout}\n{stderr}");
    assert!(artifacts.join("09-deep-link-refused.png").is_file());
    drop(server);
}

/// `serve --dev` names each agent's playground and the docs on stdout, after the address line.
#[test]
fn serve_dev_prints_the_playground_and_docs_urls() {
    use std::io::{BufRead as _, BufReader};
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "shop", &[]);
    let state = root.path().join("state");
    let mut child = super::support::bdk()
        .args(["serve", "--dev", "--port", "0", "--dir", project.to_str().unwrap()])
        .arg("--state-root")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let lines: Vec<String> = (0..4).map_while(|_| rx.recv_timeout(Duration::from_secs(30)).ok()).collect();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(lines.len(), 4, "{lines:?}");
    let origin = lines[0].strip_prefix("listening on ").unwrap();
    assert_eq!(lines[1], format!("  shop: {origin}/shop/v1/"));
    assert_eq!(lines[2], format!("  playground: {origin}/shop/playground"));
    assert_eq!(lines[3], format!("  docs: {origin}/docs"));
}
