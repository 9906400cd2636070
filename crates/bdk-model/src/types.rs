//! Provider-neutral request and stream-event types.
//!
//! A [`ModelRequest`] is one model call (one step of a turn); a provider answers it with a stream
//! of [`ModelEvent`]s. Wire formats live in the provider modules, not here.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::messages::Messages;

/// One call to a model: what it is told, what it may call, and how to sample.
///
/// Cheap to clone: the system prompt, the messages and the tools are shared, so each step of a
/// turn and each retry of a call copies none of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt (agent instructions), if any.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "shared::serialize_text",
        deserialize_with = "shared::deserialize_text"
    )]
    pub system: Option<Arc<str>>,
    /// The conversation so far, oldest first, shared with the step before (see [`Messages`]).
    pub messages: Messages,
    /// Tools the model may call. Shared: the engine builds the list once per definitions
    /// snapshot and every step's request points at it.
    #[serde(
        default,
        skip_serializing_if = "<[ToolSpec]>::is_empty",
        serialize_with = "shared::serialize",
        deserialize_with = "shared::deserialize"
    )]
    pub tools: Arc<[ToolSpec]>,
    /// Per-call settings; unset fields fall back to the provider's configured defaults.
    #[serde(default)]
    pub params: ModelParams,
}

/// Serde for a shared list, as a plain sequence (serde's own impls need its `rc` feature).
mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(items: &Arc<[T]>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(items.iter())
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(deserializer: D) -> Result<Arc<[T]>, D::Error> {
        Vec::<T>::deserialize(deserializer).map(Arc::from)
    }

    pub fn serialize_text<S: Serializer>(text: &Option<Arc<str>>, serializer: S) -> Result<S::Ok, S::Error> {
        text.as_deref().serialize(serializer)
    }

    pub fn deserialize_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Arc<str>>, D::Error> {
        Option::<String>::deserialize(deserializer).map(|text| text.map(Arc::from))
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user (or a channel, schedule, parent agent) said.
    User { content: String },
    /// What the model answered in an earlier step.
    Assistant {
        #[serde(default)]
        content: String,
        /// Reasoning the provider must see again (Anthropic thinking blocks with signatures).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the assistant's call with the same id.
    Tool {
        call_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Message::User { content: content.into() }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant { content: content.into(), reasoning: None, tool_calls: Vec::new() }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>, is_error: bool) -> Self {
        Message::Tool { call_id: call_id.into(), content: content.into(), is_error }
    }
}

/// Reasoning from an earlier step, kept so it can be sent back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    pub text: String,
    /// Opaque token the provider issued with the reasoning (Anthropic `signature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// A fully assembled tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; tool results answer it.
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them: JSON text, `{}` when the model sent none. Not
    /// validated here: a model may write broken JSON, and the engine tells it so.
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed as JSON.
    pub fn arguments_json(&self) -> serde_json::Result<Value> {
        serde_json::from_str(&self.arguments)
    }
}

/// Reasoning effort, as the providers spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    Minimal,
    Low,
    Medium,
    High,
}

impl Effort {
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "minimal" => Some(Effort::Minimal),
            "low" => Some(Effort::Low),
            "medium" => Some(Effort::Medium),
            "high" => Some(Effort::High),
            _ => None,
        }
    }
}

/// Sampling settings. Every field is optional; a request's value beats the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// The reference's `fast` flag. Recorded and reported; no provider documents a request field
    /// for it, so it is not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast: Option<bool>,
    /// Other keys, copied into the request body as they are (for local servers' own knobs).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ModelParams {
    /// `self` where set, else `defaults`.
    pub fn or(&self, defaults: &ModelParams) -> ModelParams {
        let mut extra = defaults.extra.clone();
        extra.extend(self.extra.clone());
        ModelParams {
            effort: self.effort.or(defaults.effort),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            temperature: self.temperature.or(defaults.temperature),
            top_p: self.top_p.or(defaults.top_p),
            fast: self.fast.or(defaults.fast),
            extra,
        }
    }
}

/// Token counts for one model call.
///
/// `input_tokens` counts every prompt token, including those read from or written to a cache;
/// `cached_input_tokens` and `cache_write_tokens` are the parts of it that were. Providers that
/// report them differently (Anthropic counts them apart) are normalised to this.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Reasoning tokens, part of `output_tokens`, where the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// Adds another call's usage (for per-turn totals).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens = match (self.reasoning_tokens, other.reasoning_tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants tool results before going on.
    ToolCalls,
    /// It hit the output token limit.
    Length,
    /// The provider filtered or the model refused.
    ContentFilter,
    /// Anything else, as the provider spelled it.
    Other(String),
}

/// One item of a model's streamed answer.
///
/// Order: deltas as they arrive; each tool call once complete; `Usage` (zero or more times, the
/// last one wins); `Finish` exactly once, last. An `Err` item ends the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelEvent {
    TextDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    /// The signature closing a reasoning block; send it back with [`Reasoning::signature`].
    ReasoningSignature {
        signature: String,
    },
    ToolCall {
        call: ToolCall,
    },
    Usage {
        usage: Usage,
    },
    Finish {
        reason: FinishReason,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_merge_prefers_the_request() {
        let defaults = ModelParams { effort: Some(Effort::High), fast: Some(true), ..Default::default() };
        let request = ModelParams { effort: Some(Effort::Low), max_tokens: Some(10), ..Default::default() };
        let merged = request.or(&defaults);
        assert_eq!(merged.effort, Some(Effort::Low));
        assert_eq!(merged.fast, Some(true));
        assert_eq!(merged.max_tokens, Some(10));
    }

    #[test]
    fn usage_adds_up() {
        let mut total = Usage::default();
        total.add(&Usage { input_tokens: 10, output_tokens: 5, reasoning_tokens: Some(2), ..Default::default() });
        total.add(&Usage { input_tokens: 1, output_tokens: 1, cached_input_tokens: 1, ..Default::default() });
        assert_eq!(total.input_tokens, 11);
        assert_eq!(total.reasoning_tokens, Some(2));
        assert_eq!(total.cached_input_tokens, 1);
    }
}
