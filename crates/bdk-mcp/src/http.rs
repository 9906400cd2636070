//! The streamable HTTP client of an `url` connection: rmcp's reqwest client, plus a W3C
//! `traceparent` header on a request whose `params._meta` carries one (the hub puts it there,
//! naming the call's MCP span), and the session id the server gave, for the span's
//! `mcp.session.id`.
//!
//! rmcp sends from its own worker task, where the caller's OpenTelemetry context is not current,
//! so the header cannot come from the context: it comes from the message itself. GET (the
//! server's event stream) and DELETE are rmcp's own; POST is rmcp 0.15's, with the header added.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, GetMeta as _, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

/// The `_meta` key (and HTTP header) that carries the caller's span.
pub const TRACEPARENT: &str = bdk_telemetry::traceparent::HEADER;

/// The MCP session id an HTTP server assigned, shared between the client and its connection.
#[derive(Debug, Clone, Default)]
pub struct SessionSlot(Arc<Mutex<Option<Arc<str>>>>);

impl SessionSlot {
    pub fn get(&self) -> Option<Arc<str>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set(&self, id: Option<&Arc<str>>) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref() != id {
            *slot = id.cloned();
        }
    }
}

/// rmcp's reqwest client with trace propagation. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TracedClient {
    http: reqwest::Client,
    session: SessionSlot,
}

impl TracedClient {
    pub fn new(http: reqwest::Client, session: SessionSlot) -> Self {
        Self { http, session }
    }
}

/// The `traceparent` in a request's `params._meta`, if any.
pub fn traceparent_of(message: &ClientJsonRpcMessage) -> Option<&str> {
    match message {
        JsonRpcMessage::Request(request) => request.request.get_meta().0.get(TRACEPARENT)?.as_str(),
        _ => None,
    }
}

impl StreamableHttpClient for TracedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.session.set(session_id.as_ref());
        let mut request = self
            .http
            .post(uri.as_ref())
            .header(reqwest::header::ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "));
        if let Some(traceparent) = traceparent_of(&message) {
            request = request.header(TRACEPARENT, traceparent);
        }
        if let Some(auth_header) = auth_token {
            request = request.bearer_auth(auth_header);
        }
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id.as_ref());
        }
        let response = request.json(&message).send().await?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED
            && let Some(header) = response.headers().get(reqwest::header::WWW_AUTHENTICATE)
        {
            let header = header.to_str().map_err(|_| {
                StreamableHttpError::UnexpectedServerResponse(Cow::from("invalid www-authenticate header value"))
            })?;
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError {
                www_authenticate_header: header.to_owned(),
            }));
        }
        let status = response.status();
        if matches!(status, reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).cloned();
        let session_id = response.headers().get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()).map(|s| s.to_owned());
        match content_type {
            Some(ct) if ct.as_bytes().starts_with(EVENT_STREAM_MIME_TYPE.as_bytes()) => {
                let stream: BoxStream<'static, Result<Sse, SseError>> =
                    SseStream::from_bytes_stream(response.bytes_stream()).boxed();
                Ok(StreamableHttpPostResponse::Sse(stream, session_id))
            }
            Some(ct) if ct.as_bytes().starts_with(JSON_MIME_TYPE.as_bytes()) => {
                let message: ServerJsonRpcMessage = response.json().await?;
                Ok(StreamableHttpPostResponse::Json(message, session_id))
            }
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
            )),
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.http.delete_session(uri, session_id, auth_header)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>>> + Send + '_
    {
        self.http.get_stream(uri, session_id, last_event_id, auth_header)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcRequest, JsonRpcVersion2_0, Meta, NumberOrString,
    };

    use super::*;

    fn call(meta: Option<&str>) -> ClientJsonRpcMessage {
        let params = CallToolRequestParams { meta: None, name: "echo".into(), arguments: None, task: None };
        let mut request = CallToolRequest { method: Default::default(), params, extensions: Default::default() };
        if let Some(value) = meta {
            let mut meta = Meta::new();
            meta.0.insert(TRACEPARENT.into(), value.into());
            request.extensions.insert(meta);
        }
        JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(1),
            request: ClientRequest::CallToolRequest(request),
        })
    }

    #[test]
    fn the_traceparent_comes_from_the_requests_meta_and_is_sent_there_too() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let message = call(Some(value));
        assert_eq!(traceparent_of(&message), Some(value));
        let wire = serde_json::to_value(&message).unwrap();
        assert_eq!(wire["params"]["_meta"][TRACEPARENT], value, "{wire}");
        assert_eq!(wire["params"]["name"], "echo");
        assert_eq!(traceparent_of(&call(None)), None);
    }
}
