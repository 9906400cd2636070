//! Model providers for BDK: one streaming trait ([`ModelProvider`]) with OpenAI-compatible
//! (xAI, OpenAI, local servers), Anthropic and deterministic `scripted` implementations, plus
//! retries, timeouts, model resolution and cost estimates.
//!
//! This crate knows nothing of projects, sessions or events: the engine maps an agent's
//! `[model]` table into [`resolve::ModelInput`] and holds the result as `Arc<dyn ModelProvider>`.

pub mod error;
pub mod provider;
pub mod scripted;
pub mod types;

pub use error::{ModelError, Result, TimeoutPhase};
pub use provider::{ModelProvider, ModelStream, ProviderInfo, UnavailableProvider};
pub use scripted::{ScriptStep, ScriptedProvider};
pub use types::{
    Effort, FinishReason, Message, ModelEvent, ModelParams, ModelRequest, Reasoning, ToolCall, ToolSpec, Usage,
};
