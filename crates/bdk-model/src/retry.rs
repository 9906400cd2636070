//! Retries a provider's retryable failures with exponential backoff and jitter, but only while
//! nothing has been streamed yet: once output reached the caller, a retry would repeat it.
//!
//! Timeouts are not here; the HTTP layer enforces them and reports them as retryable errors.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use tokio_util::sync::CancellationToken;

use crate::error::ModelError;
use crate::provider::{ModelProvider, ModelStream, ProviderInfo};
use crate::types::{ModelEvent, ModelRequest};

/// When and how long to wait before trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying.
    pub max_retries: u32,
    /// The wait before the first retry; doubled for each one after.
    pub initial_backoff: Duration,
    /// The longest computed wait.
    pub max_backoff: Duration,
    /// A server's `retry-after` longer than this is not waited for: the error is returned.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based) after `err`; `None` to give up.
    pub fn delay(&self, attempt: u32, err: &ModelError) -> Option<Duration> {
        if attempt >= self.max_retries || !err.is_retryable() {
            return None;
        }
        if let Some(asked) = err.retry_after() {
            return (asked <= self.max_retry_after).then_some(asked);
        }
        let base = self.initial_backoff.saturating_mul(2u32.saturating_pow(attempt)).min(self.max_backoff);
        // "Equal jitter": half the wait is fixed, half random, so clients that failed together
        // do not retry together.
        let half = base / 2;
        Some(half + half.mul_f64(fastrand::f64()))
    }
}

/// Wraps a provider with a [`RetryPolicy`].
#[derive(Debug)]
pub struct Retrying {
    inner: Arc<dyn ModelProvider>,
    policy: RetryPolicy,
}

impl Retrying {
    pub fn new(inner: Arc<dyn ModelProvider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

struct Attempts {
    inner: Arc<dyn ModelProvider>,
    policy: RetryPolicy,
    request: ModelRequest,
    cancel: CancellationToken,
    current: Option<ModelStream>,
    attempt: u32,
    streamed: bool,
    done: bool,
}

impl ModelProvider for Retrying {
    fn info(&self) -> ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let state = Attempts {
            inner: self.inner.clone(),
            policy: self.policy,
            request,
            cancel,
            current: None,
            attempt: 0,
            streamed: false,
            done: false,
        };
        Box::pin(stream::unfold(state, |mut state| async move { state.next().await.map(|item| (item, state)) }))
    }
}

impl Attempts {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if self.done {
                return None;
            }
            // A clone per attempt copies no conversation: a request shares its system prompt,
            // messages and tools (`ModelRequest`).
            let current =
                self.current.get_or_insert_with(|| self.inner.stream(self.request.clone(), self.cancel.clone()));
            let err = match current.next().await {
                Some(Ok(event)) => {
                    self.streamed = true;
                    return Some(Ok(event));
                }
                Some(Err(err)) => err,
                None => {
                    self.done = true;
                    return None;
                }
            };
            self.current = None;
            let delay = if self.streamed { None } else { self.policy.delay(self.attempt, &err) };
            let Some(delay) = delay else {
                self.done = true;
                return Some(Err(err));
            };
            self.attempt += 1;
            tracing::warn!(error = %err, attempt = self.attempt, delay_ms = delay.as_millis() as u64, "model call failed; retrying");
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    self.done = true;
                    return Some(Err(ModelError::Cancelled));
                }
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        let policy = RetryPolicy { max_retries: 5, ..Default::default() };
        let server = ModelError::Server { status: 500, message: String::new() };
        for attempt in 0..4 {
            let base = Duration::from_millis(500) * 2u32.pow(attempt);
            let delay = policy.delay(attempt, &server).unwrap();
            assert!(delay >= base / 2 && delay <= base, "attempt {attempt}: {delay:?}");
        }
        assert_eq!(policy.delay(5, &server), None);
        let limited = ModelError::RateLimited { message: String::new(), retry_after: Some(Duration::from_secs(7)) };
        assert_eq!(policy.delay(0, &limited), Some(Duration::from_secs(7)));
        let too_long = ModelError::RateLimited { message: String::new(), retry_after: Some(Duration::from_secs(3600)) };
        assert_eq!(policy.delay(0, &too_long), None);
        assert_eq!(policy.delay(0, &ModelError::Authentication { message: String::new() }), None);
    }
}
