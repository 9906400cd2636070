//! The eval routes' lifecycle over a real listener: list the evals, start a run (202), nothing
//! matches (404), a second start while one runs (409), poll, cancel (200, then 409 not running,
//! 404 unknown), a run to completion, and every run listed again by a fresh host on the same
//! state, with a run a stopped process left `running` marked failed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bdk_engine::{AgentConfig, Engine};
use bdk_eval::{EvalService, EvalSetup, RunStore};
use bdk_model::{
    FinishReason, Message, ModelError, ModelEvent, ModelProvider, ModelRequest, ModelStream, ProviderInfo,
};
use bdk_server::{Agent, AppState, LogBuffer, ServeOptions};
use bdk_store::FsStore;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::support::{WAIT, reply, within};

/// Echoes the last user message; a message containing "slow" waits until its turn is cancelled
/// (and tells `slow_called` it has been asked).
#[derive(Debug, Default)]
struct Gate {
    slow_called: Notify,
}

impl ModelProvider for Gate {
    fn info(&self) -> ProviderInfo {
        ProviderInfo { provider: "test".into(), model: "gate".into(), base_url: None }
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let last = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        if last.contains("slow") {
            self.slow_called.notify_one();
            return Box::pin(futures_util::stream::once(async move {
                cancel.cancelled().await;
                Err(ModelError::Cancelled)
            }));
        }
        Box::pin(futures_util::stream::iter(vec![
            Ok(ModelEvent::TextDelta { text: last }),
            Ok(ModelEvent::Finish { reason: FinishReason::Stop }),
        ]))
    }
}

