//! From a discovered project to what the engine runs with: [`AgentConfig`] from the project's
//! instructions and harness settings, and the agent layer of model resolution from its
//! `[model]` table. The server and the CLI both build engines this way.

use std::time::Duration;

use bdk_model::{ModelInput, ModelLayer, Price};
use bdk_project::Project;
use bdk_project::model::ModelDef;

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

fn model_layer(model: &ModelDef) -> ModelLayer {
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
