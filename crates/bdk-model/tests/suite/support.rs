//! Stream helpers for this suite. The fake server and the SSE builders live in
//! `bdk-test-support`, shared with the engine's benchmark and the CLI's end-to-end test.

use std::time::Duration;

use bdk_model::{ModelError, ModelEvent, ModelStream, ProviderOptions, RetryPolicy, Timeouts};
use futures_util::StreamExt;

/// The longest any test waits for a stream.
pub const WAIT: Duration = Duration::from_secs(10);

/// Reads `stream` to its end (or first error), failing the test after [`WAIT`].
pub async fn collect(mut stream: ModelStream) -> Vec<Result<ModelEvent, ModelError>> {
    let read = async {
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            out.push(item);
        }
        out
    };
    tokio::time::timeout(WAIT, read).await.expect("the stream did not end in time")
}

/// The events of a stream that must succeed.
pub async fn events(stream: ModelStream) -> Vec<ModelEvent> {
    collect(stream).await.into_iter().map(|item| item.expect("stream error")).collect()
}

/// The concatenated text deltas.
pub fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| if let ModelEvent::TextDelta { text } = e { Some(text.as_str()) } else { None })
        .collect()
}

/// The concatenated reasoning deltas.
pub fn reasoning_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| if let ModelEvent::ReasoningDelta { text } = e { Some(text.as_str()) } else { None })
        .collect()
}

/// Fast options for tests: short timeouts, quick retries.
pub fn fast_options() -> ProviderOptions {
    ProviderOptions {
        timeouts: Timeouts {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(5),
            idle: Duration::from_secs(5),
        },
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(2),
        },
    }
}

/// The error a stream ended with.
pub fn last_error(items: &[Result<ModelEvent, ModelError>]) -> ModelError {
    match items.last() {
        Some(Err(err)) => err.clone(),
        other => panic!("expected the stream to end with an error, it ended with {other:?}"),
    }
}
