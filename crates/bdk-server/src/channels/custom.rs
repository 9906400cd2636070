//! Custom and webhook channel routes: match the declared route, admit the caller (a webhook's
//! HMAC signature, then the channel's auth chain), parse and validate the query and body
//! against their schemas (400 with every failing JSON path, before anything runs), then either
//! run the handler command or, for the declarative form, render the `send` templates.
//!
//! The handler reads `{"input": {channel, method, path, route, params, query, headers, body,
//! principal}, "context": {...}}` on stdin, with host services for as long as it runs, and
//! prints one JSON object: `status`, `headers`, `body`, and `send` (a message for this channel:
//! `message`, `continuation_key`, `title`, `admission`), all optional. A handler that fails,
//! hangs past its timeout or prints something else is a 502 or 504, and no session starts.

use std::time::{Duration, Instant};

use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bdk_engine::{Admission, ChannelSend, HostCommand, Principal};
use bdk_project::model::{ChannelDef, RouteDef, RouteSend};
use bdk_tools::validate::InputSchema;
use serde_json::{Map, Value, json};

use super::signature::{self, Algorithm};
use super::{Env, Incoming, Mounted, Runtime};
use crate::error::ApiError;
use crate::state::AgentState;

/// A webhook channel's signature check (`[webhook]`): `None` secret means no check.
#[derive(Clone)]
pub(crate) struct WebhookCheck {
    secret: Option<Vec<u8>>,
    secret_env: Option<String>,
    header: String,
    algorithm: Algorithm,
    prefix: String,
}

impl std::fmt::Debug for WebhookCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookCheck").field("header", &self.header).field("secret_env", &self.secret_env).finish()
    }
}

/// The signature header of a webhook channel without `signature_header`.
pub const DEFAULT_SIGNATURE_HEADER: &str = "x-signature-256";

impl WebhookCheck {
    pub(crate) fn new(def: &ChannelDef, env: &Env) -> Self {
        let settings = def.settings.as_ref();
        let text = |key: &str| settings.and_then(|s| s.get(key)).and_then(Value::as_str).map(str::to_owned);
        let algorithm = text("algorithm").and_then(|a| Algorithm::parse(&a)).unwrap_or(Algorithm::Sha256);
        let secret_env = text("secret_env");
        let secret = secret_env.as_deref().and_then(env).map(String::into_bytes);
        if let (Some(name), None) = (&secret_env, &secret) {
            tracing::warn!(channel = %def.id, env = %name, "webhook secret is not set: every request is refused");
        }
        let default_prefix = match algorithm {
            Algorithm::Sha256 => "sha256=",
            Algorithm::Sha512 => "sha512=",
        };
        Self {
            secret,
            secret_env,
            header: text("signature_header")
                .unwrap_or_else(|| DEFAULT_SIGNATURE_HEADER.to_owned())
                .to_ascii_lowercase(),
            algorithm,
            prefix: text("signature_prefix").unwrap_or_else(|| default_prefix.to_owned()),
        }
    }

    /// Checks the request's signature; `Ok(true)` when one was required and matched.
    fn check(&self, incoming: &Incoming) -> Result<bool, ApiError> {
        let Some(name) = &self.secret_env else { return Ok(false) };
        let Some(secret) = &self.secret else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "signature_not_configured",
                format!("this webhook verifies signatures but ${name} is not set on the host"),
            ));
        };
        let presented = incoming.headers.get(self.header.as_str()).and_then(|v| v.to_str().ok());
        let Some(presented) = presented else {
            return Err(invalid_signature(format!("the `{}` header is missing", self.header)));
        };
        if signature::verify(self.algorithm, secret, &[&incoming.body], &self.prefix, presented) {
            Ok(true)
        } else {
            Err(invalid_signature(format!("the `{}` signature does not match the body", self.header)))
        }
    }
}

pub(crate) fn invalid_signature(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "invalid_signature", message)
}

