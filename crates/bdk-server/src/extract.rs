//! Extractors whose rejections speak the API's error shape: a JSON body (400 `invalid_request`
//! with the parser's reason, 413 over the limit), a query string, and a session id path segment
//! (a malformed id names no session: 404).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bdk_protocol::SessionId;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The body limit, put in the request extensions by the router so 413 can name it.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// A JSON request body. The `Content-Type` header is not required: the body is parsed as JSON
/// whatever it says, so `curl -d '{...}'` works as typed.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let limit = request.extensions().get::<BodyLimit>().map_or(0, |l| l.0);
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(limit)
            } else {
                ApiError::invalid_request(format!("the request body could not be read: {rejection}"))
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses a body, saying whether it was not JSON at all or JSON of the wrong shape.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_request("the request body is empty; send a JSON object"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize::<_, T>(&mut deserializer).map_err(|err| {
        use serde_json::error::Category;
        let path = err.path().to_string();
        let err = err.into_inner();
        match err.classify() {
            Category::Syntax | Category::Eof | Category::Io => {
                ApiError::invalid_request(format!("the request body is not valid JSON: {err}"))
            }
            // Unknown fields name themselves and list the accepted ones (`deny_unknown_fields`);
            // a value of the wrong type is named by its path.
            Category::Data if path == "." || err.to_string().starts_with("unknown field") => {
                ApiError::invalid_request(format!("the request body is not the expected shape: {err}"))
            }
            Category::Data => ApiError::invalid_request(format!("field `{path}`: {err}")),
        }
    })?;
    deserializer
        .end()
        .map_err(|err| ApiError::invalid_request(format!("the request body is not valid JSON: {err}")))?;
    Ok(value)
}

/// A query string; a malformed one is 400.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            .map_err(|rejection| ApiError::invalid_request(format!("invalid query string: {}", rejection.body_text())))
    }
}

/// The `:sessionId` segment of a session route: a session id, or a channel continuation token
/// (`<channelId>:<key>`, URL-encoded, as `/v1/sessions` lists it) that names a live session.
/// HTTP tokens are credentials and are never accepted in a path.
#[derive(Debug)]
pub struct SessionPath(pub SessionId);

impl FromRequestParts<crate::state::AgentState> for SessionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &crate::state::AgentState) -> Result<Self, ApiError> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::invalid_request(rejection.body_text()))?;
        if let Ok(id) = SessionId::parse(raw.as_str()) {
            return Ok(SessionPath(id));
        }
        if raw.contains(':') && !raw.starts_with("http:") {
            let found = state.engine().find_by_token(&raw).await.map_err(ApiError::from)?;
            return found.map(SessionPath).ok_or_else(|| ApiError::session_not_found(&raw));
        }
        Err(ApiError::session_not_found(&raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Body {
        message: String,
    }

    #[test]
    fn json_errors_say_what_is_wrong() {
        let syntax = parse_json::<Body>(b"{\"message\": ").unwrap_err();
        assert_eq!(syntax.status, StatusCode::BAD_REQUEST);
        assert!(syntax.message.contains("not valid JSON"), "{}", syntax.message);
        let shape = parse_json::<Body>(b"{\"msg\": 1}").unwrap_err();
        assert!(shape.message.contains("missing field `message`"), "{}", shape.message);
        let typed = parse_json::<Body>(b"{\"message\": 1}").unwrap_err();
        assert!(typed.message.starts_with("field `message`: invalid type: integer"), "{}", typed.message);
        let trailing = parse_json::<Body>(b"{\"message\":\"hi\"} x").unwrap_err();
        assert!(trailing.message.contains("not valid JSON"), "{}", trailing.message);
        let empty = parse_json::<Body>(b"  ").unwrap_err();
        assert!(empty.message.contains("empty"));
        assert!(parse_json::<Body>(b"{\"message\":\"hi\"}").is_ok());
    }
}
