//! From a discovered project to what the engine runs with: [`AgentConfig`] from the project's
//! instructions and harness settings, the agent layer of model resolution from its `[model]`
//! table, and the [`Capabilities`] (skills, subagents with their models, hooks). The server and
//! the CLI both build engines this way.

use std::path::Path;
use std::time::Duration;

use bdk_model::{ModelInput, ModelLayer, Price, ProviderOptions};
use bdk_project::Project;
use bdk_project::model::{HookSink, ModelDef};

use crate::capabilities::{
    AbArmSpec, AbSpec, ArtifactKindSpec, ArtifactsSpec, Capabilities, CompactionSpec, HookSinkSpec, HookSpec,
    ResultGateSpec, SkillSpec, SubagentModel, SubagentSpec,
};
use crate::types::AgentConfig;

/// How long an idle session's actor lives before it retires (its state is all on disk).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

impl AgentConfig {
    /// The settings of `project`'s root agent.
    pub fn from_project(project: &Project) -> Self {
        AgentConfig {
            slug: project.slug.clone(),
            instructions: project.instructions.text.clone(),
            max_steps: project.harness.max_steps,
            max_running_turns: project.harness.max_running_turns,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// The agent layer of model resolution, from `agent.toml` `[model]`. Pass the result (with a
/// command-line layer, if any) to `bdk_model::resolve`.
pub fn model_input(project: &Project) -> ModelInput {
    ModelInput { cli: ModelLayer::default(), agent: project.model.as_ref().map(model_layer).unwrap_or_default() }
}

/// One `[model]` table (an agent's, a subagent's, an eval judge's) as a resolution layer.
pub fn model_layer(model: &ModelDef) -> ModelLayer {
    ModelLayer {
        model: Some(model.id.clone()).filter(|id| !id.trim().is_empty()),
        provider: model.provider.clone(),
        base_url: model.base_url.clone(),
        api_key: None,
        api_key_env: model.api_key_env.clone(),
        params: model.params.clone(),
        pricing: model.pricing.map(|p| Price { input: p.input, output: p.output, cached_input: p.cached_input }),
    }
}

/// The project's skills, subagents and hooks for [`EngineOptions::capabilities`](crate::EngineOptions).
/// `state_dir` is the agent's state directory (hook context `stateRoot`; relative file sinks
/// land under it). Subagents are left out when the `tools` allowlist leaves out `task`. A
/// subagent's `[model]` is resolved over the agent's (its own keys win, missing ones are
/// inherited); `${NAME}` in an HTTP hook's URL and headers is read from the environment now.
pub fn capabilities(project: &Project, state_dir: &Path) -> Capabilities {
    let skills = project
        .caps
        .skills
        .iter()
        .map(|s| SkillSpec {
            name: s.name.clone(),
            description: s.description.clone(),
            body: s.body.clone(),
            files: s.files.clone(),
        })
        .collect();
    let task = bdk_project::checks::active_builtins(project).contains(&"task");
    let subagents = if task {
        project
            .caps
            .subagents
            .iter()
            .map(|s| SubagentSpec {
                id: s.id.clone(),
                description: s.description.clone(),
                instructions: s.instructions.text.clone(),
                max_steps: s.max_steps,
                model: s.model.as_ref().map(|m| subagent_model(project, m)),
            })
            .collect()
    } else {
        Vec::new()
    };
    let env = |name: &str| std::env::var(name).ok();
    let hooks = project
        .caps
        .hooks
        .iter()
        .map(|h| HookSpec {
            name: h.name.clone(),
            events: h.events.clone(),
            sink: match &h.sink {
                HookSink::Command(argv) => HookSinkSpec::Command(argv.clone()),
                HookSink::File(path) => HookSinkSpec::File(state_dir.join(path)),
                HookSink::Http { url, headers } => HookSinkSpec::Http {
                    url: expand(url, &env),
                    headers: headers.iter().map(|(k, v)| (k.clone(), expand(v, &env))).collect(),
                },
            },
            cwd: h.cwd.clone(),
            env: extension_env(project, &h.name, h.source),
        })
        .collect();
    Capabilities {
        skills,
        subagents,
        hooks,
        state_root: Some(state_dir.to_path_buf()),
        artifacts: artifacts_spec(project),
        result_gate: project.result.as_ref().map(|r| ResultGateSpec {
            command: r.command.clone(),
            timeout: r.timeout,
            cwd: project.bot_dir.clone(),
            max_revisions: r.max_revisions,
        }),
        abs: project
            .abs
            .iter()
            .map(|ab| AbSpec {
                id: ab.id.clone(),
                description: ab.description.clone(),
                enabled: ab.enabled,
                arms: ab
                    .arms
                    .iter()
                    .map(|arm| AbArmSpec {
                        id: arm.id.clone(),
                        weight: arm.weight,
                        instructions: arm.instructions.clone(),
                        model: arm.model.as_ref().map(|id| {
                            let def = ModelDef {
                                id: id.clone(),
                                provider: None,
                                base_url: None,
                                api_key_env: None,
                                params: Default::default(),
                                pricing: None,
                                context_window: None,
                            };
                            (id.clone(), subagent_model(project, &def))
                        }),
                    })
                    .collect(),
            })
            .collect(),
        workspace_parent: project.harness.cwd.as_ref().map(|cwd| {
            let dir = project.dir.join(cwd);
            std::path::absolute(&dir).unwrap_or(dir)
        }),
        compaction: CompactionSpec {
            enabled: project.harness.compaction.enabled,
            context_window: project.model.as_ref().and_then(|m| m.context_window),
            threshold: project.harness.compaction.threshold,
            keep_turns: project.harness.compaction.keep_turns,
        },
        extensions: extensions(project),
    }
}

/// Each extension mount's namespace and `config` (placeholders unresolved: they are read when
/// a command starts).
fn extensions(project: &Project) -> Vec<bdk_tools::command::ExtensionContext> {
    project
        .extensions
        .iter()
        .map(|e| bdk_tools::command::ExtensionContext {
            namespace: e.namespace.clone(),
            config: serde_json::Value::Object(e.config.clone()),
        })
        .collect()
}

/// `artifacts.toml` (and extensions' kinds), or the defaults.
fn artifacts_spec(project: &Project) -> ArtifactsSpec {
    let kinds = project
        .caps
        .artifact_kinds
        .iter()
        .map(|k| ArtifactKindSpec {
            name: k.name.clone(),
            description: k.description.clone(),
            schema: k.schema.clone(),
        })
        .collect();
    match &project.artifacts {
        Some(def) => ArtifactsSpec { agent_tool: def.agent_tool, max: def.max as usize, kinds },
        None => ArtifactsSpec { kinds, ..ArtifactsSpec::default() },
    }
}

/// `BDK_EXTENSION` and `BDK_EXTENSION_CONFIG` for a command an extension contributed as `name`
/// (`<ns>__...`); empty for the root's own. `${NAME}` in config strings is read now.
fn extension_env(project: &Project, name: &str, source: bdk_protocol::info::Source) -> Vec<(String, String)> {
    let Some(namespace) = bdk_project::formats::namespace_of(name, source) else {
        return Vec::new();
    };
    let Some(context) = extensions(project).into_iter().find(|e| e.namespace == namespace) else {
        return Vec::new();
    };
    vec![
        (bdk_tools::command::env::EXTENSION.to_owned(), context.namespace.clone()),
        (bdk_tools::command::env::EXTENSION_CONFIG.to_owned(), context.resolved_config().to_string()),
    ]
}

fn subagent_model(project: &Project, model: &ModelDef) -> SubagentModel {
    let input = ModelInput { cli: model_layer(model), ..model_input(project) };
    let resolved = bdk_model::resolve(&input, &|name| std::env::var(name).ok());
    SubagentModel { provider: bdk_model::build(&resolved, &ProviderOptions::default()), price: resolved.price }
}

/// `${NAME}` replaced by the variable's value (unset: empty).
fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = text.to_owned();
    for name in bdk_project::parse::placeholders(text) {
        out = out.replace(&format!("${{{name}}}"), &env(&name).unwrap_or_default());
    }
    out
}