/// Serves one request to a custom or webhook channel.
pub(crate) async fn handle(state: &AgentState, mounted: &Mounted, incoming: Incoming) -> Result<Response, ApiError> {
    let def = &mounted.def;
    let (route, params) = match_route(def, &incoming.method, &incoming.path)?;
    let signed = match &mounted.runtime {
        Runtime::Webhook(check) => check.check(&incoming)?,
        _ => false,
    };
    // A verified signature admits by itself unless the channel also declares a chain.
    let principal = if signed && def.auth.is_empty() {
        Principal::new(format!("webhook:{}", def.id))
    } else {
        mounted.chain.admit(incoming.peer, &incoming.headers)?.principal
    };
    let query = parse_query(incoming.query.as_deref(), route.query_schema.as_ref())?;
    if let Some(schema) = &route.query_schema {
        validate(schema, &Value::Object(query.clone()), "invalid_query", "query")?;
    }
    let body = parse_body(&incoming.body)?;
    if let Some(schema) = &route.body_schema {
        validate(schema, &body, "invalid_body", "body")?;
    }
    let headers: Map<String, Value> = route
        .headers
        .iter()
        .filter_map(|name| {
            let value = incoming.headers.get(name.as_str())?.to_str().ok()?;
            Some((name.clone(), Value::String(value.to_owned())))
        })
        .collect();
    let request = json!({
        "channel": def.id,
        "method": incoming.method.as_str(),
        "path": incoming.path,
        "route": route.path,
        "params": params,
        "query": query,
        "headers": headers,
        "body": body,
        "principal": principal.as_str(),
    });
    match &route.send {
        Some(send) => declarative(state, def, send, &request, principal).await,
        None => run_handler(state, def, route, &request, principal).await,
    }
}

/// Finds the route for `method` and `path`: 404 when no path matches, 405 when only the
/// method differs. Path segments `{name}` (or `:name`) match one segment.
fn match_route<'a>(
    def: &'a ChannelDef,
    method: &Method,
    path: &str,
) -> Result<(&'a RouteDef, Map<String, Value>), ApiError> {
    let mut path_matched = false;
    for route in &def.routes {
        if let Some(params) = match_path(&route.path, path) {
            if route.method == method.as_str() {
                return Ok((route, params));
            }
            path_matched = true;
        }
    }
    if path_matched {
        return Err(ApiError::method_not_allowed());
    }
    Err(ApiError::new(StatusCode::NOT_FOUND, "route_not_found", format!("channel `{}` has no route {path}", def.id)))
}

fn match_path(pattern: &str, path: &str) -> Option<Map<String, Value>> {
    let split = |p: &str| -> Vec<String> { p.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect() };
    let (pattern, path) = (split(pattern), split(path));
    if pattern.len() != path.len() {
        return None;
    }
    let mut params = Map::new();
    for (want, got) in pattern.iter().zip(&path) {
        let name = want.strip_prefix('{').and_then(|w| w.strip_suffix('}')).or_else(|| want.strip_prefix(':'));
        match name {
            Some(name) => {
                params.insert(name.to_owned(), Value::String(got.clone()));
            }
            None if want == got => {}
            None => return None,
        }
    }
    Some(params)
}

/// The query string as an object; values follow the schema's property types where they say
/// `integer`, `number` or `boolean` (a value that does not parse stays a string and fails
/// validation with its path).
fn parse_query(query: Option<&str>, schema: Option<&Value>) -> Result<Map<String, Value>, ApiError> {
    let uri: axum::http::Uri = format!("/?{}", query.unwrap_or_default())
        .parse()
        .map_err(|_| ApiError::invalid_request("the query string is malformed"))?;
    let pairs = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map_err(|e| ApiError::invalid_request(format!("the query string is malformed: {}", e.body_text())))?
        .0;
    let mut out = Map::new();
    for (key, value) in pairs {
        let kind = schema.and_then(|s| s.pointer(&format!("/properties/{key}/type"))).and_then(Value::as_str);
        let typed = match kind {
            Some("integer") => value.parse::<i64>().map(Value::from).unwrap_or(Value::String(value)),
            Some("number") => value
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or(Value::String(value)),
            Some("boolean") => match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(value),
            },
            _ => Value::String(value),
        };
        out.insert(key, typed);
    }
    Ok(out)
}

/// An empty body is `null`; anything else must be JSON.
fn parse_body(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid_request(format!("the request body is not valid JSON: {e}")))
}

