//! The host-service routes a command reaches through `BDK_HOST_URL` (`<base>/v1/host/...`): kv,
//! files, send and callTool for the one tool call its `BDK_HOST_TOKEN` was minted for.
//!
//! These routes run none of the session API's auth chain. A request is admitted only with
//! `Authorization: Bearer <live host token>` minted for this agent (else 401), from a peer on
//! this machine with no proxy-forwarding header (else 403): commands run on the host, so a
//! remote client never needs these routes, and a token that leaked into a log is useless from
//! elsewhere. What a token reaches is fixed by its scope: `scope: "session"` (the default) is
//! the calling session's own data, `scope: "agent"` the agent-wide data. A body may name the
//! `sessionId` it expects; any other session's id is 403.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::routing::{get, post};
use bdk_engine::HostScope;
use bdk_tools::host::{HostErrorKind, SendRequest};
use bdk_tools::{HostError, HostServices, Scope};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::base64;
use crate::auth::PROXY_HEADERS;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

/// The routes, relative to the agent's base path.
pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/host/session", get(session))
        .route("/v1/host/kv/get", post(kv_get))
        .route("/v1/host/kv/put", post(kv_put))
        .route("/v1/host/kv/delete", post(kv_delete))
        .route("/v1/host/kv/list", post(kv_list))
        .route("/v1/host/files/read", post(file_read))
        .route("/v1/host/files/write", post(file_write))
        .route("/v1/host/files/delete", post(file_delete))
        .route("/v1/host/files/list", post(file_list))
        .route("/v1/host/send", post(send))
        .route("/v1/host/call-tool", post(call_tool))
}

/// An admitted host request: the services of the call its token was minted for.
pub(crate) struct HostCaller {
    scope: HostScope,
    services: Arc<dyn HostServices>,
}

impl HostCaller {
    /// The services of the call the token was minted for.
    pub(crate) fn services(&self) -> &Arc<dyn HostServices> {
        &self.services
    }

    /// The session of the call the token was minted for, if any.
    pub(crate) fn session_id(&self) -> Option<bdk_protocol::SessionId> {
        self.scope.session_id.clone()
    }
}

impl FromRequestParts<AgentState> for HostCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AgentState) -> Result<Self, ApiError> {
        let tokens = &state.app.host_tokens;
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        if !peer.is_some_and(|ip| tokens.is_local(ip)) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the host services answer only callers on this machine",
            ));
        }
        if let Some(name) = PROXY_HEADERS.iter().find(|name| parts.headers.contains_key(**name)) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("requests forwarded by a proxy ({name} header) are refused by the host services"),
            ));
        }
        let unauthorized = |message: &str| ApiError::unauthorized(message).with_challenge("Bearer");
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(|| unauthorized("send the call's BDK_HOST_TOKEN as `Authorization: Bearer <token>`"))?;
        let resolved =
            tokens.resolve(token).filter(|resolved| resolved.slug == state.agent.slug()).ok_or_else(|| {
                unauthorized("the host token is not valid (its tool call has returned, or it is not one)")
            })?;
        let services = state.engine().host_services(resolved.scope.clone());
        Ok(HostCaller { scope: resolved.scope, services })
    }
}

impl HostCaller {
    /// Refuses a body that names another session than the token's.
    fn check_session(&self, named: Option<&str>) -> ApiResult<()> {
        match (named, &self.scope.session_id) {
            (None, _) => Ok(()),
            (Some(named), Some(own)) if named == own.as_str() => Ok(()),
            (Some(named), _) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("this host token cannot reach session {named}'s data"),
            )),
        }
    }
}

