//! [`ProjectTools`]: one agent's tools behind [`ToolRegistry`]. Server command tools run on the
//! host with the bot folder as cwd (once per call, or as one persistent process); agent tools
//! run their script from the session workspace; native tools are Rust; built-ins work on the
//! workspace. Every call goes through the same gate first: the input is validated, `time_args`
//! are enforced under `asOf`, and a dry-run write is answered with its stub.
//!
//! Approvals are the engine's: it asks [`ToolRegistry::needs_approval`] and parks the call before
//! calling [`ToolRegistry::call`].

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bdk_project::Project;
use bdk_project::model::{Execution, ToolBody, ToolDef};
use bdk_protocol::info::Source;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::builtins::{self, Builtin};
use crate::command::{self, CallContext, CommandSpec, Limits, StdinShape};
use crate::error::{Error, Result};
use crate::native::{self, ErasedNative, NativeTool, ToolContext};
use crate::persistent::PersistentTool;
use crate::policy::{self, Effect};
use crate::process;
use crate::sandbox::Sandbox;
use crate::validate::{CompiledTool, describe_errors};
use crate::workspace::{self, WorkspacePlan};
use crate::{BoxFuture, ToolInvocation, ToolOutcome, ToolRegistry, ToolSpec};

/// How a tool runs, as the direct-call route and `info` need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// A server `command`, one process per call.
    Command,
    /// A server tool with an inline `script`, one process per call.
    Script,
    /// A server command or script kept running (`persistent = true`).
    Persistent,
    /// `execution = "agent"`: a script run from the session workspace, never by a direct call.
    Agent,
    /// Registered in Rust.
    Native,
    /// A built-in workspace tool (read, ls, glob, grep, write, edit, shell).
    Builtin,
    /// A tool of an MCP connection (advertised by name, or the built-in `mcp` tool).
    Mcp,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Command => "command",
            ToolKind::Script => "script",
            ToolKind::Persistent => "persistent",
            ToolKind::Agent => "agent",
            ToolKind::Native => "native",
            ToolKind::Builtin => "builtin",
            ToolKind::Mcp => "mcp",
        }
    }

    /// Whether a direct call may run it on the host (server tools only).
    pub fn is_server(self) -> bool {
        matches!(self, ToolKind::Command | ToolKind::Script | ToolKind::Persistent | ToolKind::Native | ToolKind::Mcp)
    }
}

/// One tool as [`ToolRegistry::lookup`] describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub kind: ToolKind,
    pub source: Source,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub time_args: Vec<String>,
    pub timeout: Duration,
    /// A direct call (`POST /v1/tools/:name`, `bdk call`) may run it; otherwise the route
    /// answers 400 `tool_not_callable`.
    pub callable: bool,
}

/// Registry-wide settings.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// The agent's state root (`BDK_STATE_ROOT`, `context.stateRoot`).
    pub state_root: Option<PathBuf>,
    pub limits: Limits,
    /// Tools to run persistently besides those whose file says `persistent = true`.
    pub persistent: Vec<String>,
    /// Confinement of the `shell` built-in and agent tools (`local.sandbox`).
    pub sandbox: Option<Sandbox>,
}

enum Body {
    Command(Vec<String>),
    Script(Vec<String>),
    Persistent(Arc<PersistentTool>),
    Agent(String),
    Native(Arc<dyn ErasedNative>),
    Builtin(Builtin),
}

impl Body {
    fn kind(&self) -> ToolKind {
        match self {
            Body::Command(_) => ToolKind::Command,
            Body::Script(_) => ToolKind::Script,
            Body::Persistent(_) => ToolKind::Persistent,
            Body::Agent(_) => ToolKind::Agent,
            Body::Native(_) => ToolKind::Native,
            Body::Builtin(_) => ToolKind::Builtin,
        }
    }
}

struct Entry {
    def: ToolDef,
    compiled: CompiledTool,
    body: Body,
    /// Set for an extension's tool: what its commands are told about the mount.
    extension: Option<crate::command::ExtensionContext>,
}

struct Inner {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    options: RegistryOptions,
    plan: WorkspacePlan,
    /// Holds server tools' inline scripts; removed with the registry.
    _scripts: Option<tempfile::TempDir>,
}

impl Inner {
    fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.def.name.as_str()).collect();
        if names.is_empty() {
            format!("unknown tool `{name}`; this agent has no tools")
        } else {
            format!("unknown tool `{name}`; available tools: {}", names.join(", "))
        }
    }
}

