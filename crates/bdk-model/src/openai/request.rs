//! The Chat Completions request body of a [`ModelRequest`], serialized straight from it (no
//! `serde_json::Value` tree: tool schemas and messages are written where they lie).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::http::body::{Object, ToolArray};
use crate::messages::WireFormat;
use crate::types::{Message, ModelParams, ModelRequest, ToolCall, ToolSpec};

/// Keys the body builder owns; `params.extra` cannot replace them.
const RESERVED: &[&str] = &["model", "messages", "tools", "stream", "stream_options"];

/// Which field carries the output token limit: OpenAI's reasoning models refuse `max_tokens`,
/// while older local servers know only it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxCompletionTokens,
    MaxTokens,
}

/// The body: serialize it (`reqwest`'s `json`, `serde_json::to_vec`). `encoded`: the request's
/// tools array as [`tools`] writes it, when the caller keeps it (written as it is).
pub(crate) fn body<'a>(
    model: &'a str,
    request: &'a ModelRequest,
    params: &'a ModelParams,
    max_field: MaxTokensField,
    encoded: Option<&'a RawValue>,
) -> Object<'a, Field<'a>> {
    let mut fields = Vec::with_capacity(9);
    fields.push(("model", Field::Str(model)));
    fields.push(("messages", Field::Messages(request)));
    match encoded {
        Some(tools) => fields.push(("tools", Field::Encoded(tools))),
        None if !request.tools.is_empty() => fields.push(("tools", Field::Tools(&request.tools))),
        None => {}
    }
    fields.push(("stream", Field::True));
    fields.push(("stream_options", Field::IncludeUsage));
    if let Some(effort) = params.effort {
        fields.push(("reasoning_effort", Field::Str(effort.as_str())));
    }
    if let Some(max) = params.max_tokens {
        let key = match max_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        fields.push((key, Field::U32(max)));
    }
    if let Some(temperature) = params.temperature {
        fields.push(("temperature", Field::F64(temperature)));
    }
    if let Some(top_p) = params.top_p {
        fields.push(("top_p", Field::F64(top_p)));
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
    /// `{"include_usage": true}`
    IncludeUsage,
    /// The system prompt, then the conversation.
    Messages(&'a ModelRequest),
    Tools(&'a [ToolSpec]),
    /// The tools array, already encoded by [`tools`].
    Encoded(&'a RawValue),
}

/// The `tools` array of `specs`, encoded (see [`crate::http::body::EncodedTools`]).
pub(crate) fn tools(specs: &[ToolSpec]) -> serde_json::Result<Box<RawValue>> {
    serde_json::value::to_raw_value(&ToolArray(specs, tool))
}

fn tool(spec: &ToolSpec) -> Tool<'_> {
    Tool {
        kind: "function",
        function: Function { name: &spec.name, description: &spec.description, parameters: &spec.input_schema },
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(text) => serializer.serialize_str(text),
            Field::U32(n) => serializer.serialize_u32(*n),
            Field::F64(x) => serializer.serialize_f64(*x),
            Field::True => serializer.serialize_bool(true),
            Field::IncludeUsage => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("include_usage", &true)?;
                map.end()
            }
            Field::Messages(request) => {
                let system = request.system.as_deref().map(|system| Entry::Wire(Wire::System(system)));
                let messages = request.messages.encoded(&WIRE).map(|(message, parts)| match parts {
                    Some([whole]) => Entry::Kept(whole),
                    _ => Entry::Wire(Wire::Message(message)),
                });
                serializer.collect_seq(system.into_iter().chain(messages))
            }
            Field::Tools(specs) => ToolArray(specs, tool).serialize(serializer),
            Field::Encoded(tools) => tools.serialize(serializer),
        }
    }
}

/// A message as one entry of `messages`, kept with it (see [`crate::Messages::encoded`]).
static WIRE: WireFormat = WireFormat { name: "openai-chat", encode: encode_message };

fn encode_message(message: &Message) -> Option<Vec<Box<RawValue>>> {
    serde_json::value::to_raw_value(&Wire::Message(message)).ok().map(|whole| vec![whole])
}

/// One entry of `messages`: encoded now, or kept from an earlier request.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry<'a> {
    Wire(Wire<'a>),
    Kept(&'a RawValue),
}

/// One entry of `messages`, encoded now.
enum Wire<'a> {
    System(&'a str),
    Message(&'a Message),
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Wire::System(content) => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", content)?;
            }
            Wire::Message(Message::User { content }) => {
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", content)?;
            }
            // Reasoning is not sent back: servers that emit `reasoning_content` reject it in input.
            Wire::Message(Message::Assistant { content, tool_calls, .. }) => {
                map.serialize_entry("role", "assistant")?;
                let content = Some(content.as_str()).filter(|c| !c.is_empty() || tool_calls.is_empty());
                map.serialize_entry("content", &content)?;
                if !tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &Calls(tool_calls))?;
                }
            }
            // Chat Completions has no error flag for tool results; the content says what went wrong.
            Wire::Message(Message::Tool { call_id, content, .. }) => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", call_id)?;
                map.serialize_entry("content", content)?;
            }
        }
        map.end()
    }
}

