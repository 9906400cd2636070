//! OpenTelemetry for BDK, in one place. The engine, the server and the tool runner see only
//! [`Telemetry`] (a cheap handle: spans with GenAI attributes, the metric instruments, and host
//! metrics), the W3C `traceparent` helpers in [`traceparent`], and `opentelemetry`'s API
//! `Context`. The OTLP exporters and the Prometheus text endpoint live behind the `otlp`
//! feature (`export`, `prometheus`), which only the binaries turn on: the engine never links
//! an exporter.
//!
//! Telemetry is opt-in. A [`Telemetry::disabled`] handle (the default) makes every call a
//! branch on `None`: no span, no attribute vector, no context lookup, no metric.
//! See `docs/telemetry.md` for what each span and metric means.

pub mod config;
mod handle;
mod metrics;
pub mod traceparent;

#[cfg(feature = "otlp")]
pub mod export;
#[cfg(feature = "otlp")]
pub mod prometheus;

pub use config::{ConfigError, OtelConfig, Protocol, Temporality};
pub use handle::{Span, Telemetry};
pub use metrics::{HostKind, MAX_HOST_METRICS, Metrics, check_name, names};
pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::{Array, Context, KeyValue, StringValue, Value};

/// Errors at this crate's boundary.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An `OTEL_*` variable could not be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An exporter could not be built.
    #[error("cannot build the OTLP {signal} exporter: {message}")]
    Exporter { signal: &'static str, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;
