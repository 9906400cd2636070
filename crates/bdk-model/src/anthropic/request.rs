//! Builds the Anthropic Messages request body from a [`ModelRequest`].
//!
//! Messages alternate user/assistant: tool results travel as `tool_result` blocks of a user
//! message, and consecutive messages of one role are merged into one.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::http::body::{Object, ToolArray};
use crate::messages::{Messages, WireFormat};
use crate::types::{Effort, Message, ModelParams, ModelRequest, ToolSpec};

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

/// The body: serialize it (`reqwest`'s `json`, `serde_json::to_vec`).
/// `encoded`: the request's tools array as [`tools`] writes it, when the caller keeps it.
pub(crate) fn body<'a>(
    model: &'a str,
    request: &'a ModelRequest,
    params: &'a ModelParams,
    encoded: Option<&'a RawValue>,
) -> Object<'a, Field<'a>> {
    let budget = params.effort.and_then(thinking_budget);
    let max_tokens = params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS + budget.unwrap_or(0));
    // The budget must stay below max_tokens and at or above the API's minimum of 1024.
    let budget = budget.map(|b| b.min(max_tokens.saturating_sub(1))).filter(|b| *b >= 1024);
    let mut fields = Vec::with_capacity(9);
    fields.push(("model", Field::Str(model)));
    fields.push(("max_tokens", Field::U32(max_tokens)));
    if let Some(system) = &request.system {
        fields.push(("system", Field::Str(system)));
    }
    fields.push(("messages", Field::Messages(messages(&request.messages))));
    match encoded {
        Some(tools) => fields.push(("tools", Field::Encoded(tools))),
        None if !request.tools.is_empty() => fields.push(("tools", Field::Tools(&request.tools))),
        None => {}
    }
    fields.push(("stream", Field::True));
    match budget {
        Some(budget) => {
            fields.push(("thinking", Field::Thinking(budget)));
            // The API refuses temperature and top_p changes while thinking.
            if params.temperature.is_some() || params.top_p.is_some() {
                tracing::debug!("temperature/top_p dropped: Anthropic refuses them with extended thinking");
            }
        }
        None => {
            if let Some(temperature) = params.temperature {
                fields.push(("temperature", Field::F64(temperature)));
            }
            if let Some(top_p) = params.top_p {
                fields.push(("top_p", Field::F64(top_p)));
            }
        }
    }
    Object { extra: &params.extra, reserved: RESERVED, fields }
}

/// One of the body's own top-level values.
pub(crate) enum Field<'a> {
    Str(&'a str),
    U32(u32),
    /// A non-finite number is written as `null`, as `json!` did.
    F64(f64),
    True,
    /// `{"type": "enabled", "budget_tokens": …}`
    Thinking(u32),
    /// Messages of alternating roles, each with its content blocks.
    Messages(Vec<(&'static str, Vec<Part<'a>>)>),
    Tools(&'a [ToolSpec]),
    /// The tools array, already encoded by [`tools`].
    Encoded(&'a RawValue),
}

/// The `tools` array of `specs`, encoded (see [`crate::http::body::EncodedTools`]).
pub(crate) fn tools(specs: &[ToolSpec]) -> serde_json::Result<Box<RawValue>> {
    serde_json::value::to_raw_value(&ToolArray(specs, tool))
}

fn tool(spec: &ToolSpec) -> Tool<'_> {
    Tool { name: &spec.name, description: &spec.description, input_schema: &spec.input_schema }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(text) => serializer.serialize_str(text),
            Field::U32(n) => serializer.serialize_u32(*n),
            Field::F64(x) => serializer.serialize_f64(*x),
            Field::True => serializer.serialize_bool(true),
            Field::Thinking(budget) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "enabled")?;
                map.serialize_entry("budget_tokens", budget)?;
                map.end()
            }
            Field::Messages(messages) => serializer
                .collect_seq(messages.iter().map(|(role, content)| WireMessage { role, content: content.as_slice() })),
            Field::Tools(specs) => ToolArray(specs, tool).serialize(serializer),
            Field::Encoded(tools) => tools.serialize(serializer),
        }
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a [Part<'a>],
}

