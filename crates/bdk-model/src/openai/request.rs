//! Builds the Chat Completions request body from a [`ModelRequest`].

use serde_json::{Map, Value, json};

use crate::types::{Message, ModelParams, ModelRequest, ToolSpec};

/// Keys the body builder owns; `params.extra` cannot replace them.
const RESERVED: &[&str] = &["model", "messages", "tools", "stream", "stream_options"];

/// Which field carries the output token limit: OpenAI's reasoning models refuse `max_tokens`,
/// while older local servers know only it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxCompletionTokens,
    MaxTokens,
}

pub(crate) fn body(model: &str, request: &ModelRequest, params: &ModelParams, max_field: MaxTokensField) -> Value {
    let mut body = Map::new();
    for (key, value) in &params.extra {
        if !RESERVED.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if let Some(effort) = params.effort {
        body.insert("reasoning_effort".into(), json!(effort.as_str()));
    }
    if let Some(max) = params.max_tokens {
        let key = match max_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        body.insert(key.into(), json!(max));
    }
    if let Some(temperature) = params.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = params.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    Value::Object(body)
}

fn messages(request: &ModelRequest) -> Vec<Value> {
    let system = request.system.iter().map(|system| json!({"role": "system", "content": system}));
    let rest = request.messages.iter().map(|message| match message {
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant { content, tool_calls, .. } => {
            // Reasoning is not sent back: servers that emit `reasoning_content` reject it in input.
            let mut out = json!({"role": "assistant"});
            out["content"] = if content.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(content) };
            if !tool_calls.is_empty() {
                out["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
            }
            out
        }
        // Chat Completions has no error flag for tool results; the content says what went wrong.
        Message::Tool { call_id, content, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    });
    system.chain(rest).collect()
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.input_schema},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Effort, ToolCall};

    #[test]
    fn body_has_every_part() {
        let request = ModelRequest {
            system: Some("be brief".into()),
            messages: vec![
                Message::user("add 1 and 2"),
                Message::Assistant {
                    content: String::new(),
                    reasoning: None,
                    tool_calls: vec![ToolCall { id: "c1".into(), name: "add".into(), arguments: r#"{"a":1}"#.into() }],
                },
                Message::tool_result("c1", "3", false),
            ],
            tools: vec![ToolSpec {
                name: "add".into(),
                description: "adds".into(),
                input_schema: json!({"type": "object"}),
            }],
            params: ModelParams::default(),
        };
        let mut params = ModelParams { effort: Some(Effort::High), max_tokens: Some(100), ..Default::default() };
        params.extra.insert("stream".into(), json!(false));
        params.extra.insert("seed".into(), json!(7));
        let body = body("m", &request, &params, MaxTokensField::MaxCompletionTokens);
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["seed"], json!(7));
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(body["max_completion_tokens"], json!(100));
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], json!(r#"{"a":1}"#));
        assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "3"}));
        assert_eq!(body["tools"][0]["function"]["parameters"], json!({"type": "object"}));
        assert!(body.get("temperature").is_none());
    }
}
