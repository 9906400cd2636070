//! W3C Trace Context `traceparent` (`00-<trace id>-<span id>-<flags>`): parsing an incoming one
//! into a remote parent, and formatting the current span for an outgoing request or a
//! command's `TRACEPARENT`. Only version `00` is produced; other versions are parsed by their
//! first four fields, as the spec asks.

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState};

/// The HTTP header.
pub const HEADER: &str = "traceparent";
/// The variable a command tool reads.
pub const ENV: &str = "TRACEPARENT";

/// The remote span context `value` names, or `None` when it is not a valid `traceparent`.
pub fn parse(value: &str) -> Option<SpanContext> {
    let value = value.trim();
    let mut parts = value.split('-');
    let version = parts.next()?;
    let trace_id = parts.next()?;
    let span_id = parts.next()?;
    let flags = parts.next()?;
    if version.len() != 2 || version == "ff" || !is_hex(version) {
        return None;
    }
    // Version 00 has exactly four fields; a later version may append more.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    if trace_id.len() != 32 || span_id.len() != 16 || flags.len() != 2 {
        return None;
    }
    if !(is_hex(trace_id) && is_hex(span_id) && is_hex(flags)) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(trace_id, span_id, TraceFlags::new(flags & 1), true, TraceState::NONE);
    context.is_valid().then_some(context)
}

/// `value` as a parent [`Context`], or `None` when it is not a valid `traceparent`.
pub fn parent(value: &str) -> Option<Context> {
    parse(value).map(|span| Context::new().with_remote_span_context(span))
}

/// The `traceparent` of `context`'s span, when it has a valid one.
pub fn format(context: &Context) -> Option<String> {
    let span = context.span();
    let span = span.span_context();
    span.is_valid().then(|| format_span(span))
}

/// The `traceparent` naming `span`.
pub fn format_span(span: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", span.trace_id(), span.span_id(), span.trace_flags().to_u8())
}

/// The `traceparent` of the current context's span (see `opentelemetry::context::FutureExt`).
/// Costs one thread-local read when nothing is traced.
pub fn current() -> Option<String> {
    Context::map_current(format)
}

fn is_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let span = parse(SAMPLE).unwrap();
        assert!(span.is_remote());
        assert!(span.is_sampled());
        assert_eq!(format_span(&span), SAMPLE);
        let context = parent(SAMPLE).unwrap();
        assert_eq!(format(&context).as_deref(), Some(SAMPLE));
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?} parsed");
        }
        // A later version may carry more fields; the first four are read.
        assert!(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra").is_some());
    }

    #[test]
    fn nothing_current_means_no_traceparent() {
        assert_eq!(current(), None);
    }
}
