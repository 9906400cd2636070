//! The retry wrapper, driven by the scripted provider: retryable failures before any output
//! are retried, failures after output and fatal ones are not, and cancellation cuts a backoff.

use std::sync::Arc;
use std::time::Duration;

use bdk_model::{
    Message, ModelError, ModelProvider, ModelRequest, RetryPolicy, Retrying, ScriptStep, ScriptedProvider,
};
use tokio_util::sync::CancellationToken;

use super::support::{collect, events, last_error, text_of};

fn quick(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
    }
}

fn server_error() -> ModelError {
    ModelError::Server { status: 502, message: "bad gateway".into() }
}

#[tokio::test]
async fn retries_until_success() {
    let inner = Arc::new(ScriptedProvider::new(vec![
        ScriptStep::error(server_error()),
        ScriptStep::error(ModelError::Network { message: "reset".into() }),
        ScriptStep::text("finally"),
    ]));
    let provider = Retrying::new(inner.clone(), quick(3));
    let request = ModelRequest {
        system: Some("be brief".into()),
        messages: vec![Message::user("a long conversation"), Message::assistant("so far")].into(),
        ..Default::default()
    };
    let events = events(provider.stream(request.clone(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "finally");
    let requests = inner.requests();
    assert_eq!(requests.len(), 3);
    // Each attempt sends the caller's request itself, not a copy of its conversation.
    for attempt in &requests {
        assert_eq!(attempt, &request);
        assert!(attempt.messages.extends(&request.messages) && request.messages.extends(&attempt.messages));
        assert!(Arc::ptr_eq(attempt.system.as_ref().unwrap(), request.system.as_ref().unwrap()));
    }
}

#[tokio::test]
async fn gives_up_after_max_retries() {
    let inner = Arc::new(ScriptedProvider::new(vec![ScriptStep::error(server_error()); 5]));
    let provider = Retrying::new(inner.clone(), quick(2));
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(last_error(&items), server_error());
    assert_eq!(inner.requests().len(), 3);
}

#[tokio::test]
async fn never_retries_after_output() {
    let broken = ScriptStep { text: Some("partial".into()), error: Some(server_error()), ..Default::default() };
    let inner = Arc::new(ScriptedProvider::new(vec![broken, ScriptStep::text("again")]));
    let provider = Retrying::new(inner.clone(), quick(3));
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(items.len(), 2);
    assert_eq!(last_error(&items), server_error());
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test]
async fn fatal_errors_are_not_retried() {
    let inner = Arc::new(ScriptedProvider::new(vec![
        ScriptStep::error(ModelError::ContextLengthExceeded { message: "too long".into() }),
        ScriptStep::text("unreachable"),
    ]));
    let provider = Retrying::new(inner.clone(), quick(3));
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(last_error(&items).code(), "context_length_exceeded");
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test]
async fn cancellation_cuts_the_backoff() {
    let limited = ModelError::RateLimited { message: "wait".into(), retry_after: Some(Duration::from_secs(30)) };
    let inner = Arc::new(ScriptedProvider::new(vec![ScriptStep::error(limited), ScriptStep::text("late")]));
    let policy = RetryPolicy { max_retry_after: Duration::from_secs(60), ..quick(3) };
    let provider = Retrying::new(inner, policy);
    let cancel = CancellationToken::new();
    let stream = provider.stream(ModelRequest::default(), cancel.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let items = collect(stream).await;
    assert_eq!(last_error(&items), ModelError::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
    canceller.await.unwrap();
}
