//! Builds the Anthropic Messages request body from a [`ModelRequest`].
//!
//! Messages alternate user/assistant: tool results travel as `tool_result` blocks of a user
//! message, and consecutive messages of one role are merged into one.

use serde_json::{Map, Value, json};

use crate::types::{Effort, Message, ModelParams, ModelRequest};

/// The output limit when neither the agent nor the request sets one (the API requires it).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// Keys the body builder owns; `params.extra` cannot replace them.
const RESERVED: &[&str] = &["model", "messages", "system", "tools", "stream", "max_tokens", "thinking"];

/// Extended-thinking budget for an effort; `None` turns thinking off.
pub fn thinking_budget(effort: Effort) -> Option<u32> {
    match effort {
        Effort::Minimal => None,
        Effort::Low => Some(2_048),
        Effort::Medium => Some(8_192),
        Effort::High => Some(16_384),
    }
}

pub(crate) fn body(model: &str, request: &ModelRequest, params: &ModelParams) -> Value {
    let mut body = Map::new();
    for (key, value) in &params.extra {
        if !RESERVED.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    let budget = params.effort.and_then(thinking_budget);
    let max_tokens = params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS + budget.unwrap_or(0));
    // The budget must stay below max_tokens and at or above the API's minimum of 1024.
    let budget = budget.map(|b| b.min(max_tokens.saturating_sub(1))).filter(|b| *b >= 1024);
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if let Some(system) = &request.system {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}));
        body.insert("tools".into(), tools.collect());
    }
    body.insert("stream".into(), json!(true));
    match budget {
        Some(budget) => {
            body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
            // The API refuses temperature and top_p changes while thinking.
            if params.temperature.is_some() || params.top_p.is_some() {
                tracing::debug!("temperature/top_p dropped: Anthropic refuses them with extended thinking");
            }
        }
        None => {
            if let Some(temperature) = params.temperature {
                body.insert("temperature".into(), json!(temperature));
            }
            if let Some(top_p) = params.top_p {
                body.insert("top_p".into(), json!(top_p));
            }
        }
    }
    Value::Object(body)
}

fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Tool { call_id, content, is_error } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
            Message::Assistant { content, reasoning, tool_calls } => {
                let mut blocks = Vec::new();
                // A thinking block is only accepted back with the signature it came with.
                if let Some(reasoning) = reasoning
                    && let Some(signature) = &reasoning.signature
                {
                    blocks.push(json!({"type": "thinking", "thinking": reasoning.text, "signature": signature}));
                }
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in tool_calls {
                    let input = match call.arguments_json() {
                        Ok(value @ Value::Object(_)) => value,
                        _ => json!({}),
                    };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Reasoning, ToolCall};

    #[test]
    fn tool_results_join_one_user_message() {
        let request = ModelRequest {
            system: Some("sys".into()),
            messages: vec![
                Message::user("go"),
                Message::Assistant {
                    content: "calling".into(),
                    reasoning: Some(Reasoning { text: "think".into(), signature: Some("sig".into()) }),
                    tool_calls: vec![
                        ToolCall { id: "a".into(), name: "x".into(), arguments: r#"{"q":1}"#.into() },
                        ToolCall { id: "b".into(), name: "y".into(), arguments: "not json".into() },
                    ],
                },
                Message::tool_result("a", "1", false),
                Message::tool_result("b", "failed", true),
            ],
            ..Default::default()
        };
        let body = body("claude-x", &request, &ModelParams::default());
        assert_eq!(body["system"], json!("sys"));
        assert_eq!(body["max_tokens"], json!(DEFAULT_MAX_TOKENS));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][0], json!({"type": "thinking", "thinking": "think", "signature": "sig"}));
        assert_eq!(messages[1]["content"][2]["input"], json!({"q": 1}));
        assert_eq!(messages[1]["content"][3]["input"], json!({}));
        assert_eq!(
            messages[2]["content"][1],
            json!({"type": "tool_result", "tool_use_id": "b", "content": "failed", "is_error": true})
        );
    }

    #[test]
    fn effort_turns_on_thinking_and_drops_temperature() {
        let params = ModelParams { effort: Some(Effort::High), temperature: Some(0.2), ..Default::default() };
        let body = body("claude-x", &ModelRequest::default(), &params);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 16_384}));
        assert_eq!(body["max_tokens"], json!(DEFAULT_MAX_TOKENS + 16_384));
        assert!(body.get("temperature").is_none());
        let small = ModelParams { effort: Some(Effort::High), max_tokens: Some(500), ..Default::default() };
        assert!(super::body("c", &ModelRequest::default(), &small).get("thinking").is_none());
    }
}
