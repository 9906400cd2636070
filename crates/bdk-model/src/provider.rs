//! The provider trait the engine holds as `Arc<dyn ModelProvider>`, and the provider that only
//! says why no model can be called.

use std::fmt;
use std::pin::Pin;

use futures_util::Stream;
use futures_util::stream;
use tokio_util::sync::CancellationToken;

use crate::error::ModelError;
use crate::types::{ModelEvent, ModelRequest};

/// A provider's streamed answer. An `Err` item is the last one.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static>>;

/// What a provider is, for events, logs and `info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderInfo {
    /// `xai`, `openai`, `openai-compatible`, `anthropic`, `scripted` or `unavailable`.
    pub provider: String,
    /// The model id sent to the provider.
    pub model: String,
    /// Where requests go, for HTTP providers.
    pub base_url: Option<String>,
}

/// A model behind some API.
///
/// `stream` starts one call and returns at once; the call happens as the stream is polled. The
/// stream ends after a `Finish` event or an error. When `cancel` fires, the stream yields
/// [`ModelError::Cancelled`] promptly and ends, dropping the connection; dropping the stream has
/// the same effect on the connection.
pub trait ModelProvider: Send + Sync + fmt::Debug {
    fn info(&self) -> ProviderInfo;

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream;
}

/// Fails every call with [`ModelError::ModelUnavailable`] and a message saying what to set.
///
/// Resolution returns it when no usable credential or provider exists, so the server still
/// starts and serves everything that needs no model.
#[derive(Debug, Clone)]
pub struct UnavailableProvider {
    info: ProviderInfo,
    message: String,
}

impl UnavailableProvider {
    pub fn new(info: ProviderInfo, message: impl Into<String>) -> Self {
        Self { info, message: message.into() }
    }

    /// What a call fails with.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl ModelProvider for UnavailableProvider {
    fn info(&self) -> ProviderInfo {
        self.info.clone()
    }

    fn stream(&self, _request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let err = ModelError::ModelUnavailable { message: self.message.clone() };
        Box::pin(stream::iter([Err(err)]))
    }
}
