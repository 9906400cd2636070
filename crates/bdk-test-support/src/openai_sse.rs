//! Builders for Chat Completions stream chunks, as OpenAI-compatible servers send them.

use serde_json::{Value, json};

use crate::fake_server::Part;

pub fn data(chunk: Value) -> Part {
    Part::Bytes(format!("data: {chunk}\n\n").into_bytes())
}

fn delta(delta: Value) -> Part {
    data(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
    )
}

/// The first chunk real servers send: the role, no content.
pub fn role() -> Part {
    delta(json!({"role": "assistant", "content": ""}))
}

pub fn text(text: &str) -> Part {
    delta(json!({"content": text}))
}

/// vLLM, DeepSeek, xAI.
pub fn reasoning_content(text: &str) -> Part {
    delta(json!({"reasoning_content": text}))
}

/// OpenRouter, Ollama.
pub fn reasoning(text: &str) -> Part {
    delta(json!({"reasoning": text}))
}

/// One tool-call fragment; the first for an index carries id and name.
pub fn tool_call(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Part {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    delta(json!({"tool_calls": [call]}))
}

pub fn finish(reason: &str) -> Part {
    data(json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

/// The usage-only final chunk `stream_options.include_usage` asks for.
pub fn usage(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Part {
    data(json!({"id": "chatcmpl-1", "choices": [], "usage": {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }}))
}

pub fn done() -> Part {
    Part::Bytes(b"data: [DONE]\n\n".to_vec())
}

/// A whole text answer as real servers stream it: the role, `text` in one delta, the finish,
/// the usage chunk (`prompt` and `completion` tokens) and `[DONE]`.
pub fn text_reply(text: &str, prompt: u64, completion: u64) -> Vec<Part> {
    vec![role(), self::text(text), finish("stop"), usage(prompt, completion, 0, 0), done()]
}

/// A long text reply for benchmarks: `tokens` content chunks of one short word each (`"t<n> "`,
/// three bytes), then the finish, the usage chunk and `[DONE]`, with `per_chunk` SSE events
/// sent per HTTP chunk (roughly what a fast server's writes coalesce to).
pub fn long_text_reply(tokens: usize, per_chunk: usize) -> Vec<Part> {
    let mut events: Vec<Vec<u8>> = Vec::with_capacity(tokens + 3);
    for i in 0..tokens {
        let chunk =
            json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": format!("t{} ", i % 10)}}]});
        events.push(format!("data: {chunk}\n\n").into_bytes());
    }
    for part in [finish("stop"), usage(10, tokens as u64, 0, 0), done()] {
        if let Part::Bytes(bytes) = part {
            events.push(bytes);
        }
    }
    events.chunks(per_chunk.max(1)).map(|group| Part::Bytes(group.concat())).collect()
}
