//! Model providers for BDK: one streaming trait ([`ModelProvider`]) with OpenAI-compatible
//! (xAI, OpenAI, local servers), Anthropic and deterministic `scripted` implementations, plus
//! retries, timeouts, model resolution and cost estimates.
//!
//! This crate knows nothing of projects, sessions or events: the engine maps an agent's
//! `[model]` table into [`ModelInput`], calls [`resolve()`] and [`build`], and holds the result as
//! `Arc<dyn ModelProvider>`.

pub mod anthropic;
pub mod context;
pub mod cost;
pub mod env;
pub mod error;
pub mod http;
pub mod messages;
pub mod openai;
pub mod presets;
pub mod provider;
pub mod resolve;
pub mod retry;
pub mod scripted;
pub mod types;

pub use anthropic::AnthropicProvider;
pub use context::context_window_for;
pub use cost::{Price, estimate_cost, price_for};
pub use error::{ModelError, Result, TimeoutPhase};
pub use http::{HttpConfig, Timeouts};
pub use messages::{Messages, WireFormat};
pub use openai::OpenAiProvider;
pub use presets::{DEFAULT_MODEL, ProviderKind, default_model_params};
pub use provider::{ModelProvider, ModelStream, ProviderInfo, UnavailableProvider};
pub use resolve::{ModelInput, ModelLayer, ProviderOptions, ResolvedModel, build, resolve};
pub use retry::{RetryPolicy, Retrying};
pub use scripted::{REQUESTS_KEPT, ScriptStep, ScriptedProvider};
pub use types::{
    Effort, FinishReason, Message, ModelEvent, ModelParams, ModelRequest, Reasoning, ToolCall, ToolSpec, Usage,
};
