//! [`Telemetry`], the handle the engine and server hold, and [`Span`], one started span.
//! Both are `Option`s inside: when telemetry is off every method returns at the first branch,
//! and the attribute closures are never called.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::context::FutureExt as _;
use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::Meter;
use opentelemetry::trace::{Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use crate::metrics::Metrics;

/// Spans and metrics, or nothing. Cheap to clone; [`Default`] is [`Telemetry::disabled`].
#[derive(Clone, Default)]
pub struct Telemetry {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    tracer: Option<BoxedTracer>,
    metrics: Option<Metrics>,
    /// What is exported where, for `/v1/health` and the startup log.
    summary: String,
    /// Tags host code put on sessions (`host.otel`), added to their turn spans.
    tags: Mutex<HashMap<String, Vec<(String, String)>>>,
}

/// Most sessions with tags held at once (past it, the oldest-tagged are not tracked: all are
/// forgotten and tagging starts over, as a bounded cache would).
pub const MAX_TAGGED_SESSIONS: usize = 10_000;
/// Most tags on one session.
pub const MAX_TAGS: usize = 32;

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            None => f.write_str("Telemetry(disabled)"),
            Some(inner) => write!(f, "Telemetry({})", inner.summary),
        }
    }
}

impl Telemetry {
    /// No spans, no metrics.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Spans from `tracer` and metrics on `meter` (either may be absent). `summary` says what
    /// is exported where (shown by `/v1/health`). Any OpenTelemetry SDK can stand behind them;
    /// `export::install` builds the OTLP one.
    pub fn new(tracer: Option<BoxedTracer>, meter: Option<Meter>, summary: impl Into<String>) -> Self {
        if tracer.is_none() && meter.is_none() {
            return Self::disabled();
        }
        let metrics = meter.map(Metrics::new);
        Self { inner: Some(Arc::new(Inner { tracer, metrics, summary: summary.into(), tags: Mutex::default() })) }
    }