/// One agent's tools. Cheap to clone; persistent processes die with the last clone.
#[derive(Clone)]
pub struct ProjectTools {
    inner: Arc<Inner>,
}

impl fmt::Debug for ProjectTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.inner.entries.iter().map(|e| e.def.name.as_str()).collect();
        f.debug_struct("ProjectTools").field("tools", &names).finish()
    }
}

/// Collects definitions, native tools and options, then compiles them into [`ProjectTools`].
pub struct ProjectToolsBuilder {
    /// Each extension mount's namespace and `config`.
    extensions: Vec<crate::command::ExtensionContext>,
    bot_dir: PathBuf,
    defs: Vec<ToolDef>,
    natives: Vec<Arc<dyn ErasedNative>>,
    builtins: Option<Vec<String>>,
    with_builtins: bool,
    options: RegistryOptions,
    plan: WorkspacePlan,
}

impl fmt::Debug for ProjectToolsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectToolsBuilder").field("bot_dir", &self.bot_dir).finish_non_exhaustive()
    }
}

impl ProjectTools {
    /// A builder holding `project`'s tools, its built-in allowlist and its workspace plan.
    ///
    /// Native definitions in the project (added for `info` by
    /// `bdk_project::checks::add_native_tools`) only describe; the tools themselves are
    /// registered with [`ProjectToolsBuilder::native`].
    pub fn builder(project: &Project) -> ProjectToolsBuilder {
        ProjectToolsBuilder {
            extensions: project
                .extensions
                .iter()
                .map(|e| crate::command::ExtensionContext {
                    namespace: e.namespace.clone(),
                    config: Value::Object(e.config.clone()),
                })
                .collect(),
            bot_dir: project.bot_dir.clone(),
            defs: project.caps.tools.iter().filter(|t| t.source != Source::Native).cloned().collect(),
            natives: Vec::new(),
            builtins: project.harness.tools.clone(),
            with_builtins: true,
            options: RegistryOptions { sandbox: project_sandbox(project), ..RegistryOptions::default() },
            plan: WorkspacePlan::from_project(project),
        }
    }

    /// A builder with no project: only what is added to it (and the built-ins).
    pub fn empty(bot_dir: impl Into<PathBuf>) -> ProjectToolsBuilder {
        ProjectToolsBuilder {
            extensions: Vec::new(),
            bot_dir: bot_dir.into(),
            defs: Vec::new(),
            natives: Vec::new(),
            builtins: None,
            with_builtins: true,
            options: RegistryOptions::default(),
            plan: WorkspacePlan::default(),
        }
    }

    /// The definition of `name` (file, native or built-in).
    pub fn def(&self, name: &str) -> Option<&ToolDef> {
        self.inner.get(name).map(|e| &e.def)
    }

    /// Every definition, in spec order.
    pub fn defs(&self) -> impl Iterator<Item = &ToolDef> {
        self.inner.entries.iter().map(|e| &e.def)
    }

    /// The native tools' definitions (for `info`, which lists them with `source: "native"`).
    pub fn native_defs(&self) -> Vec<ToolDef> {
        self.inner.entries.iter().filter(|e| matches!(e.body, Body::Native(_))).map(|e| e.def.clone()).collect()
    }

    /// The persistent process behind `name`, if it is persistent.
    pub fn persistent(&self, name: &str) -> Option<Arc<PersistentTool>> {
        match &self.inner.get(name)?.body {
            Body::Persistent(tool) => Some(Arc::clone(tool)),
            _ => None,
        }
    }

    /// The plan [`ToolRegistry::prepare_workspace`] materializes.
    pub fn workspace_plan(&self) -> &WorkspacePlan {
        &self.inner.plan
    }
}

/// A definition with its native implementation or built-in, before compilation.
type Pending = (ToolDef, Option<Arc<dyn ErasedNative>>, Option<Builtin>);

impl ProjectToolsBuilder {
    /// Adds a native tool.
    pub fn native<T: NativeTool>(mut self, tool: T) -> Self {
        self.natives.push(native::erase(tool));
        self
    }

    /// The definitions of the native tools added so far, without building (for `info`, which
    /// lists them with `source: "native"`).
    pub fn native_defs(&self) -> Vec<ToolDef> {
        self.natives.iter().map(|tool| tool.def(self.bot_dir.clone())).collect()
    }

