//! The OpenAI-compatible Chat Completions provider (xAI, OpenAI, and local servers such as
//! llama.cpp, vLLM and Ollama behind a `base_url`).

mod decode;
pub mod request;

use futures_util::{StreamExt, stream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::decode::ChatDecoder;
use self::request::MaxTokensField;
use crate::error::ModelError;
use crate::http::body::EncodedTools;
use crate::http::{self, HttpConfig};
use crate::presets::ProviderKind;
use crate::provider::{ModelProvider, ModelStream, ProviderInfo};
use crate::types::ModelRequest;

/// Streams `POST {base_url}/chat/completions`.
#[derive(Debug)]
pub struct OpenAiProvider {
    kind: ProviderKind,
    config: HttpConfig,
    client: reqwest::Client,
    /// The tools array of the last request, kept while its list is the one requests bring.
    tools: EncodedTools,
}

impl OpenAiProvider {
    /// `kind` is `xai`, `openai` or `openai-compatible`; it decides the output-limit field.
    pub fn new(kind: ProviderKind, config: HttpConfig) -> Result<Self, ModelError> {
        let client = http::client(&config.timeouts)?;
        Ok(Self { kind, config, client, tools: EncodedTools::default() })
    }

    fn max_tokens_field(&self) -> MaxTokensField {
        match self.kind {
            ProviderKind::Xai | ProviderKind::OpenAi => MaxTokensField::MaxCompletionTokens,
            _ => MaxTokensField::MaxTokens,
        }
    }
}

impl ModelProvider for OpenAiProvider {
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: self.kind.as_str().into(),
            model: self.config.model.clone(),
            base_url: Some(self.config.base_url.clone()),
        }
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let params = request.params.or(&self.config.params);
        let tools = self.tools.get(&request.tools, request::tools);
        let body = request::body(&self.config.model, &request, &params, self.max_tokens_field(), tools.as_deref());
        let mut builder = self
            .client
            .post(http::endpoint(&self.config.base_url, "chat/completions"))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        builder = http::with_traceparent(builder);
        let timeouts = self.config.timeouts;
        let call = async move {
            let started = Instant::now();
            match http::send(builder, &timeouts, started, &cancel).await {
                Ok(response) => http::stream::sse_stream(response, ChatDecoder::default(), timeouts, started, cancel),
                Err(err) => Box::pin(stream::iter([Err(err)])) as ModelStream,
            }
        };
        Box::pin(stream::once(call).flatten())
    }
}