fn validate(schema: &Value, value: &Value, code: &'static str, what: &str) -> Result<(), ApiError> {
    let compiled = InputSchema::compile(schema).map_err(|e| ApiError::internal(&e))?;
    compiled.check(value).map_err(|errors| {
        let mut error = ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!("the {what} does not match the route's schema: {}", errors.join("; ")),
        );
        error.details = vec![("errors", errors)];
        error
    })
}

/// The declarative form: render the templates, send, answer 202 with the session.
async fn declarative(
    state: &AgentState,
    def: &ChannelDef,
    send: &RouteSend,
    request: &Value,
    principal: Principal,
) -> Result<Response, ApiError> {
    let message = render(&send.message, request)?;
    let key = send.continuation_key.as_deref().map(|t| render(t, request)).transpose()?;
    let title = send.title.as_deref().map(|t| render(t, request)).transpose()?;
    let mut request = ChannelSend::new(def.id.clone(), message, principal);
    request.continuation_key = key;
    request.title = title;
    request.admission = admission(def);
    let sent = state.engine().channel_send(request).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(sent_body(&sent, Map::new()))).into_response())
}

fn admission(def: &ChannelDef) -> Admission {
    match def.admission {
        bdk_project::model::Admission::Preempt => Admission::Preempt,
        bdk_project::model::Admission::Coalesce => Admission::Coalesce,
    }
}

fn sent_body(sent: &bdk_tools::host::SendOutcome, extra: Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("ok".into(), Value::Bool(true));
    body.extend(extra);
    body.insert("sessionId".into(), json!(sent.session_id));
    body.insert("continuationToken".into(), json!(sent.continuation_token));
    body.insert("created".into(), json!(sent.created));
    if let Some(turn) = &sent.turn_id {
        body.insert("turnId".into(), json!(turn));
    }
    Value::Object(body)
}

/// Fills `{{body.x.y}}`, `{{params.id}}`, `{{query.q}}`, `{{headers.h}}` from the request.
pub(crate) fn render(template: &str, request: &Value) -> Result<String, ApiError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(ApiError::internal(&"an unclosed template passed validation"));
        };
        let name = after[..end].trim();
        let pointer = format!("/{}", name.replace('.', "/"));
        match request.pointer(&pointer) {
            Some(Value::String(text)) => out.push_str(text),
            Some(Value::Null) | None => {
                return Err(ApiError::invalid_request(format!("`{{{{{name}}}}}` has no value in this request")));
            }
            Some(other) => out.push_str(&other.to_string()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

async fn run_handler(
    state: &AgentState,
    def: &ChannelDef,
    route: &RouteDef,
    request: &Value,
    principal: Principal,
) -> Result<Response, ApiError> {
    let command = HostCommand {
        name: format!("channel-{}", def.id),
        argv: route.handler.clone(),
        cwd: def.cwd.clone(),
        timeout: route.timeout,
        session_id: None,
        principal: principal.clone(),
        extension: bdk_project::formats::namespace_of(&def.id, def.source).map(str::to_owned),
    };
    let started = Instant::now();
    let outcome = state.engine().run_host_command(&command, request).await;
    if outcome.is_error {
        let detail = match &outcome.result {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        if started.elapsed() + Duration::from_millis(50) >= route.timeout {
            return Err(ApiError::new(StatusCode::GATEWAY_TIMEOUT, "handler_timeout", detail));
        }
        return Err(ApiError::new(StatusCode::BAD_GATEWAY, "handler_failed", detail));
    }
    let Value::Object(mut answer) = outcome.result else {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "handler_invalid_output",
            "the handler must print one JSON object ({\"status\", \"headers\", \"body\", \"send\"})",
        ));
    };
    let status = match answer.remove("status") {
        None => None,
        Some(Value::Number(n)) => {
            match n.as_u64().and_then(|n| u16::try_from(n).ok()).and_then(|n| StatusCode::from_u16(n).ok()) {
                Some(status) if status.as_u16() >= 200 => Some(status),
                _ => return Err(bad_output(format!("`status` {n} is not an HTTP status from 200 to 599"))),
            }
        }
        Some(other) => return Err(bad_output(format!("`status` must be a number, not {other}"))),
    };
    let headers = response_headers(answer.remove("headers"))?;
    let send = answer.remove("send").map(|send| parse_send(def, send, principal)).transpose()?;
    let body = answer.remove("body");
    let sent = match send {
        Some(send) => Some(state.engine().channel_send(send).await?),
        None => None,
    };
    let status = status.unwrap_or(if sent.is_some() { StatusCode::ACCEPTED } else { StatusCode::OK });
    let mut response = match (body, &sent) {
        (Some(Value::String(text)), _) => (status, text).into_response(),
        (Some(body), _) => (status, axum::Json(body)).into_response(),
        (None, Some(sent)) => (status, axum::Json(sent_body(sent, answer))).into_response(),
        (None, None) => {
            let mut body = Map::new();
            body.insert("ok".into(), Value::Bool(true));
            body.extend(answer);
            (status, axum::Json(Value::Object(body))).into_response()
        }
    };
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}

fn bad_output(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_GATEWAY, "handler_invalid_output", format!("the handler's answer: {message}"))
}

