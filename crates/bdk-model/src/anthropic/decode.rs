//! Decodes Anthropic Messages stream events (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`) into [`ModelEvent`]s.

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use crate::error::ModelError;
use crate::http::errors;
use crate::http::sse::SseEvent;
use crate::http::stream::Decoder;
use crate::types::{FinishReason, ModelEvent, ToolCall, Usage};

/// A content block still streaming.
#[derive(Debug)]
enum Block {
    ToolUse { id: String, name: String, json: String, input: Option<Value> },
    Other,
}

#[derive(Debug, Default)]
pub(crate) struct MessagesDecoder {
    blocks: HashMap<u64, Block>,
    emitted_calls: bool,
    /// Anthropic counts cache reads and writes apart from `input_tokens`.
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    stop: Option<FinishReason>,
    done: bool,
}

impl Decoder for MessagesDecoder {
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|e| ModelError::MalformedStream {
            message: format!("an event is not JSON ({e}): {}", event.data.chars().take(200).collect::<String>()),
        })?;
        let kind = data.get("type").and_then(Value::as_str).or(event.event.as_deref()).unwrap_or_default();
        match kind {
            "message_start" => self.usage(data.pointer("/message/usage")),
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out)?,
            "content_block_stop" => self.block_stop(&data, out),
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                self.usage(data.get("usage"));
            }
            "message_stop" => self.done = true,
            "error" => return Err(errors::from_stream_payload(&data)),
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let reason = match self.stop.take() {
            Some(reason) => reason,
            None if self.done && self.emitted_calls => FinishReason::ToolCalls,
            None if self.done => FinishReason::Stop,
            None => {
                return Err(ModelError::MalformedStream {
                    message: "the stream ended before the message did (no stop_reason, no message_stop)".into(),
                });
            }
        };
        let usage = Usage {
            input_tokens: self.input + self.cache_read + self.cache_write,
            output_tokens: self.output,
            cached_input_tokens: self.cache_read,
            cache_write_tokens: self.cache_write,
            reasoning_tokens: None,
        };
        out.push_back(ModelEvent::Usage { usage });
        out.push_back(ModelEvent::Finish { reason });
        Ok(())
    }
}

impl MessagesDecoder {
    /// `message_start` carries the input counts; `message_delta` the running output count (and,
    /// in newer API versions, input counts again). Later values replace earlier ones.
    fn usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(n) = count("input_tokens") {
            self.input = n;
        }
        if let Some(n) = count("cache_read_input_tokens") {
            self.cache_read = n;
        }
        if let Some(n) = count("cache_creation_input_tokens") {
            self.cache_write = n;
        }
        if let Some(n) = count("output_tokens") {
            self.output = n;
        }
    }

    fn block_start(&mut self, data: &Value, out: &mut VecDeque<ModelEvent>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let text = |key: &str| block.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
        let state = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = text("text") {
                    out.push_back(ModelEvent::TextDelta { text });
                }
                Block::Other
            }
            Some("thinking") => {
                if let Some(text) = text("thinking") {
                    out.push_back(ModelEvent::ReasoningDelta { text });
                }
                Block::Other
            }
            Some("tool_use") => Block::ToolUse {
                id: text("id").unwrap_or_else(|| format!("toolu_{index}")),
                name: text("name").unwrap_or_default(),
                json: String::new(),
                input: block.get("input").filter(|v| v.as_object().is_some_and(|o| !o.is_empty())).cloned(),
            },
            // `redacted_thinking`, server tools and anything newer: nothing to stream.
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
    }

    fn block_delta(&mut self, data: &Value, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let field = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match delta.get("type").and_then(Value::as_str).unwrap_or_default() {
            "text_delta" if !field("text").is_empty() => {
                out.push_back(ModelEvent::TextDelta { text: field("text").to_owned() });
            }
            "thinking_delta" if !field("thinking").is_empty() => {
                out.push_back(ModelEvent::ReasoningDelta { text: field("thinking").to_owned() });
            }
            "signature_delta" if !field("signature").is_empty() => {
                out.push_back(ModelEvent::ReasoningSignature { signature: field("signature").to_owned() });
            }
            "input_json_delta" => match self.blocks.get_mut(&index) {
                Some(Block::ToolUse { json, .. }) => json.push_str(field("partial_json")),
                _ => {
                    return Err(ModelError::MalformedStream {
                        message: format!("input_json_delta for block {index}, which is not a tool_use block"),
                    });
                }
            },
            _ => {}
        }
        Ok(())
    }

    fn block_stop(&mut self, data: &Value, out: &mut VecDeque<ModelEvent>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        if let Some(Block::ToolUse { id, name, json, input }) = self.blocks.remove(&index) {
            let arguments = match (json.trim().is_empty(), input) {
                (false, _) => json,
                (true, Some(input)) => input.to_string(),
                (true, None) => "{}".to_owned(),
            };
            out.push_back(ModelEvent::ToolCall { call: ToolCall { id, name, arguments } });
            self.emitted_calls = true;
        }
    }
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}
