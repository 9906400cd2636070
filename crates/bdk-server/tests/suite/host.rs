//! Host-level routes and layouts: `/`, `/v1/agents` and `/v1/health` in the multi-agent layout
//! (the index pair gone under `--no-playground`), `--mode single`, meta, logs.

use bdk_server::Mode;
use serde_json::json;

use super::support::host;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_agent_layout_mounts_each_slug_and_host_routes() {
    let host = host().agents(&["alpha", "beta"]).start().await;
    let get = |path: &str| host.client.get(format!("{}{path}", host.origin)).send();

    let agents: serde_json::Value = get("/v1/agents").await.unwrap().json().await.unwrap();
    assert_eq!(agents["ok"], json!(true));
    let slugs: Vec<_> = agents["agents"].as_array().unwrap().iter().map(|a| a["slug"].clone()).collect();
    assert_eq!(slugs, [json!("alpha"), json!("beta")]);
    assert_eq!(agents["agents"][1]["basePath"], json!("/beta"));

    let index = get("/").await.unwrap();
    assert!(index.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let page = index.text().await.unwrap();
    assert!(page.contains("alpha agent") && page.contains("/beta/playground"), "{page}");

    let health: serde_json::Value = get("/v1/health").await.unwrap().json().await.unwrap();
    assert_eq!((&health["ok"], &health["status"], &health["agents"]), (&json!(true), &json!("ok"), &json!(2)));
    // The operator fields (docs/http.md): version, uptime, telemetry (off here).
    assert_eq!(health["version"], json!(env!("CARGO_PKG_VERSION")));
    assert!(health["uptimeSeconds"].is_u64(), "{health}");
    assert_eq!(health["telemetry"], json!({"traces": false, "metrics": false, "prometheus": false}));

    for slug in ["alpha", "beta"] {
        let meta: serde_json::Value = get(&format!("/{slug}/v1/meta")).await.unwrap().json().await.unwrap();
        assert_eq!(meta["slug"], json!(slug));
        assert_eq!(meta["basePath"], json!(format!("/{slug}")));
        assert_eq!(meta["dev"], json!(false));
        let info: serde_json::Value = get(&format!("/{slug}/v1/info")).await.unwrap().json().await.unwrap();
        assert_eq!(info["slug"], json!(slug));
    }
    // Agent routes are not at the root in this layout.
    assert_eq!(get("/v1/info").await.unwrap().status(), 404);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_playground_removes_the_index_routes() {
    let host = host().options(|o| o.playground = false).start().await;
    let get = |path: &str| host.client.get(format!("{}{path}", host.origin)).send();
    assert_eq!(get("/").await.unwrap().status(), 404);
    assert_eq!(get("/v1/agents").await.unwrap().status(), 404);
    assert_eq!(get("/v1/health").await.unwrap().status(), 200);
    let started = host.post("/v1/session", &json!({"message": "hi"})).await;
    assert!(started.body.get("playgroundUrl").is_none(), "{}", started.text);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_mode_serves_one_agent_unslugged() {
    let host = host()
        .options(|o| {
            o.mode = Mode::Single;
            o.dev = true;
        })
        .start()
        .await;
    assert_eq!(host.base, host.origin);
    let meta = host.get("/v1/meta").await;
    assert_eq!(meta.body["basePath"], json!(""));
    assert_eq!(meta.body["dev"], json!(true));
    assert_eq!(host.get("/v1/health").await.body["slug"], json!("hello"));
    let started = host.start_session("single").await;
    assert_eq!(started.trace_url, format!("{}/v1/session/{}/events", host.origin, started.session_id));
    let slugged = host.client.get(format!("{}/hello/v1/info", host.origin)).send().await.unwrap();
    assert_eq!(slugged.status(), 404);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_poll_the_ring_buffer_with_a_cursor() {
    let host = host().start().await;
    host.state.logs.push("INFO", "test", "first line".into());
    host.state.logs.push("WARN", "test", "second line".into());
    let all = host.get("/v1/logs").await;
    assert_eq!(all.status, 200, "{}", all.text);
    let lines = all.body["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["message"], json!("second line"));
    assert_eq!(lines[1]["level"], json!("WARN"));
    let cursor = all.body["cursor"].as_u64().unwrap();
    assert_eq!(host.get(&format!("/v1/logs?after={cursor}")).await.body["lines"], json!([]));
    host.state.logs.push("INFO", "test", "third".into());
    let next = host.get(&format!("/v1/logs?after={cursor}")).await;
    assert_eq!(next.body["lines"][0]["message"], json!("third"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_hooks_reports_them_in_its_health() {
    //! Guards: `/v1/health` lists each hook with its delivered, dropped and restart counts; an
    //! agent without hooks shows no `hooks` key.
    let host = host()
        .file("bot/hooks/audit.toml", "events = [\"*\"]\n\n[sink]\nkind = \"file\"\npath = \"audit.ndjson\"\n")
        .options(|o| o.mode = Mode::Single)
        .start()
        .await;
    let health: serde_json::Value =
        host.client.get(format!("{}/v1/health", host.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["hooks"], json!([{"name": "audit", "delivered": 0, "dropped": 0, "restarts": 0}]));
    host.shutdown().await;

    let plain = host_without_hooks().await;
    assert!(plain.get("hooks").is_none(), "{plain}");
}

async fn host_without_hooks() -> serde_json::Value {
    let host = host().options(|o| o.mode = Mode::Single).start().await;
    let health = host.client.get(format!("{}/v1/health", host.origin)).send().await.unwrap().json().await.unwrap();
    host.shutdown().await;
    health
}
