//! Decodes Chat Completions stream chunks into [`ModelEvent`]s, assembling tool calls from
//! index-keyed argument fragments.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde::de::IgnoredAny;

use serde_json::Value;

use crate::error::ModelError;
use crate::http::errors;
use crate::http::sse::SseEvent;
use crate::http::stream::{Decoder, delta_text};
use crate::types::{FinishReason, ModelEvent, ToolCall, Usage};

/// A tool call still receiving fragments.
#[derive(Debug, Default)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Default)]
pub(crate) struct ChatDecoder {
    calls: Vec<PartialCall>,
    emitted_calls: bool,
    finish: Option<FinishReason>,
    done: bool,
}

impl Decoder for ChatDecoder {
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        if let Ok(chunk) = serde_json::from_str::<TextChunk<'_>>(data)
            && chunk.is_text()
        {
            return self.text_chunk(chunk, out);
        }
        self.value_chunk(data, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        self.flush_calls(out)?;
        let reason = match self.finish.take() {
            // Some local servers say `stop` after tool calls; the calls decide.
            Some(FinishReason::Stop) if self.emitted_calls => FinishReason::ToolCalls,
            Some(reason) => reason,
            None if self.done && self.emitted_calls => FinishReason::ToolCalls,
            None if self.done => FinishReason::Stop,
            None => {
                return Err(ModelError::MalformedStream {
                    message: "the stream ended before the model finished (no finish_reason, no [DONE])".into(),
                });
            }
        };
        out.push_back(ModelEvent::Finish { reason });
        Ok(())
    }
}

impl ChatDecoder {
    /// Any chunk, read as a `Value`.
    fn value_chunk(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let chunk: Value = serde_json::from_str(data).map_err(|e| ModelError::MalformedStream {
            message: format!("a chunk is not JSON ({e}): {}", data.chars().take(200).collect::<String>()),
        })?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(errors::from_stream_payload(&chunk));
        }
        // Only the first choice: BDK never asks for more than one.
        if let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, out)?;
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.flush_calls(out)?;
                self.finish = Some(finish_reason(reason));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push_back(ModelEvent::Usage { usage: parse_usage(usage) });
        }
        Ok(())
    }
}

/// The chunk almost every event of a stream is: text or reasoning deltas and a finish reason,
/// read without building a `Value` tree (strings borrowed from the event unless escaped). A
/// chunk of any other shape (tool calls, usage, an error, an unexpected type anywhere) fails
/// this parse or is passed over, and is read as a `Value` ([`ChatDecoder::event`]); what this
/// one accepts, both read the same way.
#[derive(Deserialize)]
struct TextChunk<'a> {
    #[serde(borrow)]
    choices: Vec<TextChoice<'a>>,
    error: Option<IgnoredAny>,
    usage: Option<IgnoredAny>,
}

impl TextChunk<'_> {
    /// No error, no usage, and no tool calls in the choice that is read.
    fn is_text(&self) -> bool {
        let calls = self.choices.first().and_then(|c| c.delta.as_ref()).is_some_and(|d| d.tool_calls.is_some());
        self.error.is_none() && self.usage.is_none() && !calls
    }
}

#[derive(Deserialize)]
struct TextChoice<'a> {
    #[serde(borrow)]
    delta: Option<TextDelta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct TextDelta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<Cow<'a, str>>,
    tool_calls: Option<IgnoredAny>,
}

impl ChatDecoder {
    /// A [`TextChunk`]: the same as [`ChatDecoder::delta`] and the finish of `event` for it.
    fn text_chunk(&mut self, chunk: TextChunk<'_>, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let Some(choice) = chunk.choices.into_iter().next() else { return Ok(()) };
        if let Some(delta) = choice.delta {
            if let Some(reasoning) = delta_text(delta.reasoning_content).or_else(|| delta_text(delta.reasoning)) {
                out.push_back(ModelEvent::ReasoningDelta { text: reasoning });
            }
            if let Some(content) = delta_text(delta.content) {
                out.push_back(ModelEvent::TextDelta { text: content });
            }
        }
        if let Some(reason) = choice.finish_reason {
            self.flush_calls(out)?;
            self.finish = Some(finish_reason(&reason));
        }
        Ok(())
    }

    fn delta(&mut self, delta: &Value, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let text = |key: &str| delta.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
        // vLLM, DeepSeek and xAI say `reasoning_content`; OpenRouter and Ollama say `reasoning`.
        if let Some(reasoning) = text("reasoning_content").or_else(|| text("reasoning")) {
            out.push_back(ModelEvent::ReasoningDelta { text: reasoning.to_owned() });
        }
        if let Some(content) = text("content") {
            out.push_back(ModelEvent::TextDelta { text: content.to_owned() });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for fragment in calls {
                self.fragment(fragment)?;
            }
        }
        Ok(())
    }

