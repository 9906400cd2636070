//! What a project defines for its engine (instructions and step budget, model provider and
//! price, tool registry, skills, subagents, result gate, A/B experiments) as one snapshot that
//! can be swapped while the engine runs (`bdk serve --dev` hot reload).
//!
//! A turn takes the snapshot once when it starts and runs on it to its end, child turns
//! included, so a turn never mixes two versions; the next turn sees the new one. Sessions,
//! actors, streams, turn slots and hooks belong to the engine core and are not part of the
//! snapshot: `max_running_turns`, the slug and the hooks keep what the engine was built with.

use std::sync::{Arc, OnceLock, RwLock};

use bdk_model::{ModelProvider, Price, ToolSpec};
use bdk_tools::ToolRegistry;

use crate::capabilities::Capabilities;
use crate::types::AgentConfig;

/// One version of what the engine runs new turns with ([`Engine::reload`](crate::Engine::reload)).
#[derive(Debug, Clone)]
pub struct Definitions {
    /// Instructions, `max_steps` and the idle timeout are taken from it; the slug and
    /// `max_running_turns` keep the values the engine was built with.
    pub config: AgentConfig,
    pub provider: Arc<dyn ModelProvider>,
    pub tools: Arc<dyn ToolRegistry>,
    /// Token prices (`None`: the built-in table's price for the provider's model).
    pub price: Option<Price>,
    /// Skills, subagents, result gate, artifacts, A/B experiments. Its hooks are not swapped.
    pub capabilities: Capabilities,
}

/// [`Definitions`] as the engine reads them, with the provider's model id.
#[derive(Debug)]
pub(crate) struct Defs {
    pub config: AgentConfig,
    pub provider: Arc<dyn ModelProvider>,
    pub tools: Arc<dyn ToolRegistry>,
    /// The model id recorded on turns (the provider's).
    pub model: String,
    pub price: Option<Price>,
    pub capabilities: Capabilities,
    /// The model's tool list for a turn and for a child turn (`[top, nested]`), built on first
    /// use when the registry's list is fixed ([`ToolRegistry::fixed_specs`]).
    tool_lists: [OnceLock<Arc<[ToolSpec]>>; 2],
    /// The agent's system prompt (instructions plus the skills list), built on first use.
    system_prompt: OnceLock<Arc<str>>,
}

impl Defs {
    pub fn new(definitions: Definitions) -> Self {
        let Definitions { config, provider, tools, price, capabilities } = definitions;
        let model = provider.info().model;
        let price = price.or_else(|| bdk_model::price_for(&model));
        Self {
            config,
            provider,
            tools,
            model,
            price,
            capabilities,
            tool_lists: Default::default(),
            system_prompt: Default::default(),
        }
    }

    /// The agent's system prompt: its instructions and the skills it may load. Built once per
    /// snapshot and shared by every turn's requests (a turn whose A/B arm adds instructions
    /// builds its own).
    pub fn system_prompt(&self) -> Arc<str> {
        Arc::clone(self.system_prompt.get_or_init(|| {
            Arc::from(crate::skills::system_prompt(&self.config.instructions, &self.capabilities.skills))
        }))
    }

    /// What the model sees: the registry's tools, then the engine's built-ins (the skill tool
    /// when the agent has skills, `task` when it has subagents and this is not a child turn,
    /// the artifacts tool). Built once per snapshot and shared by every turn's requests when
    /// the registry's list is fixed; otherwise asked for on each turn (after its `refresh`).
    pub fn tool_specs(&self, nested: bool) -> Arc<[ToolSpec]> {
        if !self.tools.fixed_specs() {
            return self.build_tool_specs(nested);
        }
        Arc::clone(self.tool_lists[usize::from(nested)].get_or_init(|| self.build_tool_specs(nested)))
    }

    fn build_tool_specs(&self, nested: bool) -> Arc<[ToolSpec]> {
        let mut specs: Vec<bdk_tools::ToolSpec> = self.tools.specs();
        let capabilities = &self.capabilities;
        if !capabilities.skills.is_empty() {
            specs.push(crate::skills::spec(&capabilities.skills));
        }
        if !capabilities.subagents.is_empty() && !nested {
            specs.push(crate::subagents::spec(&capabilities.subagents));
        }
        if capabilities.artifacts.agent_tool {
            specs.push(crate::artifacts::spec(&capabilities.artifacts));
        }
        specs
            .into_iter()
            .map(|t| ToolSpec { name: t.name, description: t.description, input_schema: t.input_schema })
            .collect()
    }
}

/// The current snapshot behind a lock held only to clone or replace the `Arc`.
#[derive(Debug)]
pub(crate) struct Current(RwLock<Arc<Defs>>);

impl Current {
    pub fn new(defs: Defs) -> Self {
        Self(RwLock::new(Arc::new(defs)))
    }

    pub fn load(&self) -> Arc<Defs> {
        self.0.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Replaces the snapshot; returns the one it replaced (dropped by the caller once turns
    /// that took it are done with it).
    pub fn store(&self, defs: Defs) -> Arc<Defs> {
        let mut guard = self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *guard, Arc::new(defs))
    }
}