    /// Adds a tool definition (as if read from a file).
    pub fn tool(mut self, def: ToolDef) -> Self {
        self.defs.push(def);
        self
    }

    pub fn state_root(mut self, state_root: impl Into<PathBuf>) -> Self {
        self.options.state_root = Some(state_root.into());
        self
    }

    /// Confines (or, with `None`, stops confining) the `shell` built-in and agent tools. A
    /// project with `local.sandbox = true` starts with [`Sandbox::for_this_process`].
    pub fn sandbox(mut self, sandbox: Option<Sandbox>) -> Self {
        self.options.sandbox = sandbox;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.options.limits = limits;
        self
    }

    /// Runs server tool `name` as one persistent process even if its file does not say so.
    pub fn persistent(mut self, name: impl Into<String>) -> Self {
        self.options.persistent.push(name.into());
        self
    }

    /// The built-in allowlist (`None`: all seven).
    pub fn builtins(mut self, allowlist: Option<Vec<String>>) -> Self {
        self.builtins = allowlist;
        self.with_builtins = true;
        self
    }

    /// No built-in tools at all.
    pub fn without_builtins(mut self) -> Self {
        self.with_builtins = false;
        self
    }

    pub fn options(mut self, options: RegistryOptions) -> Self {
        self.options = options;
        self
    }

    /// Compiles every schema and prepares every body. Fails on a name clash or a schema that
    /// does not compile (`validate` reports both first).
    pub fn build(self) -> Result<ProjectTools> {
        let mut defs: Vec<Pending> = self.defs.into_iter().map(|d| (d, None, None)).collect();
        for tool in self.natives {
            defs.push((tool.def(self.bot_dir.clone()), Some(tool), None));
        }
        if self.with_builtins {
            for builtin in builtins::active(self.builtins.as_deref()) {
                defs.push((builtin.def(self.bot_dir.clone()), None, Some(builtin)));
            }
        }

        let mut scripts: Option<tempfile::TempDir> = None;
        let mut entries = Vec::with_capacity(defs.len());
        let mut index = HashMap::new();
        for (def, native, builtin) in defs {
            if index.insert(def.name.clone(), entries.len()).is_some() {
                return Err(Error::NameClash(def.name));
            }
            let compiled = CompiledTool::compile(&def)?;
            let persistent = def.persistent || self.options.persistent.contains(&def.name);
            let body = match (native, builtin, &def.body) {
                (Some(native), _, _) => Body::Native(native),
                (_, Some(builtin), _) => Body::Builtin(builtin),
                (None, None, _) if def.execution == Execution::Agent => match &def.body {
                    ToolBody::Script(script) => Body::Agent(script.clone()),
                    _ => return Err(unrunnable(&def, "an agent tool needs a `script`")),
                },
                (None, None, ToolBody::Command(argv)) => Body::Command(argv.clone()),
                (None, None, ToolBody::Script(script)) => {
                    let dir = match &scripts {
                        Some(dir) => dir.path().to_path_buf(),
                        None => {
                            let dir = tempfile::Builder::new()
                                .prefix("bdk-tool-scripts-")
                                .tempdir()
                                .map_err(|e| Error::io(std::env::temp_dir(), e))?;
                            let path = dir.path().to_path_buf();
                            scripts = Some(dir);
                            path
                        }
                    };
                    Body::Script(write_script(&dir.join(&def.name), script)?)
                }
                (None, None, ToolBody::Native) => {
                    return Err(unrunnable(&def, "a native definition needs a registered native tool"));
                }
            };
            let body = match body {
                Body::Command(argv) | Body::Script(argv) if persistent => {
                    Body::Persistent(Arc::new(PersistentTool::new(
                        def.name.clone(),
                        argv,
                        def.cwd.clone(),
                        self.options.state_root.clone(),
                        self.options.limits,
                    )))
                }
                other => other,
            };
            let extension = (def.source == Source::Extension)
                .then(|| {
                    self.extensions.iter().find(|e| {
                        def.name.starts_with(&format!("{}{}", e.namespace, bdk_project::formats::NAMESPACE_SEPARATOR))
                    })
                })
                .flatten()
                .cloned();
            entries.push(Entry { def, compiled, body, extension });
        }
        Ok(ProjectTools {
            inner: Arc::new(Inner { entries, index, options: self.options, plan: self.plan, _scripts: scripts }),
        })
    }
}