struct Calls<'a>(&'a [ToolCall]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|call| Call {
            id: &call.id,
            kind: "function",
            function: CallFunction { name: &call.name, arguments: &call.arguments },
        }))
    }
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::types::{Effort, ToolCall};

    fn to_value(body: Object<'_, Field<'_>>) -> Value {
        serde_json::to_value(body).unwrap()
    }

    fn add_tool() -> ToolSpec {
        ToolSpec { name: "add".into(), description: "adds".into(), input_schema: json!({"type": "object"}) }
    }

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
            ]
            .into(),
            tools: vec![add_tool()].into(),
            params: ModelParams::default(),
        };
        let mut params = ModelParams { effort: Some(Effort::High), max_tokens: Some(100), ..Default::default() };
        params.extra.insert("stream".into(), json!(false));
        params.extra.insert("seed".into(), json!(7));
        let body = to_value(body("m", &request, &params, MaxTokensField::MaxCompletionTokens, None));
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

    /// The bytes of the tools array, pinned: key order (ours, then the schema's own) and
    /// compact spacing are what providers and their prompt caches see.
    #[test]
    fn tools_array_bytes_are_pinned() {
        let request = ModelRequest {
            tools: vec![
                ToolSpec {
                    name: "search".into(),
                    description: "Finds \"things\" — fast".into(),
                    input_schema: json!({"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}}),
                },
                add_tool(),
            ]
            .into(),
            ..Default::default()
        };
        let encoded = tools(&request.tools).unwrap();
        let [bytes, from_encoded] = [None, Some(&*encoded)].map(|encoded| {
            serde_json::to_string(&body("m", &request, &ModelParams::default(), MaxTokensField::MaxTokens, encoded))
                .unwrap()
        });
        assert_eq!(from_encoded, bytes);
        let tools = r#""tools":[{"type":"function","function":{"name":"search","description":"Finds \"things\" — fast","parameters":{"type":"object","required":["q"],"properties":{"q":{"type":"string"},"limit":{"type":"integer","minimum":1}}}}},{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object"}}}]"#;
        assert_eq!(
            bytes,
            format!(r#"{{"model":"m","messages":[],{tools},"stream":true,"stream_options":{{"include_usage":true}}}}"#)
        );
    }

    /// The body as it was built before it was serialized straight from the request: a `Value`
    /// tree. The wire bytes must not change.
    fn value_body(model: &str, request: &ModelRequest, params: &ModelParams, max_field: MaxTokensField) -> Value {
        let mut body = Map::new();
        for (key, value) in &params.extra {
            if !RESERVED.contains(&key.as_str()) {
                body.insert(key.clone(), value.clone());
            }
        }
        body.insert("model".into(), json!(model));
        let system = request.system.iter().map(|system| json!({"role": "system", "content": &**system}));
        let rest = request.messages.iter().map(|message| match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls, .. } => {
                let mut out = json!({"role": "assistant"});
                out["content"] = if content.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(content) };
                if !tool_calls.is_empty() {
                    out["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
                        })
                        .collect();
                }
                out
            }
            Message::Tool { call_id, content, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
        body.insert("messages".into(), Value::Array(system.chain(rest).collect()));
        if !request.tools.is_empty() {
            let tools = request.tools.iter().map(|spec| {
                json!({"type": "function", "function": {"name": spec.name, "description": spec.description, "parameters": spec.input_schema}})
            });
            body.insert("tools".into(), tools.collect());
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

    #[test]
    fn bytes_match_the_value_tree_they_replaced() {
        let call = |id: &str| ToolCall { id: id.into(), name: "add".into(), arguments: r#"{"a": 1}"#.into() };
        let messages = vec![
            Message::user("héllo \"there\"\n"),
            Message::assistant(""),
            Message::Assistant { content: "calling".into(), reasoning: None, tool_calls: vec![call("c1"), call("c2")] },
            Message::Assistant { content: String::new(), reasoning: None, tool_calls: vec![call("c3")] },
            Message::tool_result("c1", "3", false),
            Message::tool_result("c2", "boom", true),
        ];
        let mut overlapping = ModelParams {
            effort: Some(Effort::Low),
            max_tokens: Some(9),
            temperature: Some(0.25),
            top_p: Some(f64::NAN),
            ..Default::default()
        };
        for (key, value) in [
            ("top_p", json!(1)),
            ("stream", json!(false)),
            ("seed", json!(7)),
            ("max_tokens", json!(3)),
            ("model", json!("other")),
            ("reasoning_effort", json!("none")),
            ("logit_bias", json!({"50256": -100})),
        ] {
            overlapping.extra.insert(key.into(), value);
        }
        let mut extra_only = ModelParams::default();
        extra_only.extra.insert("temperature".into(), json!(0.7));
        let requests = [
            ModelRequest::default(),
            ModelRequest { system: Some("".into()), messages: messages.clone().into(), ..Default::default() },
            ModelRequest {
                system: Some("sys".into()),
                messages: messages.into(),
                tools: vec![add_tool(), add_tool()].into(),
                params: ModelParams::default(),
            },
        ];
        for request in &requests {
            for params in [&ModelParams::default(), &overlapping, &extra_only] {
                for field in [MaxTokensField::MaxTokens, MaxTokensField::MaxCompletionTokens] {
                    let tree = serde_json::to_string(&value_body("m", request, params, field)).unwrap();
                    let encoded = tools(&request.tools).unwrap();
                    let encoded = Some(&*encoded).filter(|_| !request.tools.is_empty());
                    for encoded in [None, encoded] {
                        let typed = serde_json::to_string(&body("m", request, params, field, encoded)).unwrap();
                        assert_eq!(typed, tree);
                    }
                }
            }
        }
    }
}
