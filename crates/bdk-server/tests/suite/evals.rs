//! The eval routes' lifecycle over a real listener: list the evals, start a run (202), nothing
//! matches (404), a second start while one runs (409), poll, cancel (200, then 409 not running,
//! 404 unknown), a run to completion, and every run listed again by a fresh host on the same
//! state, with a run a stopped process left `running` marked failed. On PostgreSQL (needs
//! `BDK_TEST_DATABASE_URL`, skipped loudly without), two replicas share the runs: a run started
//! on one is listed, polled, guarded (409) and cancelled through the other, and a run a dead
//! replica left `running` is marked failed by exactly one of them.

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
    serve_runs(root, state, provider, RunStore::new(state.join("evals"))).await
}

/// Serves the project in `root/hello` with its eval runs saved in `runs`.
async fn serve_runs(root: &Path, state: &Path, provider: Arc<Gate>, runs: RunStore) -> Served {
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
    let evals = HashMap::from([("hello".to_owned(), EvalService::open(setup, runs).await.unwrap())]);
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

/// The project `root/hello`: a `smoke` eval that passes and a `slow` one whose model call
/// waits until it is cancelled.
fn project(root: &Path) {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_start_poll_cancel_finish_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    project(&root);
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
    let mut orphan = store.load(&second).await.unwrap();
    orphan.run_id = RunStore::new_run_id();
    orphan.status = bdk_eval::RunStatus::Running;
    store.save(&orphan).await.unwrap();
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

/// Polls `url` until the run is no longer `running`.
async fn until_ended(client: &reqwest::Client, url: String) -> super::support::Reply {
    within("the run to end", async {
        loop {
            let polled = call(client, reqwest::Method::GET, url.clone(), None).await;
            if polled.body["status"] != "running" {
                return polled;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_on_postgres_are_shared_by_replicas() {
    use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
    use reqwest::Method;

    let Some(db) = bdk_test_support::postgres::fresh("eval_routes").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    project(&root);
    // Leases (and so the services' own sweeps) of an hour: the recovery below is the test's.
    let options = PgOptions {
        schema: Some(db.schema().to_owned()),
        pool_size: 4,
        session_lease: std::time::Duration::from_secs(3600),
        ..PgOptions::default()
    };
    // Two replicas: a database handle each (their own replica ids), a state directory each.
    let mut stores = Vec::new();
    let mut hosts = Vec::new();
    let gate = Arc::new(Gate::default());
    for name in ["a", "b"] {
        let state = dir.path().join(name);
        let store = PgStore::new(PgDatabase::connect(db.base_url(), &options).await.unwrap(), "hello", &state);
        let runs = RunStore::with_backend(state.join("evals"), store.eval_runs());
        hosts.push(serve_runs(&root, &state, gate.clone(), runs.clone()).await);
        stores.push(runs);
    }
    let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
    let (a, b) = (&hosts[0].base, &hosts[1].base);

    // A run that hangs in its model call, on a.
    let started = call(&client, Method::POST, format!("{a}/v1/dev/evals/runs"), Some(json!({"tags": ["slow"]}))).await;
    assert_eq!(started.status, 202, "{}", started.text);
    let run_id = started.body["runId"].as_str().unwrap().to_owned();
    within("the slow model call", gate.slow_called.notified()).await;

    // b lists it as running, polls it, and refuses a second run for the group.
    let runs = call(&client, Method::GET, format!("{b}/v1/dev/evals/runs"), None).await;
    assert_eq!(runs.status, 200, "{}", runs.text);
    assert_eq!(runs.body["activeRunId"], json!(run_id), "{}", runs.text);
    assert_eq!(runs.body["runs"][0]["status"], "running");
    let polled = call(&client, Method::GET, format!("{b}/v1/dev/evals/runs/{run_id}"), None).await;
    assert_eq!(polled.body["status"], "running", "{}", polled.text);
    let busy = call(&client, Method::POST, format!("{b}/v1/dev/evals/runs"), None).await;
    busy.assert_error(409, "eval_run_active");

    // A cancel sent to b stops the run on a.
    let cancelled = call(&client, Method::POST, format!("{b}/v1/dev/evals/runs/{run_id}/cancel"), None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.text);
    assert_eq!(cancelled.body["cases"][0]["attempts"][0]["outcome"], "cancelled");
    let again = call(&client, Method::POST, format!("{a}/v1/dev/evals/runs/{run_id}/cancel"), None).await;
    again.assert_error(409, "eval_run_not_running");

    // A run started on b is polled to completion on a.
    let started =
        call(&client, Method::POST, format!("{b}/v1/dev/evals/runs"), Some(json!({"filterIds": ["smoke"]}))).await;
    assert_eq!(started.status, 202, "{}", started.text);
    let second = started.body["runId"].as_str().unwrap().to_owned();
    let finished = until_ended(&client, format!("{a}/v1/dev/evals/runs/{second}")).await;
    assert_eq!(finished.body["status"], "completed", "{}", finished.text);
    assert_eq!(finished.body["cases"][0]["status"], "passed", "{}", finished.text);

    // A run left running by a replica that is gone (its lease past): both recover at once,
    // exactly one marks it failed.
    let orphan = RunStore::new_run_id();
    db.execute(&format!(
        "INSERT INTO bdk_eval_runs (agent, run_id, status, started_at, snapshot, replica, expires_at) \
         SELECT agent, '{orphan}', 'running', started_at, \
                jsonb_set(jsonb_set(snapshot, '{{runId}}', '\"{orphan}\"'), '{{status}}', '\"running\"'), \
                'gone', now() - interval '1 second' \
         FROM bdk_eval_runs WHERE run_id = '{second}'"
    ))
    .await;
    let (x, y) = tokio::join!(stores[0].recover(), stores[1].recover());
    assert_eq!(x.unwrap() + y.unwrap(), 1, "marked failed exactly once");
    let failed = call(&client, Method::GET, format!("{b}/v1/dev/evals/runs/{orphan}"), None).await;
    assert_eq!(failed.body["status"], "failed", "{}", failed.text);
    assert_eq!(failed.body["error"], bdk_eval::store::INTERRUPTED);
    let runs = call(&client, Method::GET, format!("{a}/v1/dev/evals/runs"), None).await;
    assert_eq!(runs.body["runs"].as_array().unwrap().len(), 3, "{}", runs.text);
    assert!(runs.body.get("activeRunId").is_none(), "{}", runs.text);
    for host in hosts {
        host.shutdown().await;
    }
}
