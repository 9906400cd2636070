//! Decodes Anthropic Messages stream events (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`) into [`ModelEvent`]s.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use crate::error::ModelError;
use crate::http::errors;
use crate::http::sse::SseEvent;
use crate::http::stream::{Decoder, delta_text};
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
        if let Ok(text) = serde_json::from_str::<TextEvent<'_>>(&event.data)
            && let Some(delta) = text.delta()
        {
            out.extend(delta);
            return Ok(());
        }
        self.value_event(event, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        self.end_message(out)
    }
}

/// The event almost every event of a stream is, a text or thinking delta, read without
/// building a `Value` tree (strings borrowed from the event unless escaped). An event of any
/// other kind or shape fails this parse or is passed over, and is read as a `Value`
/// ([`MessagesDecoder::value_event`]); what this one accepts, both read the same way.
#[derive(Deserialize)]
struct TextEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    delta: TextDelta<'a>,
}

#[derive(Deserialize)]
struct TextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
}

impl TextEvent<'_> {
    /// What a text or thinking delta adds (nothing when its text is empty); `None` for any
    /// other event.
    fn delta(self) -> Option<Option<ModelEvent>> {
        if self.kind != "content_block_delta" {
            return None;
        }
        match &*self.delta.kind {
            "text_delta" => Some(delta_text(self.delta.text).map(|text| ModelEvent::TextDelta { text })),
            "thinking_delta" => Some(delta_text(self.delta.thinking).map(|text| ModelEvent::ReasoningDelta { text })),
            _ => None,
        }
    }
}

impl MessagesDecoder {
    /// Any event, read as a `Value`.
    fn value_event(&mut self, event: SseEvent, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
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

    fn end_message(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What one event makes of a decoder with a text and a tool block open: its events, or its
    /// error.
    fn one(
        data: &str,
        read: fn(&mut MessagesDecoder, SseEvent, &mut VecDeque<ModelEvent>) -> Result<(), ModelError>,
    ) -> String {
        let mut decoder = MessagesDecoder::default();
        let mut out = VecDeque::new();
        for start in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}"#,
        ] {
            decoder.value_event(SseEvent { event: None, data: start.to_owned() }, &mut out).unwrap();
        }
        let event = SseEvent { event: Some("content_block_delta".into()), data: data.to_owned() };
        match read(&mut decoder, event, &mut out) {
            Ok(()) => {
                let blocks: std::collections::BTreeMap<_, _> = decoder.blocks.iter().collect();
                format!("{out:?} {blocks:?} {:?}", decoder.stop)
            }
            Err(error) => format!("error {}", error.code()),
        }
    }

    /// Every event reads the same through the typed delta path (when it takes the event) as
    /// through the `Value` tree, odd shapes included.
    #[test]
    fn the_text_path_reads_what_the_value_path_reads() {
        let events = [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"esc\" \u00e9\n"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            r#"{"type":"content_block_delta","index":"x","delta":{"type":"text_delta","text":"i"}}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"no index"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"new_delta","text":"t"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":null}"#,
            r#"{"index":0,"delta":{"type":"text_delta","text":"named by the event"}}"#,
            r#"{"type":"message_delta","delta":{"type":"text_delta","text":"t","stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}"#,
        ];
        let mut taken = 0;
        for data in events {
            assert_eq!(one(data, MessagesDecoder::event), one(data, MessagesDecoder::value_event), "{data}");
            taken += usize::from(serde_json::from_str::<TextEvent<'_>>(data).is_ok_and(|e| e.delta().is_some()));
        }
        // The typed path took the text and thinking deltas, not only the fallback.
        assert_eq!(taken, 7);
    }
}