fn unrunnable(def: &ToolDef, reason: &str) -> Error {
    Error::Definition { tool: def.name.clone(), reason: reason.to_owned() }
}

/// Writes an inline script where it can be executed, and returns the argv that runs it: the
/// file itself when it has a `#!` line, `sh <file>` otherwise.
fn write_script(path: &Path, script: &str) -> Result<Vec<String>> {
    fs::write(path, script).map_err(|e| Error::io(path, e))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(path, e))?;
    Ok(script_argv(path, script))
}

fn script_argv(path: &Path, script: &str) -> Vec<String> {
    let file = path.display().to_string();
    if script.starts_with("#!") { vec![file] } else { vec!["sh".to_owned(), file] }
}

impl ToolRegistry for ProjectTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner
            .entries
            .iter()
            .map(|e| ToolSpec {
                name: e.def.name.clone(),
                description: e.def.description.clone(),
                input_schema: e.def.input_schema.clone(),
                output_schema: e.def.output_schema.clone(),
            })
            .collect()
    }

    /// The entries are fixed when the registry is built.
    fn fixed_specs(&self) -> bool {
        true
    }

    fn call(&self, invocation: ToolInvocation, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { run_call(&inner, invocation, cancel).await })
    }

    fn lookup(&self, name: &str) -> Option<ToolInfo> {
        let entry = self.inner.get(name)?;
        let kind = entry.body.kind();
        Some(ToolInfo {
            name: entry.def.name.clone(),
            description: entry.def.description.clone(),
            kind,
            source: entry.def.source,
            input_schema: entry.def.input_schema.clone(),
            output_schema: entry.def.output_schema.clone(),
            time_args: entry.def.time_args.clone(),
            timeout: entry.def.timeout,
            callable: kind.is_server(),
        })
    }

    fn effect(&self, name: &str, input: &Value) -> Effect {
        match self.inner.get(name) {
            Some(entry) if !entry.compiled.effect_write.holds(input) => Effect::Read,
            _ => Effect::Write,
        }
    }

    fn needs_approval(&self, name: &str, input: &Value) -> bool {
        self.inner.get(name).is_some_and(|e| e.compiled.needs_approval.holds(input))
    }

    fn validate_input(&self, name: &str, input: &Value) -> std::result::Result<(), Vec<String>> {
        match self.inner.get(name) {
            Some(entry) => entry.compiled.input.check(input),
            None => Err(vec![self.inner.unknown(name)]),
        }
    }

    fn time_args_refusal(&self) -> Option<String> {
        policy::time_args_refusal(self.inner.entries.iter().map(|e| &e.def))
    }

    fn callable_names(&self) -> Vec<String> {
        self.inner.entries.iter().filter(|e| e.body.kind().is_server()).map(|e| e.def.name.clone()).collect()
    }

    fn prepare_workspace(&self, workspace: &Path, files: &[(String, String)]) -> Result<()> {
        workspace::materialize(workspace, &self.inner.plan, files)
    }

    fn materializes_workspace(&self) -> bool {
        !self.inner.plan.is_empty()
    }
}

/// The gate every call passes, then the body.
async fn run_call(inner: &Inner, invocation: ToolInvocation, cancel: CancellationToken) -> ToolOutcome {
    let Some(entry) = inner.get(&invocation.name) else {
        return ToolOutcome::error(inner.unknown(&invocation.name));
    };
    let def = &entry.def;
    let input = &invocation.input;
    if let Err(errors) = entry.compiled.input.check(input) {
        return ToolOutcome::error(describe_errors(&def.name, &errors));
    }
    if let Some(as_of) = invocation.as_of
        && let Err(refusal) = policy::check_time_args(def, input, as_of)
    {
        return ToolOutcome::error(refusal);
    }
    if invocation.dry_run && entry.compiled.effect_write.holds(input) {
        return ToolOutcome::stub(policy::dry_run_stub(def));
    }
    let state_root = inner.options.state_root.as_deref();
    let limits = inner.options.limits;
    match &entry.body {
        Body::Command(argv) | Body::Script(argv) => {
            let spec = CommandSpec {
                name: def.name.clone(),
                argv: argv.clone(),
                cwd: def.cwd.clone(),
                timeout: def.timeout,
                limits,
                stdin: StdinShape::Envelope,
                sandbox: None,
            };
            let mut context = CallContext::from_invocation(&invocation, state_root);
            context.extension = entry.extension.clone();
            command::run(&spec, &context, input, cancel).await
        }
        Body::Persistent(tool) => {
            let mut context = CallContext::from_invocation(&invocation, state_root);
            context.extension = entry.extension.clone();
            tool.call(&context, input, def.timeout, cancel).await
        }
        Body::Agent(script) => {
            let sandbox = inner.options.sandbox.clone();
            run_agent(def, script, &invocation, state_root, limits, sandbox, cancel).await
        }
        Body::Native(tool) => {
            let ctx = ToolContext::from_invocation(&invocation, state_root.map(Path::to_path_buf));
            run_native(&def.name, tool.call_value(invocation.input.clone(), ctx), def.timeout, cancel).await
        }
        Body::Builtin(builtin) => {
            let sandbox = inner.options.sandbox.as_ref();
            builtins::run(*builtin, invocation.input.clone(), invocation.workspace.as_deref(), sandbox, cancel).await
        }
    }
}

