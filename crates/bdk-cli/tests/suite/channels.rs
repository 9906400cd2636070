//! Channels through `bdk serve` as a process: the ops-bot README's alert curl is accepted (202,
//! one conversation per alert fingerprint); `bdk github replay` signs and sends a saved delivery
//! to the fan-out route; `serve` refuses to start a GitHub channel without its webhook secret
//! outside `--dev`.

use serde_json::{Value, json};

use super::serve::{Server, client, within};
use super::support::{OutputWithin as _, bdk, example};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ops_bot_readme_alert_curl_is_accepted() {
    let state = tempfile::tempdir().unwrap();
    let server =
        Server::start(&["--dev", "--dir", &example("ops-bot"), "--state-root", state.path().to_str().unwrap()]);
    let url = format!("{}/ops-bot/v1/channels/alerts/alert", server.origin);
    let body = json!({"service":"checkout-api","severity":"sev1","summary":"5xx above 4%","alertname":"HighErrorRate"});
    let response = within("the alert POST", client().post(&url).json(&body).send()).await.unwrap();
    let status = response.status().as_u16();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["accepted"], true);
    assert_eq!(answer["continuationToken"], "alerts:alert:checkout-api:HighErrorRate", "{answer}");
    // A body the schema refuses never reaches the handler.
    let bad = json!({"service":"Checkout API","severity":"sev9","summary":""});
    let refused = within("the bad alert", client().post(&url).json(&bad).send()).await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
}

fn github_project(root: &std::path::Path) -> std::path::PathBuf {
    let dir = root.join("reviewer");
    std::fs::create_dir_all(dir.join("bot/channels")).unwrap();
    std::fs::write(
        dir.join("bot/agent.toml"),
        "name = \"reviewer\"\n\n[model]\nid = \"script\"\nprovider = \"scripted\"\n\n[[model.params.script]]\ntext = \"Reviewed.\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Review pull requests.\n").unwrap();
    std::fs::write(
        dir.join("bot/channels/reviews.toml"),
        "kind = \"github\"\n[github]\nwebhook_secret_env = \"REVIEWS_TEST_SECRET\"\nreply = \"none\"\n",
    )
    .unwrap();
    dir
}

fn fixture() -> String {
    format!("{}/../bdk-server/tests/fixtures/github/pull_request.opened.json", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_replay_signs_and_sends_a_saved_delivery() {
    let root = tempfile::tempdir().unwrap();
    let project = github_project(root.path());
    let state = root.path().join("state");
    let server = Server::start(&["--dev", "--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap()]);
    let output = bdk()
        .args(["github", "replay", &fixture(), "--url", &server.origin, "--secret-env", "REVIEWS_TEST_SECRET"])
        .env("REVIEWS_TEST_SECRET", "replay-secret")
        .output_within();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    let delivery = &answer["deliveries"][0];
    assert_eq!((&delivery["channel"], &delivery["status"]), (&json!("reviews"), &json!(202)), "{answer}");
    assert_eq!(delivery["continuationToken"], "reviews:pr:acme/checkout#42");

    // A missing payload is a failure with a message.
    let missing = bdk().args(["github", "replay", "/nonexistent.json", "--url", &server.origin]).output_within();
    assert_eq!(missing.status.code(), Some(3));
}

#[test]
fn serve_refuses_a_github_channel_without_its_secret_outside_dev() {
    let root = tempfile::tempdir().unwrap();
    let project = github_project(root.path());
    let output = bdk()
        .args(["serve", "--port", "0", "--dir", project.to_str().unwrap()])
        .env_remove("REVIEWS_TEST_SECRET")
        .output_within();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr.contains("REVIEWS_TEST_SECRET") && stderr.contains("--dev"), "{stderr}");
}