/// A [`HostError`] as an HTTP error.
pub(crate) fn api_error(error: HostError) -> ApiError {
    let status = match error.kind {
        HostErrorKind::Invalid => StatusCode::BAD_REQUEST,
        HostErrorKind::Revoked => StatusCode::UNAUTHORIZED,
        HostErrorKind::Forbidden => StatusCode::FORBIDDEN,
        HostErrorKind::NotFound => StatusCode::NOT_FOUND,
        HostErrorKind::Conflict => StatusCode::CONFLICT,
        HostErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        HostErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, error.code, error.message)
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionInfo {
    session_id: Option<String>,
    call_id: String,
}

/// `GET /v1/host/session`: who this token acts for.
async fn session(caller: HostCaller) -> OkJson<SessionInfo> {
    let identity = caller.services.identity();
    OkJson(SessionInfo {
        session_id: identity.session_id.as_ref().map(ToString::to_string),
        call_id: identity.call_id.to_string(),
    })
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct KeyBody {
    key: String,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PutBody {
    key: String,
    value: Value,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PrefixBody {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PathBody {
    path: String,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    session_id: Option<String>,
}

/// How file content travels in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    /// Text, as a JSON string.
    #[default]
    Utf8,
    /// Any bytes, base64 (standard alphabet, padded).
    Base64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WriteBody {
    path: String,
    content: String,
    #[serde(default)]
    encoding: Encoding,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CallToolBody {
    name: String,
    #[serde(default = "empty_object")]
    input: Value,
}

fn empty_object() -> Value {
    json!({})
}

async fn kv_get(caller: HostCaller, JsonBody(body): JsonBody<KeyBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let value = caller.services.kv_get(body.scope, body.key.clone()).await.map_err(api_error)?;
    Ok(OkJson(json!({ "key": body.key, "found": value.is_some(), "value": value })))
}

async fn kv_put(caller: HostCaller, JsonBody(body): JsonBody<PutBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    caller.services.kv_put(body.scope, body.key.clone(), body.value).await.map_err(api_error)?;
    Ok(OkJson(json!({ "key": body.key })))
}

async fn kv_delete(caller: HostCaller, JsonBody(body): JsonBody<KeyBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let deleted = caller.services.kv_delete(body.scope, body.key.clone()).await.map_err(api_error)?;
    Ok(OkJson(json!({ "key": body.key, "deleted": deleted })))
}

async fn kv_list(caller: HostCaller, JsonBody(body): JsonBody<PrefixBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let keys = caller.services.kv_list(body.scope, body.prefix).await.map_err(api_error)?;
    Ok(OkJson(json!({ "keys": keys })))
}

/// Text comes back as `utf8` when it is valid UTF-8, else as `base64`.
async fn file_read(caller: HostCaller, JsonBody(body): JsonBody<PathBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let bytes = caller.services.file_read(body.scope, body.path.clone()).await.map_err(api_error)?;
    let Some(bytes) = bytes else {
        return Ok(OkJson(json!({ "path": body.path, "found": false })));
    };
    let size = bytes.len();
    let (content, encoding) = match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(error) => (base64::encode(error.as_bytes()), Encoding::Base64),
    };
    Ok(OkJson(json!({ "path": body.path, "found": true, "content": content, "encoding": encoding, "size": size })))
}

async fn file_write(caller: HostCaller, JsonBody(body): JsonBody<WriteBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let bytes = match body.encoding {
        Encoding::Utf8 => body.content.into_bytes(),
        Encoding::Base64 => {
            base64::decode(&body.content).ok_or_else(|| ApiError::invalid_request("`content` is not valid base64"))?
        }
    };
    let size = bytes.len();
    caller.services.file_write(body.scope, body.path.clone(), bytes).await.map_err(api_error)?;
    Ok(OkJson(json!({ "path": body.path, "size": size })))
}

async fn file_delete(caller: HostCaller, JsonBody(body): JsonBody<PathBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let deleted = caller.services.file_delete(body.scope, body.path.clone()).await.map_err(api_error)?;
    Ok(OkJson(json!({ "path": body.path, "deleted": deleted })))
}

async fn file_list(caller: HostCaller, JsonBody(body): JsonBody<PrefixBody>) -> ApiResult<OkJson<Value>> {
    caller.check_session(body.session_id.as_deref())?;
    let files = caller.services.file_list(body.scope, body.prefix).await.map_err(api_error)?;
    Ok(OkJson(json!({ "files": files })))
}

async fn send(caller: HostCaller, JsonBody(body): JsonBody<SendRequest>) -> ApiResult<OkJson<Value>> {
    let outcome = caller.services.send(body).await.map_err(api_error)?;
    Ok(OkJson(serde_json::to_value(outcome).map_err(|e| ApiError::internal(&e))?))
}

async fn call_tool(caller: HostCaller, JsonBody(body): JsonBody<CallToolBody>) -> ApiResult<OkJson<Value>> {
    let outcome = caller.services.call_tool(body.name, body.input).await.map_err(api_error)?;
    Ok(OkJson(serde_json::to_value(outcome).map_err(|e| ApiError::internal(&e))?))
}
