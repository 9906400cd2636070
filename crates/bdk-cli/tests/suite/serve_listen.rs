//! `bdk serve`'s documented listening defaults, through the real binary: a busy 3000 moves to
//! the next free port up to 3019 (and says so), a busy explicit `--port` exits 3, the default
//! body limit is 1 MiB (a bigger body is 413, one just under it is served), and
//! `BDK_BEARER_TOKEN` turns on bearer auth; `--worker-threads` sets the runtime's workers.

use std::net::TcpListener;
use std::process::Command;

use serde_json::{Value, json};

use super::serve::{Server, client, write_project};
use super::support::{OutputWithin, bdk};

/// SIGTERM, then the exit status and stderr.
fn stop(server: Server) -> (Option<i32>, String) {
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (status, stderr) = server.wait();
    (status.code(), stderr)
}

fn port_of(origin: &str) -> u16 {
    origin.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_default_port_moves_on_to_the_next_free_one() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    // Hold 3000 (if something else already holds it, it is just as busy).
    let _held = TcpListener::bind(("127.0.0.1", 3000));
    let mut command = bdk();
    command.args(["serve", "--mode", "single", "--dir"]).arg(&project);
    let server = Server::launch(command, &[]);
    let port = port_of(&server.origin);
    assert!((3001..=3019).contains(&port), "{}", server.origin);
    let health: Value =
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["ok"], json!(true));
    let (code, stderr) = stop(server);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&format!("port 3000 is busy; using {port}")), "{stderr}");
}

#[test]
fn a_busy_explicit_port_exits_3() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    let held = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let output = bdk().args(["serve", "--mode", "single", "--port", &port, "--dir"]).arg(&project).output_within();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")) && stderr.contains("in use"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing may claim to listen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_body_limit_is_one_mebibyte() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &["text = \"ok\"", "text = \"ok\""]);
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let url = format!("{}/v1/session", server.origin);
    let envelope = r#"{"message":""}"#.len();
    let over = json!({ "message": "x".repeat(1024 * 1024 + 1 - envelope) }).to_string();
    assert_eq!(over.len(), 1024 * 1024 + 1);
    let refused = client().post(&url).header("content-type", "application/json").body(over).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 413);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], json!("payload_too_large"), "{body}");

    let under = json!({ "message": "x".repeat(1024 * 1024 - envelope) }).to_string();
    assert_eq!(under.len(), 1024 * 1024);
    let served = client().post(&url).header("content-type", "application/json").body(under).send().await.unwrap();
    assert_eq!(served.status().as_u16(), 200, "{}", served.text().await.unwrap());
    let (code, stderr) = stop(server);
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bdk_bearer_token_turns_on_bearer_auth() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    let mut command = bdk();
    command.args(["serve", "--port", "0", "--mode", "single", "--dir"]).arg(&project);
    let server = Server::launch(command, &[("BDK_BEARER_TOKEN", "alice=s3cret")]);
    let url = format!("{}/v1/sessions", server.origin);
    let anonymous = client().get(&url).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let wrong = client().get(&url).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let alice = client().get(&url).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(alice.status().as_u16(), 200);
    let (code, stderr) = stop(server);
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_sets_the_runtime_workers_and_refuses_zero() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    let server = Server::start(&["--mode", "single", "--worker-threads", "3", "--dir", project.to_str().unwrap()]);
    let health: Value =
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["ok"], json!(true));
    let (code, stderr) = stop(server);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("runtime started workers=3"), "{stderr}");

    // The default: one less than the CPUs, at least one.
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let (code, stderr) = stop(server);
    assert_eq!(code, Some(0), "{stderr}");
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(stderr.contains(&format!("runtime started workers={}", cpus.saturating_sub(1).max(1))), "{stderr}");

    let output = bdk().args(["serve", "--worker-threads", "0", "--dir"]).arg(&project).output_within();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}