fn response_headers(value: Option<Value>) -> Result<Vec<(HeaderName, HeaderValue)>, ApiError> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let Value::Object(map) = value else { return Err(bad_output("`headers` must be an object".into())) };
    let mut out = Vec::new();
    for (name, value) in map {
        let Value::String(text) = value else { return Err(bad_output(format!("header `{name}` must be a string"))) };
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad_output(format!("`{name}` is not a header name")))?;
        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING || name == header::CONNECTION {
            return Err(bad_output(format!("the handler may not set `{name}`")));
        }
        let value =
            HeaderValue::from_str(&text).map_err(|_| bad_output(format!("header `{name}` has an invalid value")))?;
        out.push((name, value));
    }
    Ok(out)
}

fn parse_send(def: &ChannelDef, value: Value, principal: Principal) -> Result<ChannelSend, ApiError> {
    let Value::Object(map) = value else { return Err(bad_output("`send` must be an object".into())) };
    let text = |keys: &[&str]| -> Result<Option<String>, ApiError> {
        for key in keys {
            match map.get(*key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => return Ok(Some(s.clone())),
                Some(_) => return Err(bad_output(format!("`send.{key}` must be a string"))),
            }
        }
        Ok(None)
    };
    let allowed = ["message", "continuation_key", "continuationKey", "title", "admission"];
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad_output(format!("`send.{unknown}` is not a send field ({})", allowed.join(", "))));
    }
    let message = text(&["message"])?.filter(|m| !m.trim().is_empty());
    let Some(message) = message else { return Err(bad_output("`send.message` is required".into())) };
    let mut send = ChannelSend::new(def.id.clone(), message, principal);
    send.continuation_key = text(&["continuation_key", "continuationKey"])?;
    send.title = text(&["title"])?;
    send.admission = match text(&["admission"])?.as_deref() {
        None => admission(def),
        Some("coalesce") => Admission::Coalesce,
        Some("preempt") => Admission::Preempt,
        Some(other) => {
            return Err(bad_output(format!("`send.admission` is {other:?}, not \"coalesce\" or \"preempt\"")));
        }
    };
    Ok(send)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_segments_and_capture_parameters() {
        assert_eq!(match_path("/ticket/{id}", "/ticket/42").unwrap()["id"], "42");
        assert_eq!(match_path("/t/:id/x", "/t/7/x").unwrap()["id"], "7");
        assert!(match_path("/ticket/{id}", "/ticket").is_none());
        assert!(match_path("/a", "/b").is_none());
        assert!(match_path("/", "/").unwrap().is_empty());
    }

    #[test]
    fn templates_fill_from_the_request() {
        let request = json!({"body": {"id": 7, "who": {"name": "ann"}}, "params": {"p": "x"}});
        assert_eq!(render("#{{body.id}} by {{ body.who.name }} ({{params.p}})", &request).unwrap(), "#7 by ann (x)");
        let missing = render("{{body.nope}}", &request).unwrap_err();
        assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn query_values_follow_the_schema_types() {
        let schema = json!({"properties": {"n": {"type": "integer"}, "b": {"type": "boolean"}}});
        let query = parse_query(Some("n=3&b=true&s=x"), Some(&schema)).unwrap();
        assert_eq!(Value::Object(query), json!({"n": 3, "b": true, "s": "x"}));
    }
}
