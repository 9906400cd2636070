//! Native tools through the embedding library (`bdk_cli::Embed`, what `bdk::main_with` takes):
//! discovery adds them to the project model, so `info`'s manifest lists them with
//! `source: "native"` and their schemars schema, the mounted project's `GET /v1/info` shows them,
//! the mounted registry runs them, and a name a file tool or a built-in already has is a
//! `name_clash` error rather than an override. The `bdk` binary (nothing embedded) is unchanged.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use bdk_cli::Embed;
use bdk_engine::EngineOptions;
use bdk_model::ModelLayer;
use bdk_project::Project;
use bdk_project::model::Predicate;
use bdk_server::{AppState, LogBuffer, Mode, ServeOptions, mount};
use bdk_tools::{NativeTool, ToolContext, ToolError, ToolInvocation, ToolKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::support::{example, run};

/// What the model sends to `add`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddInput {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

#[derive(Clone)]
struct Add;

impl NativeTool for Add {
    type Input = AddInput;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Add two integers."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: AddInput, _ctx: ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ "sum": input.a + input.b }))
    }
}

/// A native tool whose name is `name` (for clashes).
#[derive(Clone)]
struct Named(&'static str);

impl NativeTool for Named {
    type Input = Value;

    fn name(&self) -> &str {
        self.0
    }

    fn description(&self) -> &str {
        "Clashes."
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<Value, ToolError> {
        Ok(Value::Null)
    }
}

/// The one project under `dir`, as the commands of a binary embedding `embed` see it.
fn discover(embed: &Embed, dir: &str) -> Project {
    let mut discovery = embed.discover(&[PathBuf::from(dir)]);
    assert_eq!(discovery.projects.len(), 1, "{:?}", discovery.diagnostics);
    discovery.projects.remove(0)
}

fn manifest_tool(project: &Project, name: &str) -> Value {
    let manifest = serde_json::to_value(bdk_project::manifest(project)).unwrap();
    manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == name).cloned().unwrap_or(Value::Null)
}

#[test]
fn info_lists_native_tools_with_their_derived_schema() {
    let project = discover(&Embed::new().native(Add), &example("hello"));
    assert!(!project.has_errors(), "{:?}", project.diagnostics);
    let add = manifest_tool(&project, "add");
    assert_eq!(add["source"], json!("native"), "{add}");
    assert_eq!(add["runner"], json!("native"));
    assert_eq!(add["execution"], json!("server"));
    assert_eq!(add["effect"], json!("read"));
    assert_eq!(add["description"], json!("Add two integers."));
    assert!(add.get("file").is_none(), "{add}");
    let schema = &add["inputSchema"];
    assert_eq!(schema["type"], json!("object"));
    assert_eq!(schema["required"], json!(["a", "b"]));
    assert_eq!(schema["properties"]["a"]["type"], json!("integer"));
    assert_eq!(schema["properties"]["b"]["description"], json!("The second addend."));
    // The file tool is still there, from its file.
    assert_eq!(manifest_tool(&project, "word_count")["source"], json!("file"));

    // Nothing embedded: the project model is the plain discovery's.
    assert_eq!(manifest_tool(&discover(&Embed::default(), &example("hello")), "add"), Value::Null);
    let (code, stdout, stderr) = run(&["info", "--json", "--dir", &example("hello")]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("\"native\""), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mounted_project_shows_and_runs_native_tools() {
    let embed = Embed::new().native(Add);
    let project = discover(&embed, &example("hello"));
    let state = tempfile::tempdir().unwrap();
    let dir = mount::state_dir(&project, Some(state.path()));

    // The registry `serve`, `run` and `call --dir` mount: the file tools plus the native one.
    let tools = embed.registry(&project, &dir).unwrap();
    let info = tools.lookup("add").unwrap();
    assert_eq!(info.kind, ToolKind::Native);
    assert!(info.callable);
    assert!(tools.lookup("word_count").is_some());
    let outcome =
        tools.call(ToolInvocation::generate("add", json!({ "a": 40, "b": 2 })), CancellationToken::new()).await;
    assert!(!outcome.is_error, "{}", outcome.result);
    assert_eq!(outcome.result, json!({ "sum": 42 }));

    // GET /v1/info of the mounted project.
    let (_, provider) = mount::provider(&project, ModelLayer::default());
    let (agent, _) = mount::mount(project, &dir, provider, tools, EngineOptions::default()).await.unwrap();
    let options = ServeOptions { mode: Mode::Single, playground: false, docs: false, ..ServeOptions::default() };
    // A loopback caller, as the default auth admits.
    let loopback: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    let request = Request::get("/v1/info").extension(ConnectInfo(loopback)).body(Body::empty()).unwrap();
    let app = bdk_server::app(AppState::new(vec![agent], options, LogBuffer::default()));
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    let info: Value = serde_json::from_slice(&body).unwrap();
    let add = info["tools"].as_array().unwrap().iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(add["source"], json!("native"));
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
}

#[test]
fn a_native_name_already_taken_is_a_name_clash() {
    let root = tempfile::tempdir().unwrap();
    let dir = super::serve::write_project(root.path(), "clashy", &["text = \"hi\""]);
    std::fs::create_dir_all(dir.join("bot/tools")).unwrap();
    std::fs::write(
        dir.join("bot/tools/add.toml"),
        "description = \"Adds, as a command.\"\neffect = \"read\"\ncommand = [\"sh\", \"-c\", \"cat\"]\n",
    )
    .unwrap();
    let dir = dir.display().to_string();

    let project = discover(&Embed::new().native(Add).native(Named("read")).native(Named("fine")), &dir);
    let clashes: Vec<_> = project.diagnostics.iter().filter(|d| d.code == "name_clash").collect();
    assert_eq!(clashes.len(), 2, "{:?}", project.diagnostics);
    assert!(clashes.iter().all(|d| d.is_error() && d.file.is_none()));
    let messages: Vec<&str> = clashes.iter().map(|d| d.message.as_str()).collect();
    assert!(
        messages.contains(&"the native tool `add` has a name already claimed by bot/tools/add.toml"),
        "{messages:?}"
    );
    assert!(
        messages.contains(&"the native tool `read` has a name already claimed by the built-in `read` tool"),
        "{messages:?}"
    );
    assert!(project.has_errors());

    // Without the clashing tools the project is clean.
    assert!(!discover(&Embed::new().native(Named("fine")), &dir).has_errors());
}

#[test]
fn evals_may_name_native_tools() {
    let root = tempfile::tempdir().unwrap();
    let dir = super::serve::write_project(root.path(), "evaly", &["text = \"hi\""]);
    std::fs::create_dir_all(dir.join("evals")).unwrap();
    std::fs::write(dir.join("evals/evals.toml"), "max_concurrency = 1\n").unwrap();
    std::fs::write(
        dir.join("evals/sum.eval.toml"),
        "message = \"What is 1 + 2?\"\n\n[expect]\ncalled_tool = [{ name = \"add\" }]\n",
    )
    .unwrap();
    let dir = dir.display().to_string();
    let unknown = |project: &Project| project.diagnostics.iter().filter(|d| d.code == "unknown_tool_reference").count();
    assert_eq!(unknown(&discover(&Embed::default(), &dir)), 1);
    let project = discover(&Embed::new().native(Add), &dir);
    assert_eq!(unknown(&project), 0, "{:?}", project.diagnostics);
}
