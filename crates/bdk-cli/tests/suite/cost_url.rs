//! `bdk cost --url`: the cost report of a session on a running `bdk serve`, printed exactly as
//! `bdk cost --dir` prints it from the same state; errors carry the server's status and code.

use std::time::Duration;

use serde_json::{Value, json};

use super::serve::{Server, client, within, write_project};
use super::support::{OutputWithin, bdk};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_over_http_prints_what_cost_dir_prints() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let usage = "usage = { input_tokens = 1200, output_tokens = 300 }";
    let project = write_project(&root.path().join("projects"), "hello", &[&format!("text = \"hi\"\n{usage}")]);
    let server = Server::start(&[
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
        "--bearer-token",
        "alice=alice-secret",
    ]);
    let base = format!("{}/hello", server.origin);
    let response = client()
        .post(format!("{base}/v1/session"))
        .bearer_auth("alice-secret")
        .json(&json!({"message": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let started: Value = response.json().await.unwrap();
    let id = started["sessionId"].as_str().unwrap().to_owned();
    within("the turn", async {
        loop {
            let text = client()
                .get(format!("{base}/v1/session/{id}/events"))
                .bearer_auth("alice-secret")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if text.contains("\"turn.completed\"") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    let run = |args: Vec<String>| {
        let output = bdk().args(&args).env_remove("BDK_TOKEN").output_within();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let dir_args = |json: bool| {
        let mut args =
            vec!["cost".into(), "--session".into(), id.clone(), "--dir".into(), project.display().to_string()];
        args.extend(["--state-root".into(), state.display().to_string()]);
        if json {
            args.push("--json".into());
        }
        args
    };
    let url_args = |json: bool, token: Option<&str>| {
        let mut args = vec!["cost".into(), "--session".into(), id.clone(), "--url".into(), base.clone()];
        if let Some(token) = token {
            args.extend(["--token".into(), token.into()]);
        }
        if json {
            args.push("--json".into());
        }
        args
    };
    for json in [false, true] {
        let (code, from_dir, err) = run(dir_args(json));
        assert_eq!(code, Some(0), "{err}");
        let (code, from_url, err) = run(url_args(json, Some("alice-secret")));
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(from_url, from_dir);
    }
    let (_, text, _) = run(url_args(false, Some("alice-secret")));
    assert!(text.contains("1200 in") && text.contains("total: 1 turn(s)"), "{text}");

    let (code, _, err) = run(url_args(false, None));
    assert_eq!(code, Some(3));
    assert!(err.contains("401 unauthorized"), "{err}");
    let unknown = "ses_00000000000000000000000000";
    let (code, _, err) = run(vec![
        "cost".into(),
        "--session".into(),
        unknown.into(),
        "--url".into(),
        base.clone(),
        "--token".into(),
        "alice-secret".into(),
    ]);
    assert_eq!(code, Some(3));
    assert!(err.contains("404 session_not_found"), "{err}");
}
