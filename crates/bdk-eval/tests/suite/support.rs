//! Shared fixtures: a real project folder in a temp dir (a read tool, a write tool with a
//! dry-run result, `evals/`), the agent's model and the judge each pointed at their own fake
//! model server, and a timeout on every wait.

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bdk_eval::{Batch, EvalSetup, RunSnapshot, RunStore, ToolsFactory};
use bdk_model::{ModelInput, ModelLayer, ModelProvider, Price, ProviderOptions};
use bdk_project::Project;
use bdk_test_support::{FakeServer, Part, Reply, openai_sse as oa};
use bdk_tools::{ProjectTools, ToolRegistry};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// Every wait in this suite is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub async fn within<F: Future>(future: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {TIMEOUT:?}"),
    }
}

/// Answers with the `purpose` its call context carries (`"purpose":"eval"` in eval sessions).
pub const LOOKUP: &str = r#"description = "Look something up."
effect = "read"
command = ["sh", "-c", "grep -o '\"purpose\":[^,}]*' || echo none"]

[input_schema]
type = "object"
properties = { q = { type = "string" }, n = { type = "integer" } }
"#;

pub const PUBLISH: &str = r#"description = "Publish."
effect = "write"
dry_run_result = { published = false }
command = ["sh", "-c", "cat > /dev/null; echo '{\"published\": true}'"]

[input_schema]
type = "object"
properties = { env = { type = "string" } }
"#;

/// A project folder with the two tools, `evals/evals.toml` set to `config` and `evals`
/// (`(path under evals/, content)`).
pub fn project(dir: &Path, config: &str, evals: &[(&str, &str)]) -> Project {
    let write = |rel: &str, body: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    };
    write("bot/agent.toml", "description = \"Eval test agent.\"\nmax_steps = 6\n");
    write("bot/instructions.md", "You are a test agent.\n");
    write("bot/tools/lookup.toml", LOOKUP);
    write("bot/tools/publish.toml", PUBLISH);
    write("evals/evals.toml", config);
    for (rel, body) in evals {
        write(&format!("evals/{rel}"), body);
    }
    let mut discovery = bdk_project::discover(&[dir.to_path_buf()]);
    assert_eq!(discovery.projects.len(), 1);
    let project = discovery.projects.remove(0);
    let errors: Vec<_> = project.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    project
}

/// An OpenAI-compatible provider on `url`, resolved with no environment.
pub fn provider(url: &str, model: &str) -> Arc<dyn ModelProvider> {
    let layer = ModelLayer {
        model: Some(model.into()),
        provider: Some("openai-compatible".into()),
        base_url: Some(url.into()),
        ..ModelLayer::default()
    };
    let resolved = bdk_model::resolve(&ModelInput { cli: layer, agent: ModelLayer::default() }, &|_| None);
    bdk_model::build(&resolved, &ProviderOptions::default())
}

pub fn tools_factory(project: &Project) -> ToolsFactory {
    let project = project.clone();
    Arc::new(move |state: &Path| {
        ProjectTools::builder(&project)
            .state_root(state)
            .build()
            .map(|t| Arc::new(t) as Arc<dyn ToolRegistry>)
            .map_err(|e| e.to_string())
    })
}

/// $1000 per million tokens either way, so a few hundred tokens cost something.
pub const PRICE: Price = Price { input: 1000.0, output: 1000.0, cached_input: None };

#[allow(dead_code)]
pub struct Fx {
    pub dir: TempDir,
    pub state: TempDir,
    pub model: FakeServer,
    pub judge: FakeServer,
    pub setup: EvalSetup,
}

impl Fx {
    pub async fn new(config: &str, evals: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let project = project(dir.path(), config, evals);
        let (model, judge) = (FakeServer::start().await, FakeServer::start().await);
        let setup = EvalSetup {
            tools: tools_factory(&project),
            telemetry: Default::default(),
            project: Arc::new(project),
            state_dir: state.path().join("agent"),
            provider: provider(&model.url(), "fake-model"),
            price: Some(PRICE),
            judge: provider(&judge.url(), "fake-judge"),
        };
        Fx { dir, state, model, judge, setup }
    }

    pub fn store(&self) -> RunStore {
        RunStore::new(self.setup.evals_dir())
    }

    /// The whole project's cases as a batch with its own settings.
    pub fn batch(&self) -> Batch {
        let evals = self.setup.project.evals.as_ref().unwrap();
        Batch {
            cases: evals.cases.clone(),
            filter_ids: Vec::new(),
            tags: Vec::new(),
            iterations: None,
            max_concurrency: evals.max_concurrency,
            timeout: evals.timeout,
        }
    }

    /// Runs `batch` to the end.
    pub async fn run(&self, batch: Batch) -> RunSnapshot {
        let shared = Arc::new(Mutex::new(batch.snapshot(RunStore::new_run_id(), &self.setup.project.slug)));
        within(bdk_eval::run_batch(&self.setup, &self.store(), batch, shared, CancellationToken::new(), &|_, _| {}))
            .await
    }
}

/// A streamed text reply with usage.
pub fn text(body: &str) -> Reply {
    Reply::sse(oa::text_reply(body, 100, 50))
}

/// A streamed single tool call with usage.
pub fn call(id: &str, name: &str, arguments: &str) -> Reply {
    let parts: Vec<Part> = vec![
        oa::role(),
        oa::tool_call(0, Some(id), Some(name), arguments),
        oa::finish("tool_calls"),
        oa::usage(100, 20, 0, 0),
        oa::done(),
    ];
    Reply::sse(parts)
}
