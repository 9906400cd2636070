//! The deterministic `scripted` provider, for tests and offline demos only.
//!
//! It calls no model. With a script it replays one [`ScriptStep`] per call, in order; without one
//! it echoes the last user message so `bdk run` works offline. Resolution picks it only when
//! `provider = "scripted"` is set explicitly, never as a fallback.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::stream;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{ModelError, TimeoutPhase};
use crate::provider::{ModelProvider, ModelStream, ProviderInfo};
use crate::types::{FinishReason, Message, ModelEvent, ModelRequest, ToolCall, Usage};

/// What one model call answers: optional reasoning, text, tool calls and usage, then either a
/// finish or an error (an error after output models a stream that broke midway).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptStep {
    pub reasoning: Option<String>,
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    /// Defaults to `tool_calls` when there are tool calls, else `stop`.
    pub finish: Option<FinishReason>,
    pub error: Option<ModelError>,
    /// A pause before each event, to give tests something to cancel.
    pub delay: Option<Duration>,
}

impl ScriptStep {
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Default::default() }
    }

    pub fn tool_call(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::default().with_tool_call(id, name, arguments)
    }

    pub fn error(error: ModelError) -> Self {
        Self { error: Some(error), ..Default::default() }
    }

    pub fn with_tool_call(mut self, id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(ToolCall { id: id.into(), name: name.into(), arguments: arguments.to_string() });
        self
    }

    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    fn events(&self) -> Vec<Result<ModelEvent, ModelError>> {
        let mut out = Vec::new();
        if let Some(reasoning) = &self.reasoning {
            out.extend(chunks(reasoning).map(|text| Ok(ModelEvent::ReasoningDelta { text })));
        }
        if let Some(text) = &self.text {
            out.extend(chunks(text).map(|text| Ok(ModelEvent::TextDelta { text })));
        }
        out.extend(self.tool_calls.iter().map(|call| Ok(ModelEvent::ToolCall { call: call.clone() })));
        if let Some(usage) = self.usage {
            out.push(Ok(ModelEvent::Usage { usage }));
        }
        match &self.error {
            Some(err) => out.push(Err(err.clone())),
            None => {
                let default = if self.tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls };
                out.push(Ok(ModelEvent::Finish { reason: self.finish.clone().unwrap_or(default) }));
            }
        }
        out
    }
}

/// Splits text after each whitespace run, so a reply streams word by word.
fn chunks(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let end = rest[word_end..].find(|c: char| !c.is_whitespace()).map_or(rest.len(), |i| word_end + i);
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head.to_owned())
    })
}

/// How many requests [`ScriptedProvider::requests`] keeps (the newest). The provider also serves
/// offline demos under `bdk serve`, where an unbounded record would grow with every turn.
pub const REQUESTS_KEPT: usize = 256;

/// Deterministic provider: a script of steps, or echo.
#[derive(Debug)]
pub struct ScriptedProvider {
    model: String,
    script: Option<Vec<ScriptStep>>,
    next: AtomicUsize,
    requests: Mutex<VecDeque<ModelRequest>>,
}

impl ScriptedProvider {
    /// Replays `steps`, one per call. A call past the end fails with `model_unavailable`.
    pub fn new(steps: Vec<ScriptStep>) -> Self {
        Self { model: "script".into(), script: Some(steps), next: AtomicUsize::new(0), requests: Mutex::default() }
    }

    /// Answers every call with the last user message, word by word.
    pub fn echo() -> Self {
        Self { model: "echo".into(), script: None, next: AtomicUsize::new(0), requests: Mutex::default() }
    }

    /// Parses a script from JSON (an array of steps, as `[model] params.script` holds it).
    pub fn from_json(script: &Value) -> Result<Self, String> {
        let files: Vec<StepFile> = serde_json::from_value(script.clone()).map_err(|e| format!("script: {e}"))?;
        let steps = files.into_iter().enumerate().map(|(i, f)| f.into_step(i)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(steps))
    }

    /// The requests received so far, oldest first, for tests to inspect: all of them up to
    /// [`REQUESTS_KEPT`], then the newest that many.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().map(|r| r.iter().cloned().collect()).unwrap_or_default()
    }

    fn step_for(&self, request: &ModelRequest) -> ScriptStep {
        let Some(script) = &self.script else {
            return echo_step(request);
        };
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        script.get(n).cloned().unwrap_or_else(|| {
            ScriptStep::error(ModelError::ModelUnavailable {
                message: format!(
                    "the scripted provider's script has {} step(s) and call {} asked for more",
                    script.len(),
                    n + 1
                ),
            })
        })
    }
}