    fn fragment(&mut self, fragment: &Value) -> Result<(), ModelError> {
        let id = fragment.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // No index (some local servers): a new id starts a call, otherwise continue the last.
            None => match (self.calls.last(), id) {
                (Some(last), Some(id)) if last.id != id => last.index + 1,
                (Some(last), _) => last.index,
                (None, _) => 0,
            },
        };
        let call = match self.calls.iter().position(|c| c.index == index) {
            Some(pos) => &mut self.calls[pos],
            None => {
                self.calls.push(PartialCall { index, ..Default::default() });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        let function = fragment.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(part)) => call.arguments.push_str(part),
            // A few servers send the arguments as an object, whole.
            Some(value @ Value::Object(_)) => call.arguments = value.to_string(),
            _ => {}
        }
        Ok(())
    }

    fn flush_calls(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        self.calls.sort_by_key(|c| c.index);
        for call in self.calls.drain(..) {
            if call.name.is_empty() {
                return Err(ModelError::MalformedStream { message: format!("tool call {} has no name", call.index) });
            }
            let id = if call.id.is_empty() { format!("call_{}", call.index) } else { call.id };
            let arguments = if call.arguments.trim().is_empty() { "{}".to_owned() } else { call.arguments };
            out.push_back(ModelEvent::ToolCall { call: ToolCall { id, name: call.name, arguments } });
            self.emitted_calls = true;
        }
        Ok(())
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let count = |path: &str| usage.pointer(path).and_then(Value::as_u64);
    Usage {
        input_tokens: count("/prompt_tokens").unwrap_or(0),
        output_tokens: count("/completion_tokens").unwrap_or(0),
        cached_input_tokens: count("/prompt_tokens_details/cached_tokens").unwrap_or(0),
        cache_write_tokens: 0,
        reasoning_tokens: count("/completion_tokens_details/reasoning_tokens"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&str]) -> Result<Vec<ModelEvent>, ModelError> {
        let mut decoder = ChatDecoder::default();
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.event(SseEvent { event: None, data: (*chunk).to_owned() }, &mut out)?;
        }
        decoder.end(&mut out)?;
        Ok(out.into())
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let events = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"q\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0],
            ModelEvent::ToolCall {
                call: ToolCall { id: "a".into(), name: "x".into(), arguments: r#"{"q":1}"#.into() }
            }
        );
        assert_eq!(
            events[1],
            ModelEvent::ToolCall { call: ToolCall { id: "b".into(), name: "y".into(), arguments: "{}".into() } }
        );
        assert_eq!(events[2], ModelEvent::Finish { reason: FinishReason::ToolCalls });
    }

    #[test]
    fn ending_without_finish_or_done_is_malformed() {
        let err = decode(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]).unwrap_err();
        assert_eq!(err.code(), "malformed_stream");
        let events = decode(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#, "[DONE]"]).unwrap();
        assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    }

    /// What one chunk makes of a decoder that has a call under way: its events, or its error.
    fn one(
        chunk: &str,
        read: fn(&mut ChatDecoder, &str, &mut VecDeque<ModelEvent>) -> Result<(), ModelError>,
    ) -> String {
        let mut decoder = ChatDecoder::default();
        let mut out = VecDeque::new();
        let call = r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"x"}}]}}]}"#;
        decoder.value_chunk(call, &mut out).unwrap();
        match read(&mut decoder, chunk, &mut out) {
            Ok(()) => format!("{:?} {:?}", out, decoder.finish),
            Err(error) => format!("error {}", error.code()),
        }
    }

    /// Every chunk reads the same through the typed text path (when it takes the chunk) as
    /// through the `Value` tree, odd shapes included.
    #[test]
    fn the_text_path_reads_what_the_value_path_reads() {
        let chunks = [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"content":"esc \"aped\" \u00e9\n"}}]}"#,
            r#"{"choices":[{"delta":{"content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":null,"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"","reasoning":"why"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"a","reasoning":"b","content":"c"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":""}]}"#,
            r#"{"choices":[{"delta":null,"finish_reason":"length"}]}"#,
            r#"{"choices":[{"finish_reason":"weird"}]}"#,
            r#"{"choices":[{"delta":{"content":7}}]}"#,
            r#"{"choices":[{"delta":"text"}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":7}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null,"content":"t"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            r#"{"choices":[{"delta":{"content":"u"}}],"usage":null,"error":null}"#,
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
            r#"{"choices":{"delta":{"content":"x"}}}"#,
            r#"{"nothing":true}"#,
            r#"[1,2]"#,
            r#"{"choices":[{"delta":{"content":"x"}}"#,
        ];
        let mut taken = 0;
        for chunk in chunks {
            let typed =
                one(chunk, |decoder, data, out| decoder.event(SseEvent { event: None, data: data.to_owned() }, out));
            assert_eq!(typed, one(chunk, ChatDecoder::value_chunk), "{chunk}");
            taken += usize::from(serde_json::from_str::<TextChunk<'_>>(chunk).is_ok_and(|c| c.is_text()));
        }
        // The typed path took the text chunks, not only the fallback.
        assert_eq!(taken, 13);
    }
}