fn write(dir: &Path, rel: &str, body: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

struct Served {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Served {
    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = within("shutdown", self.task).await;
    }
}

/// Serves the project in `root/hello` with evals on `state`, as `bdk serve` mounts it.
async fn serve(root: &Path, state: &Path, provider: Arc<Gate>) -> Served {
    let mut discovery = bdk_project::discover(&[root.join("hello")]);
    assert!(!discovery.has_errors(), "{:?}", discovery.all_diagnostics().collect::<Vec<_>>());
    let project = discovery.projects.remove(0);
    let store = FsStore::open(state).unwrap();
    let provider: Arc<dyn ModelProvider> = provider;
    let engine = Engine::new(
        AgentConfig::from_project(&project),
        store.stores(),
        provider.clone(),
        Arc::new(bdk_tools::NoTools),
    );
    let setup = EvalSetup {
        project: Arc::new(project.clone()),
        state_dir: state.to_path_buf(),
        judge: provider.clone(),
        provider,
        price: None,
        tools: Arc::new(|_: &Path| Ok(Arc::new(bdk_tools::NoTools) as Arc<dyn bdk_tools::ToolRegistry>)),
        telemetry: Default::default(),
    };
    let evals = HashMap::from([("hello".to_owned(), EvalService::new(setup).unwrap())]);
    let app =
        AppState::new(vec![Agent::new(project, engine)], ServeOptions::default(), LogBuffer::new(10)).with_evals(evals);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(bdk_server::serve(
        listener,
        app,
        async move {
            let _ = stopped.await;
        },
        std::time::Duration::from_secs(2),
    ));
    Served { base: format!("http://{addr}/hello"), stop: Some(stop), task }
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> super::support::Reply {
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    reply(within("a response", request.send()).await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_start_poll_cancel_finish_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let project = root.join("hello");
    write(&project, "bot/agent.toml", "description = \"A test agent.\"\n");
    write(&project, "bot/instructions.md", "Answer briefly.\n");
    write(&project, "evals/evals.toml", "max_concurrency = 1\ntimeout = \"20s\"\n");
    write(
        &project,
        "evals/smoke.eval.toml",
        "tags = [\"smoke\"]\nmessage = \"hi there\"\n[expect]\nreply_includes = [\"hi\"]\n",
    );
    write(&project, "evals/slow.eval.toml", "tags = [\"slow\"]\nmessage = \"be slow\"\n[expect]\nsucceeded = true\n");
    let state = dir.path().join("state");
    let gate = Arc::new(Gate::default());
    let served = serve(&root, &state, gate.clone()).await;
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let url = |path: &str| format!("{}{path}", served.base);
    use reqwest::Method;

    let listed = call(&client, Method::GET, url("/v1/dev/evals"), None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let ids: Vec<&str> = listed.body["evals"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["slow", "smoke"]);
    assert_eq!(listed.body["config"]["maxConcurrency"], 1);
    assert_eq!(listed.body["config"]["timeoutMs"], 20000);

    // Nothing matches: both fields must match when both are given.
    let none =
        call(&client, Method::POST, url("/v1/dev/evals/runs"), Some(json!({"filterIds": ["smoke"], "tags": ["slow"]})))
            .await;
    none.assert_error(404, "no_matching_evals");
    let bad = call(&client, Method::POST, url("/v1/dev/evals/runs"), Some(json!({"filterIds": "smoke"}))).await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert!(bad.text.contains("field `filterIds`"), "a wrong type names its field: {}", bad.text);
    let typo = call(&client, Method::POST, url("/v1/dev/evals/runs"), Some(json!({"tag": ["slow"]}))).await;
    typo.assert_error(400, "invalid_request");
    assert!(typo.text.contains("unknown field `tag`, expected"), "{}", typo.text);

    // A run that hangs in its model call.
    let started = call(&client, Method::POST, url("/v1/dev/evals/runs"), Some(json!({"tags": ["slow"]}))).await;
    assert_eq!(started.status, 202, "{}", started.text);
    assert_eq!(started.body["status"], "running");
    assert_eq!(started.body["tags"], json!(["slow"]));
    let run_id = started.body["runId"].as_str().unwrap().to_owned();
    within("the slow model call", gate.slow_called.notified()).await;

    let busy = call(&client, Method::POST, url("/v1/dev/evals/runs"), None).await;
    busy.assert_error(409, "eval_run_active");
    let runs = call(&client, Method::GET, url("/v1/dev/evals/runs"), None).await;
    assert_eq!(runs.body["activeRunId"], json!(run_id));
    let polled = call(&client, Method::GET, url(&format!("/v1/dev/evals/runs/{run_id}")), None).await;
    assert_eq!(polled.body["cases"][0]["status"], "running", "{}", polled.text);

    let cancelled = call(&client, Method::POST, url(&format!("/v1/dev/evals/runs/{run_id}/cancel")), None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["cases"][0]["status"], "cancelled");
    assert_eq!(cancelled.body["cases"][0]["attempts"][0]["outcome"], "cancelled");
    let again = call(&client, Method::POST, url(&format!("/v1/dev/evals/runs/{run_id}/cancel")), None).await;
    again.assert_error(409, "eval_run_not_running");
    let unknown = call(&client, Method::POST, url("/v1/dev/evals/runs/evr_nope/cancel"), None).await;
    unknown.assert_error(404, "eval_run_not_found");
    let unknown = call(&client, Method::GET, url("/v1/dev/evals/runs/../../etc"), None).await;
    assert_eq!(unknown.status, 404);

    // A run to completion, polled until it ends.
    let started = call(&client, Method::POST, url("/v1/dev/evals/runs"), Some(json!({"filterIds": ["smoke"]}))).await;
    assert_eq!(started.status, 202, "{}", started.text);
    let second = started.body["runId"].as_str().unwrap().to_owned();
    let finished = within("the run to finish", async {
        loop {
            let polled = call(&client, Method::GET, url(&format!("/v1/dev/evals/runs/{second}")), None).await;
            if polled.body["status"] != "running" {
                return polled;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(finished.body["status"], "completed", "{}", finished.text);
    assert_eq!(finished.body["cases"][0]["status"], "passed", "{}", finished.text);
    assert_eq!(finished.body["cases"][0]["passRate"], 1.0);
    served.shutdown().await;

    // A run a stopped process left `running` is failed on the next start; every run is listed.
    let store = RunStore::new(state.join("evals"));
    let mut orphan = store.load(&second).unwrap();
    orphan.run_id = RunStore::new_run_id();
    orphan.status = bdk_eval::RunStatus::Running;
    store.save(&orphan).unwrap();
    let served = serve(&root, &state, gate).await;
    let runs = call(&client, Method::GET, format!("{}/v1/dev/evals/runs", served.base), None).await;
    let listed: Vec<(&str, &str)> = runs.body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["runId"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(listed.len(), 3, "{}", runs.text);
    assert!(listed.contains(&(run_id.as_str(), "cancelled")));
    assert!(listed.contains(&(second.as_str(), "completed")));
    assert!(listed.contains(&(orphan.run_id.as_str(), "failed")));
    assert!(runs.body.get("activeRunId").is_none());
    served.shutdown().await;
}