fn echo_step(request: &ModelRequest) -> ScriptStep {
    let last_user = request.messages.iter().rev().find_map(|m| match m {
        Message::User { content } => Some(content.as_str()),
        _ => None,
    });
    let text = last_user.unwrap_or("(no user message)").to_owned();
    let prompt_chars: usize = request.system.as_deref().map_or(0, str::len)
        + request
            .messages
            .iter()
            .map(|m| match m {
                Message::User { content } | Message::Tool { content, .. } => content.len(),
                Message::Assistant { content, .. } => content.len(),
            })
            .sum::<usize>();
    // A rough four characters per token: enough for offline demos of usage and cost.
    let usage = Usage {
        input_tokens: prompt_chars.div_ceil(4) as u64,
        output_tokens: text.len().div_ceil(4) as u64,
        ..Default::default()
    };
    ScriptStep::text(text).with_usage(usage)
}

impl ModelProvider for ScriptedProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo { provider: "scripted".into(), model: self.model.clone(), base_url: None }
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let step = self.step_for(&request);
        if let Ok(mut requests) = self.requests.lock() {
            if requests.len() == REQUESTS_KEPT {
                requests.pop_front();
            }
            requests.push_back(request);
        }
        let items: VecDeque<_> = step.events().into();
        let state = (items, step.delay, cancel, false);
        Box::pin(stream::unfold(state, |(mut items, delay, cancel, done)| async move {
            if done {
                return None;
            }
            if let Some(delay) = delay {
                tokio::select! {
                    () = cancel.cancelled() => return Some((Err(ModelError::Cancelled), (items, None, cancel, true))),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            if cancel.is_cancelled() {
                return Some((Err(ModelError::Cancelled), (items, None, cancel, true)));
            }
            let item = items.pop_front()?;
            let done = item.is_err() || items.is_empty();
            Some((item, (items, delay, cancel, done)))
        }))
    }
}

/// A script step as JSON/TOML writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFile {
    reasoning: Option<String>,
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallFile>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    error: Option<ErrorFile>,
    delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallFile {
    id: Option<String>,
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorFile {
    /// An error code, as [`ModelError::code`] spells it.
    kind: String,
    #[serde(default)]
    message: String,
    retry_after_ms: Option<u64>,
    status: Option<u16>,
}

impl StepFile {
    fn into_step(self, index: usize) -> Result<ScriptStep, String> {
        let tool_calls = self
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{index}_{i}")),
                name: call.name,
                arguments: match call.arguments {
                    None => "{}".into(),
                    Some(Value::String(text)) => text,
                    Some(other) => other.to_string(),
                },
            })
            .collect();
        let error = self.error.map(|e| e.into_error()).transpose().map_err(|e| format!("script step {index}: {e}"))?;
        Ok(ScriptStep {
            reasoning: self.reasoning,
            text: self.text,
            tool_calls,
            usage: self.usage,
            finish: self.finish,
            error,
            delay: self.delay_ms.map(Duration::from_millis),
        })
    }
}

impl ErrorFile {
    fn into_error(self) -> Result<ModelError, String> {
        let message = self.message;
        Ok(match self.kind.as_str() {
            "authentication" => ModelError::Authentication { message },
            "rate_limited" => {
                ModelError::RateLimited { message, retry_after: self.retry_after_ms.map(Duration::from_millis) }
            }
            "context_length_exceeded" => ModelError::ContextLengthExceeded { message },
            "invalid_request" => ModelError::InvalidRequest { status: self.status.unwrap_or(400), message },
            "server" => ModelError::Server { status: self.status.unwrap_or(500), message },
            "network" => ModelError::Network { message },
            "timeout" => ModelError::Timeout { phase: TimeoutPhase::FirstByte, after: Duration::ZERO },
            "malformed_stream" => ModelError::MalformedStream { message },
            "model_unavailable" => ModelError::ModelUnavailable { message },
            "cancelled" => ModelError::Cancelled,
            other => return Err(format!("unknown error kind `{other}`")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_every_character() {
        let parts: Vec<_> = chunks("hello  big\nworld ").collect();
        assert_eq!(parts, ["hello  ", "big\n", "world "]);
        assert_eq!(chunks("").count(), 0);
    }

    #[test]
    fn script_from_json_fills_ids_and_errors() {
        let provider = ScriptedProvider::from_json(&serde_json::json!([
            {"tool_calls": [{"name": "add", "arguments": {"a": 1}}]},
            {"error": {"kind": "rate_limited", "retry_after_ms": 5}}
        ]))
        .unwrap();
        let script = provider.script.as_ref().unwrap();
        assert_eq!(script[0].tool_calls[0].id, "call_0_0");
        assert_eq!(script[0].tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(script[1].error.as_ref().unwrap().retry_after(), Some(Duration::from_millis(5)));
        assert!(ScriptedProvider::from_json(&serde_json::json!([{"error": {"kind": "nope"}}])).is_err());
    }
}
