//! The Anthropic Messages provider: streamed content blocks (text, thinking, tool use), cache
//! token usage, tool results and in-stream errors.

mod decode;
pub mod request;

use futures_util::{StreamExt, stream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::decode::MessagesDecoder;
use crate::error::ModelError;
use crate::http::body::EncodedTools;
use crate::http::{self, HttpConfig};
use crate::provider::{ModelProvider, ModelStream, ProviderInfo};
use crate::types::ModelRequest;

/// The API version header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Streams `POST {base_url}/messages`.
#[derive(Debug)]
pub struct AnthropicProvider {
    config: HttpConfig,
    client: reqwest::Client,
    /// The tools array of the last request, kept while its list is the one requests bring.
    tools: EncodedTools,
}

impl AnthropicProvider {
    pub fn new(config: HttpConfig) -> Result<Self, ModelError> {
        let client = http::client(&config.timeouts)?;
        Ok(Self { config, client, tools: EncodedTools::default() })
    }
}

impl ModelProvider for AnthropicProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: "anthropic".into(),
            model: self.config.model.clone(),
            base_url: Some(self.config.base_url.clone()),
        }
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let params = request.params.or(&self.config.params);
        let tools = self.tools.get(&request.tools, request::tools);
        let body = request::body(&self.config.model, &request, &params, tools.as_deref());
        let mut builder = self
            .client
            .post(http::endpoint(&self.config.base_url, "messages"))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(&body);
        if let Some(key) = &self.config.api_key {
            builder = builder.header("x-api-key", key);
        }
        builder = http::with_traceparent(builder);
        let timeouts = self.config.timeouts;
        let call = async move {
            let started = Instant::now();
            match http::send(builder, &timeouts, started, &cancel).await {
                Ok(response) => {
                    http::stream::sse_stream(response, MessagesDecoder::default(), timeouts, started, cancel)
                }
                Err(err) => Box::pin(stream::iter([Err(err)])) as ModelStream,
            }
        };
        Box::pin(stream::once(call).flatten())
    }
}