    /// Whether anything is recorded at all.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether spans are recorded.
    pub fn traces(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.tracer.is_some())
    }

    /// The instruments, when metrics are recorded.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.inner.as_ref()?.metrics.as_ref()
    }

    /// What is exported where (`None`: disabled).
    pub fn summary(&self) -> Option<&str> {
        self.inner.as_ref().map(|i| i.summary.as_str())
    }

    /// Tags `session` with `key = value` (replacing an earlier value of `key`); later turn
    /// spans of the session carry it. `Ok(false)`: telemetry is off, nothing was kept.
    pub fn tag_session(&self, session: &str, key: &str, value: &str) -> Result<bool, String> {
        crate::metrics::check_name(key)?;
        if value.len() > 256 {
            return Err("a tag value is at most 256 bytes".into());
        }
        let Some(inner) = &self.inner else { return Ok(false) };
        let mut tags = inner.tags.lock().unwrap_or_else(PoisonError::into_inner);
        if !tags.contains_key(session) && tags.len() >= MAX_TAGGED_SESSIONS {
            tags.clear();
        }
        let list = tags.entry(session.to_owned()).or_default();
        let full = list.len() >= MAX_TAGS;
        match list.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.to_owned(),
            None if full => return Err(format!("a session holds at most {MAX_TAGS} tags")),
            None => list.push((key.to_owned(), value.to_owned())),
        }
        Ok(true)
    }

    /// The tags of `session`, as attributes.
    pub fn session_tags(&self, session: &str) -> Vec<KeyValue> {
        let Some(inner) = &self.inner else { return Vec::new() };
        let tags = inner.tags.lock().unwrap_or_else(PoisonError::into_inner);
        tags.get(session)
            .map(|l| l.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Drops the tags of a session that is no longer live.
    pub fn forget_session(&self, session: &str) {
        if let Some(inner) = &self.inner {
            inner.tags.lock().unwrap_or_else(PoisonError::into_inner).remove(session);
        }
    }

    /// The current context, when spans are recorded (the parent a call made from here should
    /// carry to another task). `None` costs nothing.
    pub fn current(&self) -> Option<Context> {
        self.traces().then(Context::current)
    }

    /// Starts a span under `parent` (`None`: the current context, which may be empty: a new
    /// trace). `attributes` runs only when spans are recorded.
    pub fn span(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: opentelemetry::trace::SpanKind,
        parent: Option<&Context>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        let Some(tracer) = self.inner.as_ref().and_then(|i| i.tracer.as_ref()) else {
            return Span::none();
        };
        let current;
        let parent = match parent {
            Some(parent) => parent,
            None => {
                current = Context::current();
                &current
            }
        };
        let span =
            tracer.span_builder(name).with_kind(kind).with_attributes(attributes()).start_with_context(tracer, parent);
        // The handle rides in the span's context, so code that runs under it (an MCP call made
        // inside a tool call) can start child spans without being handed the handle.
        Span(Some(parent.with_span(span).with_value(self.clone())))
    }

    /// The handle whose span is current (see [`Span::run`]), or a disabled one when no span
    /// of ours is current. Costs one thread-local read when nothing is traced.
    pub fn current_handle() -> Telemetry {
        Context::map_current(|cx| cx.get::<Telemetry>().cloned()).unwrap_or_default()
    }
}

/// A started span (or none). Ends when [`Span::end`] is called, or when the last clone of its
/// context is dropped.
#[derive(Debug, Clone, Default)]
pub struct Span(Option<Context>);

impl Span {
    /// No span: every method does nothing.
    pub fn none() -> Self {
        Self(None)
    }

    /// The context with this span current: the parent of spans started under it.
    pub fn context(&self) -> Option<&Context> {
        self.0.as_ref()
    }

    pub fn is_recording(&self) -> bool {
        self.0.is_some()
    }

    /// Adds attributes (`attributes` runs only for a real span).
    pub fn set(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// Marks the span failed, with `message`.
    pub fn fail(&self, message: impl Into<Cow<'static, str>>) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(message));
        }
    }

    /// Marks the span failed with a message built only for a real span.
    pub fn fail_with(&self, message: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(message()));
        }
    }

    /// Ends the span now.
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }

    /// Runs `future` with this span current on every poll (so code under it, such as an
    /// outgoing request's `traceparent`, sees it). Without a span, just awaits it.
    pub async fn run<F: Future>(&self, future: F) -> F::Output {
        match &self.0 {
            Some(cx) => future.with_context(cx.clone()).await,
            None => future.await,
        }
    }

    /// Makes this span current until the guard drops. The guard is not `Send`: use it only
    /// around synchronous code (for async code, [`Span::run`]).
    pub fn enter(&self) -> Option<opentelemetry::ContextGuard> {
        self.0.as_ref().map(|cx| cx.clone().attach())
    }

    /// This span's `traceparent`.
    pub fn traceparent(&self) -> Option<String> {
        self.0.as_ref().and_then(crate::traceparent::format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> Telemetry {
        Telemetry::new(None, Some(opentelemetry::global::meter("test")), "test")
    }

    #[test]
    fn a_disabled_handle_records_nothing_and_never_calls_the_closures() {
        let telemetry = Telemetry::disabled();
        assert!(!telemetry.is_enabled() && !telemetry.traces() && telemetry.metrics().is_none());
        let span = telemetry.span("x", opentelemetry::trace::SpanKind::Internal, None, || panic!("built attributes"));
        assert!(!span.is_recording());
        span.set(|| panic!("built attributes"));
        span.fail_with(|| panic!("built a message"));
        assert!(telemetry.current().is_none());
        assert!(!Telemetry::current_handle().is_enabled());
        assert_eq!(telemetry.tag_session("s", "tier", "gold"), Ok(false));
        assert!(telemetry.session_tags("s").is_empty());
    }

    #[test]
    fn a_span_carries_its_handle_to_code_run_under_it() {
        let tracer = opentelemetry::global::tracer("test");
        let telemetry = Telemetry::new(Some(tracer), None, "test");
        assert!(!Telemetry::current_handle().is_enabled());
        let span = telemetry.span("outer", opentelemetry::trace::SpanKind::Internal, None, Vec::new);
        let _current = span.enter();
        let found = Telemetry::current_handle();
        assert!(found.traces());
        assert_eq!(found.summary(), Some("test"));
    }

    #[test]
    fn session_tags_replace_by_key_are_bounded_and_forgotten() {
        let telemetry = enabled();
        assert_eq!(telemetry.tag_session("s1", "tier", "silver"), Ok(true));
        assert_eq!(telemetry.tag_session("s1", "tier", "gold"), Ok(true));
        assert_eq!(telemetry.session_tags("s1"), vec![KeyValue::new("tier", "gold")]);
        assert!(telemetry.tag_session("s1", "bdk.session", "x").is_err());
        assert!(telemetry.tag_session("s1", "big", &"v".repeat(257)).is_err());
        for i in 1..MAX_TAGS {
            telemetry.tag_session("s1", &format!("k{i}"), "v").unwrap();
        }
        assert!(telemetry.tag_session("s1", "one.more", "v").is_err());
        telemetry.forget_session("s1");
        assert!(telemetry.session_tags("s1").is_empty());
    }
}
