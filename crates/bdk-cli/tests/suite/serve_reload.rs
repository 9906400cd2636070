//! `bdk serve --dev` hot reload, end to end with the server as a child process: a stream stays
//! attached to a session while a tool's description is edited; `/v1/info` shows the new
//! description and the next turn sends it to the model. A broken tool file then fails the
//! reload: `/v1/health` shows the diagnostics and the last good definitions keep serving, in
//! `/v1/info` and in the next turn. Fixing the file recovers. Production `serve` does not
//! watch. Every wait polls with a timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
use serde_json::{Value, json};

use super::serve::{Server, Stream, client, post, within};

/// A project whose model is the fake OpenAI server and whose one tool says `description`.
fn write_project(root: &Path, model_url: &str, description: &str) -> PathBuf {
    let dir = root.join("hot");
    std::fs::create_dir_all(dir.join("bot/tools")).unwrap();
    std::fs::write(
        dir.join("bot/agent.toml"),
        format!("name = \"hot\"\n\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{model_url}\"\n"),
    )
    .unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Answer briefly.\n").unwrap();
    write_tool(&dir, description, "read");
    dir
}

fn write_tool(dir: &Path, description: &str, effect: &str) {
    std::fs::write(
        dir.join("bot/tools/echo.toml"),
        format!(
            "description = \"{description}\"\neffect = \"{effect}\"\ncommand = [\"cat\"]\n\n\
             [input_schema]\ntype = \"object\"\n"
        ),
    )
    .unwrap();
}

fn answer(text: &str) -> Reply {
    Reply::sse(oa::text_reply(text, 10, 2))
}

async fn get(url: String) -> Value {
    within("a GET", async { client().get(url).send().await.unwrap().json::<Value>().await.unwrap() }).await
}

