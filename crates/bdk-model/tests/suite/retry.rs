//! The retry wrapper, driven by the scripted provider: retryable failures before any output
//! are retried after the policy's backoff (or the server's `retry-after`), failures after output
//! and fatal ones are not, and cancellation cuts a backoff.
//!
//! Each test runs on tokio's paused clock, so the real default backoffs (hundreds of
//! milliseconds to seconds) pass at once, and each wait is measured exactly on that clock: a
//! loaded machine changes neither the order of events nor the figures.

use std::sync::Arc;
use std::time::Duration;

use bdk_model::{
    Message, ModelError, ModelProvider, ModelRequest, RetryPolicy, Retrying, ScriptStep, ScriptedProvider,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::support::{collect, events, last_error, text_of};

/// The default policy (500 ms doubling, with equal jitter) with `max_retries`.
fn policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, ..RetryPolicy::default() }
}

fn server_error() -> ModelError {
    ModelError::Server { status: 502, message: "bad gateway".into() }
}

#[tokio::test(start_paused = true)]
async fn retries_until_success() {
    let inner = Arc::new(ScriptedProvider::new(vec![
        ScriptStep::error(server_error()),
        ScriptStep::error(ModelError::Network { message: "reset".into() }),
        ScriptStep::text("finally"),
    ]));
    let provider = Retrying::new(inner.clone(), policy(3));
    let request = ModelRequest {
        system: Some("be brief".into()),
        messages: vec![Message::user("a long conversation"), Message::assistant("so far")].into(),
        ..Default::default()
    };
    let started = Instant::now();
    let events = events(provider.stream(request.clone(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "finally");
    // 250..=500 ms, then 500..=1000 ms.
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(750) && waited <= Duration::from_millis(1500), "{waited:?}");
    let requests = inner.requests();
    assert_eq!(requests.len(), 3);
    // Each attempt sends the caller's request itself, not a copy of its conversation.
    for attempt in &requests {
        assert_eq!(attempt, &request);
        assert!(attempt.messages.extends(&request.messages) && request.messages.extends(&attempt.messages));
        assert!(Arc::ptr_eq(attempt.system.as_ref().unwrap(), request.system.as_ref().unwrap()));
    }
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_retries() {
    let inner = Arc::new(ScriptedProvider::new(vec![ScriptStep::error(server_error()); 5]));
    let provider = Retrying::new(inner.clone(), policy(2));
    let started = Instant::now();
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(last_error(&items), server_error());
    assert_eq!(inner.requests().len(), 3);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(750) && waited <= Duration::from_millis(1500), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn never_retries_after_output() {
    let broken = ScriptStep { text: Some("partial".into()), error: Some(server_error()), ..Default::default() };
    let inner = Arc::new(ScriptedProvider::new(vec![broken, ScriptStep::text("again")]));
    let provider = Retrying::new(inner.clone(), policy(3));
    let started = Instant::now();
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "no backoff");
    assert_eq!(items.len(), 2);
    assert_eq!(last_error(&items), server_error());
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn fatal_errors_are_not_retried() {
    let inner = Arc::new(ScriptedProvider::new(vec![
        ScriptStep::error(ModelError::ContextLengthExceeded { message: "too long".into() }),
        ScriptStep::text("unreachable"),
    ]));
    let provider = Retrying::new(inner.clone(), policy(3));
    let started = Instant::now();
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "no backoff");
    assert_eq!(last_error(&items).code(), "context_length_exceeded");
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_servers_retry_after_is_waited_for_exactly() {
    let limited = ModelError::RateLimited { message: "wait".into(), retry_after: Some(Duration::from_secs(7)) };
    let inner = Arc::new(ScriptedProvider::new(vec![ScriptStep::error(limited), ScriptStep::text("later")]));
    let provider = Retrying::new(inner.clone(), policy(3));
    let started = Instant::now();
    let events = events(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "later");
    assert_eq!(started.elapsed(), Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn cancellation_cuts_the_backoff() {
    let limited = ModelError::RateLimited { message: "wait".into(), retry_after: Some(Duration::from_secs(30)) };
    let inner = Arc::new(ScriptedProvider::new(vec![ScriptStep::error(limited), ScriptStep::text("late")]));
    let provider = Retrying::new(inner.clone(), policy(3));
    let cancel = CancellationToken::new();
    let stream = provider.stream(ModelRequest::default(), cancel.clone());
    // The paused clock only moves when every task waits: by the time this sleep ends, the
    // stream is waiting out its 30 s backoff.
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let items = collect(stream).await;
    assert_eq!(last_error(&items), ModelError::Cancelled);
    assert_eq!(started.elapsed(), Duration::from_millis(50), "cancelled mid-backoff, not after it");
    assert_eq!(inner.requests().len(), 1);
    canceller.await.unwrap();
}