/// One content block: encoded now, or kept from an earlier request (see
/// [`crate::Messages::encoded`]).
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum Part<'a> {
    Block(Block<'a>),
    Kept(&'a RawValue),
}

/// A message's content blocks, each kept with it.
static WIRE: WireFormat = WireFormat { name: "anthropic-messages", encode: encode_blocks };

fn encode_blocks(message: &Message) -> Option<Vec<Box<RawValue>>> {
    blocks(message).iter().map(|block| serde_json::value::to_raw_value(block).ok()).collect()
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// One content block of a message.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        /// The call's arguments as an object (`{}` when they are not one).
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// The conversation as alternating messages, each with its content blocks.
fn messages(messages: &Messages) -> Vec<(&'static str, Vec<Part<'_>>)> {
    let mut out: Vec<(&'static str, Vec<Part<'_>>)> = Vec::new();
    for (message, kept) in messages.encoded(&WIRE) {
        let role = role(message);
        let blocks: Vec<Part<'_>> = match kept {
            Some(parts) => parts.iter().map(|part| Part::Kept(part)).collect(),
            None => blocks(message).into_iter().map(Part::Block).collect(),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out
}

/// The role a message is sent under: tool results go back as the user's.
fn role(message: &Message) -> &'static str {
    match message {
        Message::User { .. } | Message::Tool { .. } => "user",
        Message::Assistant { .. } => "assistant",
    }
}

/// A message's content blocks (its role is [`role`]).
fn blocks(message: &Message) -> Vec<Block<'_>> {
    match message {
        Message::User { content } => vec![Block::Text { text: content }],
        Message::Tool { call_id, content, is_error } => {
            vec![Block::ToolResult { tool_use_id: call_id, content, is_error: *is_error }]
        }
        Message::Assistant { content, reasoning, tool_calls } => {
            let mut blocks = Vec::new();
            // A thinking block is only accepted back with the signature it came with.
            if let Some(reasoning) = reasoning
                && let Some(signature) = &reasoning.signature
            {
                blocks.push(Block::Thinking { thinking: &reasoning.text, signature });
            }
            if !content.is_empty() {
                blocks.push(Block::Text { text: content });
            }
            for call in tool_calls {
                let input = match call.arguments_json() {
                    Ok(value @ Value::Object(_)) => value,
                    _ => Value::Object(Map::new()),
                };
                blocks.push(Block::ToolUse { id: &call.id, name: &call.name, input });
            }
            blocks
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{Reasoning, ToolCall};

    fn to_value(body: Object<'_, Field<'_>>) -> Value {
        serde_json::to_value(body).unwrap()
    }

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
            ]
            .into(),
            ..Default::default()
        };
        let body = to_value(body("claude-x", &request, &ModelParams::default(), None));
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
        let body = to_value(body("claude-x", &ModelRequest::default(), &params, None));
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 16_384}));
        assert_eq!(body["max_tokens"], json!(DEFAULT_MAX_TOKENS + 16_384));
        assert!(body.get("temperature").is_none());
        let small = ModelParams { effort: Some(Effort::High), max_tokens: Some(500), ..Default::default() };
        assert!(to_value(super::body("c", &ModelRequest::default(), &small, None)).get("thinking").is_none());
    }

    /// The body as it was built before it was serialized straight from the request: a `Value`
    /// tree. The wire bytes must not change.
    fn value_body(model: &str, request: &ModelRequest, params: &ModelParams) -> Value {
        let mut body = Map::new();
        for (key, value) in &params.extra {
            if !RESERVED.contains(&key.as_str()) {
                body.insert(key.clone(), value.clone());
            }
        }
        let budget = params.effort.and_then(thinking_budget);
        let max_tokens = params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS + budget.unwrap_or(0));
        let budget = budget.map(|b| b.min(max_tokens.saturating_sub(1))).filter(|b| *b >= 1024);
        body.insert("model".into(), json!(model));
        body.insert("max_tokens".into(), json!(max_tokens));
        if let Some(system) = &request.system {
            body.insert("system".into(), json!(&**system));
        }
        let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for message in &request.messages {
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
        let messages = out.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
        body.insert("messages".into(), Value::Array(messages));
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

    /// The bytes of the tools array, pinned: key order (ours, then the schema's own) and
    /// compact spacing are what the API and its prompt cache see.
    #[test]
    fn tools_array_bytes_are_pinned() {
        let request = ModelRequest {
            tools: vec![crate::types::ToolSpec {
                name: "search".into(),
                description: "Finds \"things\" — fast".into(),
                input_schema: json!({"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}}),
            }]
            .into(),
            ..Default::default()
        };
        let encoded = tools(&request.tools).unwrap();
        let [bytes, from_encoded] = [None, Some(&*encoded)]
            .map(|encoded| serde_json::to_string(&body("c", &request, &ModelParams::default(), encoded)).unwrap());
        assert_eq!(from_encoded, bytes);
        let tools = r#""tools":[{"name":"search","description":"Finds \"things\" — fast","input_schema":{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}}]"#;
        assert_eq!(bytes, format!(r#"{{"model":"c","max_tokens":8192,"messages":[],{tools},"stream":true}}"#));
    }

    #[test]
    fn bytes_match_the_value_tree_they_replaced() {
        let call =
            |id: &str, arguments: &str| ToolCall { id: id.into(), name: "x".into(), arguments: arguments.into() };
        let messages = vec![
            Message::user("héllo \"there\"\n"),
            Message::user("again"),
            Message::assistant(""),
            Message::Assistant {
                content: "calling".into(),
                reasoning: Some(Reasoning { text: "think".into(), signature: Some("sig".into()) }),
                tool_calls: vec![call("a", r#"{"z": 1, "a": [true, null]}"#), call("b", "not json"), call("c", "[1]")],
            },
            Message::Assistant {
                content: String::new(),
                reasoning: Some(Reasoning { text: "unsigned".into(), signature: None }),
                tool_calls: Vec::new(),
            },
            Message::tool_result("a", "1", false),
            Message::tool_result("b", "failed", true),
            Message::assistant("done"),
        ];
        let mut overlapping = ModelParams {
            effort: Some(Effort::Medium),
            temperature: Some(0.25),
            top_p: Some(f64::INFINITY),
            ..Default::default()
        };
        for (key, value) in [
            ("top_p", json!(1)),
            ("stream", json!(false)),
            ("max_tokens", json!(3)),
            ("temperature", json!(1)),
            ("metadata", json!({"user_id": "u"})),
        ] {
            overlapping.extra.insert(key.into(), value);
        }
        let no_thinking = ModelParams { effort: None, temperature: Some(0.5), top_p: Some(0.9), ..overlapping.clone() };
        let small = ModelParams { effort: Some(Effort::High), max_tokens: Some(500), ..Default::default() };
        let tool = crate::types::ToolSpec {
            name: "x".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        };
        let requests = [
            ModelRequest::default(),
            ModelRequest { system: Some("".into()), messages: messages.clone().into(), ..Default::default() },
            ModelRequest {
                system: Some("sys".into()),
                messages: messages.into(),
                tools: vec![tool.clone(), tool].into(),
                params: ModelParams::default(),
            },
        ];
        for request in &requests {
            for params in [&ModelParams::default(), &overlapping, &no_thinking, &small] {
                let tree = serde_json::to_string(&value_body("claude-x", request, params)).unwrap();
                let encoded = tools(&request.tools).unwrap();
                let encoded = Some(&*encoded).filter(|_| !request.tools.is_empty());
                for encoded in [None, encoded] {
                    let typed = serde_json::to_string(&body("claude-x", request, params, encoded)).unwrap();
                    assert_eq!(typed, tree);
                }
            }
        }
    }
}