/// Polls `url` until `ready` holds for its JSON body; returns that body.
async fn poll_until(url: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    within(what, async {
        loop {
            let body = get(url.to_owned()).await;
            if ready(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

fn tool_description(info: &Value) -> String {
    let tools = info["tools"].as_array().unwrap_or_else(|| panic!("no tools in {info}"));
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap_or_else(|| panic!("no echo in {info}"));
    echo["description"].as_str().unwrap().to_owned()
}

/// The `echo` tool's description in the `n`th model request (1-based).
async fn sent_description(model: &FakeServer, n: usize) -> String {
    let requests = within("the model request", model.wait_for_requests(n)).await;
    let tools = requests[n - 1].body["tools"].as_array().cloned().unwrap_or_default();
    let echo = tools.iter().find(|t| t["function"]["name"] == "echo").unwrap_or_else(|| panic!("no echo in {tools:?}"));
    echo["function"]["description"].as_str().unwrap().to_owned()
}

/// Sends `message` to the session with the current token, and keeps the rotated one.
async fn follow_up(origin: &str, id: &str, token: &mut String, message: &str) {
    let (status, reply) =
        post(format!("{origin}/v1/session/{id}"), json!({"continuationToken": token, "message": message})).await;
    assert_eq!(status, 200, "{reply}");
    *token = reply["continuationToken"].as_str().unwrap().to_owned();
}

/// Reads the stream until the next `session.waiting`; returns the `message.completed` text.
async fn next_answer(stream: &mut Stream) -> String {
    let mut text = None;
    loop {
        let event = stream.next().await.expect("the stream ended: it should stay attached across reloads");
        assert_ne!(event["type"], json!("turn.failed"), "{event}");
        if event["type"] == "message.completed" {
            text = event["data"]["text"].as_str().map(str::to_owned);
        }
        if event["type"] == "session.waiting" {
            return text.expect("a message.completed before session.waiting");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_serve_swaps_an_edited_tool_keeps_the_last_good_one_on_errors_and_recovers() {
    let model = FakeServer::start().await;
    for text in ["one", "two", "three", "four"] {
        model.push(answer(text));
    }
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url(), "Echoes its input.");
    let server = Server::start(&["--dev", "--mode", "single", "--dir", project.to_str().unwrap()]);
    let origin = &server.origin;
    let health = get(format!("{origin}/v1/health")).await;
    assert_eq!(health["reload"]["status"], json!("watching"), "{health}");

    let (status, started) = post(format!("{origin}/v1/session"), json!({"message": "hi"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let mut token = started["continuationToken"].as_str().unwrap().to_owned();
    let mut stream = Stream::open(format!("{origin}/v1/session/{id}/stream?startIndex=0")).await;
    assert_eq!(next_answer(&mut stream).await, "one");
    assert_eq!(sent_description(&model, 1).await, "Echoes its input.");

    // Edit the tool: /v1/info shows it, and the next turn (same session, same stream) sends it.
    write_tool(&project, "Repeats what it is given.", "read");
    let info = poll_until(&format!("{origin}/v1/info"), "the new description in /v1/info", |info| {
        tool_description(info) == "Repeats what it is given."
    })
    .await;
    assert_eq!(info["slug"], json!("hot"));
    let health = get(format!("{origin}/v1/health")).await;
    assert_eq!((&health["reload"]["status"], &health["reload"]["reloads"]), (&json!("ok"), &json!(1)), "{health}");
    follow_up(origin, &id, &mut token, "again").await;
    assert_eq!(next_answer(&mut stream).await, "two");
    assert_eq!(sent_description(&model, 2).await, "Repeats what it is given.");

    // Break it: the reload fails, /v1/health says why, the last good definitions keep serving.
    write_tool(&project, "A broken edit.", "reed");
    let health = poll_until(&format!("{origin}/v1/health"), "a failed reload in /v1/health", |h| {
        h["reload"]["status"] == "failed"
    })
    .await;
    let diagnostics = health["reload"]["diagnostics"].as_array().unwrap();
    let error = diagnostics
        .iter()
        .find(|d| d["severity"] == "error")
        .unwrap_or_else(|| panic!("no error diagnostic in {health}"));
    assert!(error["file"].as_str().unwrap_or_default().ends_with("echo.toml"), "{error}");
    assert!(error["message"].as_str().unwrap_or_default().contains("reed"), "{error}");
    assert_eq!(health["reload"]["reloads"], json!(1), "{health}");
    assert_eq!(tool_description(&get(format!("{origin}/v1/info")).await), "Repeats what it is given.");
    follow_up(origin, &id, &mut token, "and again").await;
    assert_eq!(next_answer(&mut stream).await, "three");
    assert_eq!(sent_description(&model, 3).await, "Repeats what it is given.");

    // Fix it: the reload succeeds again.
    write_tool(&project, "Fixed and shiny.", "read");
    let health = poll_until(&format!("{origin}/v1/health"), "a recovered reload in /v1/health", |h| {
        h["reload"]["status"] == "ok" && h["reload"]["reloads"] == 2
    })
    .await;
    assert_eq!(health["reload"]["diagnostics"], json!([]), "{health}");
    assert_eq!(tool_description(&get(format!("{origin}/v1/info")).await), "Fixed and shiny.");
    follow_up(origin, &id, &mut token, "once more").await;
    assert_eq!(next_answer(&mut stream).await, "four");
    assert_eq!(sent_description(&model, 4).await, "Fixed and shiny.");

    drop(stream);
    let status = std::process::Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("reloaded: hot"), "{stderr}");
    assert!(stderr.contains("error: reload failed") && stderr.contains("reed"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_serve_does_not_watch() {
    let model = FakeServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url(), "Echoes its input.");
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let health = get(format!("{}/v1/health", server.origin)).await;
    assert!(health.get("reload").is_none(), "{health}");
    write_tool(&project, "Edited.", "read");
    // No reload can be observed, so wait on the server: a few seconds of info stay the same.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(tool_description(&get(format!("{}/v1/info", server.origin)).await), "Echoes its input.");
    }
}
