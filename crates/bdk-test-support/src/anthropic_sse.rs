//! Builders for Anthropic Messages stream events.

use serde_json::{Value, json};

use crate::fake_server::Part;

pub fn event(name: &str, data: Value) -> Part {
    Part::Bytes(format!("event: {name}\ndata: {data}\n\n").into_bytes())
}

pub fn message_start(input: u64, cache_read: u64, cache_write: u64) -> Part {
    event(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
            "stop_reason": null,
            "usage": {"input_tokens": input, "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_write, "output_tokens": 1},
        }}),
    )
}

fn block_start(index: u64, block: Value) -> Part {
    event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn block_delta(index: u64, delta: Value) -> Part {
    event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

pub fn text_start(index: u64) -> Part {
    block_start(index, json!({"type": "text", "text": ""}))
}

pub fn text(index: u64, text: &str) -> Part {
    block_delta(index, json!({"type": "text_delta", "text": text}))
}

pub fn thinking_start(index: u64) -> Part {
    block_start(index, json!({"type": "thinking", "thinking": ""}))
}

pub fn thinking(index: u64, text: &str) -> Part {
    block_delta(index, json!({"type": "thinking_delta", "thinking": text}))
}

pub fn signature(index: u64, signature: &str) -> Part {
    block_delta(index, json!({"type": "signature_delta", "signature": signature}))
}

pub fn tool_use_start(index: u64, id: &str, name: &str) -> Part {
    block_start(index, json!({"type": "tool_use", "id": id, "name": name, "input": {}}))
}

pub fn input_json(index: u64, partial: &str) -> Part {
    block_delta(index, json!({"type": "input_json_delta", "partial_json": partial}))
}

pub fn block_stop(index: u64) -> Part {
    event("content_block_stop", json!({"type": "content_block_stop", "index": index}))
}

pub fn message_delta(stop_reason: &str, output: u64) -> Part {
    event(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output}}),
    )
}

pub fn message_stop() -> Part {
    event("message_stop", json!({"type": "message_stop"}))
}

pub fn ping() -> Part {
    event("ping", json!({"type": "ping"}))
}

pub fn error(kind: &str, message: &str) -> Part {
    event("error", json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// A long text reply for benchmarks: `tokens` text deltas of one short word each (`"t<n> "`,
/// three bytes) in one text block, with `per_chunk` SSE events sent per HTTP chunk.
pub fn long_text_reply(tokens: usize, per_chunk: usize) -> Vec<Part> {
    let mut parts = vec![message_start(10, 0, 0), text_start(0)];
    parts.extend((0..tokens).map(|i| text(0, &format!("t{} ", i % 10))));
    parts.extend([block_stop(0), message_delta("end_turn", tokens as u64), message_stop()]);
    let events: Vec<Vec<u8>> =
        parts.into_iter().filter_map(|part| if let Part::Bytes(bytes) = part { Some(bytes) } else { None }).collect();
    events.chunks(per_chunk.max(1)).map(|group| Part::Bytes(group.concat())).collect()
}