/// An agent tool: its script, materialized in the session workspace, run there with the bare
/// input on stdin.
async fn run_agent(
    def: &ToolDef,
    script: &str,
    invocation: &ToolInvocation,
    state_root: Option<&Path>,
    limits: Limits,
    sandbox: Option<Sandbox>,
    cancel: CancellationToken,
) -> ToolOutcome {
    let name = &def.name;
    let Some(workspace) = invocation.workspace.as_deref() else {
        return ToolOutcome::error(format!(
            "`{name}` is an agent tool: it runs in a session workspace, and this call has none"
        ));
    };
    let plan = WorkspacePlan {
        agent_tools: vec![workspace::AgentScript {
            name: name.clone(),
            description: def.description.clone(),
            input_schema: def.input_schema.clone(),
            script: script.to_owned(),
        }],
        ..WorkspacePlan::default()
    };
    let path = workspace::agent_tool_path(workspace, name);
    // Write the script only when a prepared workspace lacks it (or holds an older one); the
    // catalog is the engine's `prepare_workspace` to write.
    if fs::read_to_string(&path).map(|s| s != script).unwrap_or(true)
        && let Err(error) = workspace::write_agent_scripts(workspace, &plan)
    {
        return ToolOutcome::error(format!("`{name}` could not be placed in the workspace: {error}"));
    }
    let spec = CommandSpec {
        name: name.clone(),
        argv: script_argv(&path, script),
        cwd: workspace.to_path_buf(),
        timeout: def.timeout,
        limits,
        stdin: StdinShape::Input,
        sandbox,
    };
    let context = CallContext::from_invocation(invocation, state_root);
    command::run(&spec, &context, &invocation.input, cancel).await
}

/// A native call on its own task (a panic becomes an error result), under the tool's timeout.
async fn run_native(
    name: &str,
    future: BoxFuture<'static, std::result::Result<Value, crate::ToolError>>,
    timeout: Duration,
    cancel: CancellationToken,
) -> ToolOutcome {
    let mut task = tokio::spawn(future);
    // Dropped unfinished (a direct call whose caller went away), the call takes its tool with it:
    // a detached tool could otherwise create its scratch folder after the call removed it.
    let _abort = AbortOnDrop(task.abort_handle());
    tokio::select! {
        biased;
        () = cancel.cancelled() => ToolOutcome::error(format!("`{name}` was cancelled")),
        () = tokio::time::sleep(timeout) => {
            ToolOutcome::error(format!("`{name}` timed out after {}", process::duration(timeout)))
        }
        joined = &mut task => match joined {
            Ok(Ok(value)) => ToolOutcome::ok(value),
            Ok(Err(error)) => ToolOutcome::error(error.message),
            Err(error) if error.is_panic() => ToolOutcome::error(format!("`{name}` panicked")),
            Err(error) => ToolOutcome::error(format!("`{name}` failed: {error}")),
        },
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The sandbox `project` asks for: launched by this executable (or `bdk` on `PATH` if this
/// process cannot name its own executable).
fn project_sandbox(project: &Project) -> Option<Sandbox> {
    let network = project.harness.sandbox_network;
    project.harness.sandbox.then(|| {
        Sandbox::for_this_process(network).unwrap_or_else(|_| Sandbox {
            launcher: PathBuf::from("bdk"),
            network,
            allow_unconfined: false,
            read_only: crate::sandbox::read_only_dirs(&std::env::var_os("PATH").unwrap_or_default()),
        })
    })
}
