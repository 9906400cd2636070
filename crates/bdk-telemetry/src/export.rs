//! The OTLP/HTTP exporters (feature `otlp`): [`install`] turns an [`OtelConfig`] into SDK
//! providers with batch span export and periodic metric export, and hands back the
//! [`Telemetry`] handle over them. Spans and metrics use the blocking reqwest client on the
//! SDK's own background threads, so export never runs on the server's runtime.

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry::KeyValue;
use opentelemetry::global::BoxedTracer;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{ManualReader, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::config::{OtelConfig, Protocol, Temporality};
use crate::prometheus::{Prometheus, SharedReader};
use crate::{Error, Result, Telemetry};

/// The instrumentation scope of every span and metric.
pub const SCOPE: &str = "bdk";

/// Installed providers. Keep it for the life of the process and call [`Installed::shutdown`]
/// at the end, so the last spans and metrics are sent.
#[derive(Debug, Default)]
pub struct Installed {
    pub telemetry: Telemetry,
    /// The `/metrics` renderer, when asked for.
    pub prometheus: Option<Prometheus>,
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Installed {
    /// Flushes and stops the exporters. Errors are logged, not returned: the process is ending.
    pub fn shutdown(&self) {
        if let Some(tracer) = &self.tracer
            && let Err(error) = tracer.shutdown()
        {
            tracing::warn!(%error, "telemetry: the span exporter did not shut down cleanly");
        }
        if let Some(meter) = &self.meter
            && let Err(error) = meter.shutdown()
        {
            tracing::warn!(%error, "telemetry: the metric exporter did not shut down cleanly");
        }
    }
}

/// Builds the exporters `config` asks for (none for `None`), plus a Prometheus reader when
/// `prometheus` is set. `version` is reported as `service.version`.
pub fn install(config: Option<&OtelConfig>, prometheus: bool, version: &str) -> Result<Installed> {
    if config.is_none() && !prometheus {
        return Ok(Installed::default());
    }
    let resource = resource(config, version);
    let mut summary = Vec::new();
    let tracer = match config.and_then(|c| c.traces_endpoint.as_ref().map(|url| (c, url))) {
        Some((config, url)) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(url.clone())
                .with_protocol(protocol(config.protocol))
                .with_headers(headers(config))
                .build()
                .map_err(|e| Error::Exporter { signal: "span", message: e.to_string() })?;
            summary.push(format!("traces to {url} ({})", config.protocol.as_str()));
            Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource.clone()).build())
        }
        None => None,
    };
    let mut meter_builder = SdkMeterProvider::builder().with_resource(resource);
    let mut meters = false;
    if let Some((config, url)) = config.and_then(|c| c.metrics_endpoint.as_ref().map(|url| (c, url))) {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_temporality(temporality(config.temporality))
            .with_endpoint(url.clone())
            .with_protocol(protocol(config.protocol))
            .with_headers(headers(config))
            .build()
            .map_err(|e| Error::Exporter { signal: "metric", message: e.to_string() })?;
        let reader = PeriodicReader::builder(exporter).with_interval(config.metric_interval).build();
        meter_builder = meter_builder.with_reader(reader);
        meters = true;
        summary.push(format!(
            "metrics to {url} ({}, {}, every {}s)",
            config.protocol.as_str(),
            config.temporality.as_str(),
            config.metric_interval.as_secs_f64()
        ));
    }
    let mut scrape = None;
    if prometheus {
        let reader = Arc::new(
            ManualReader::builder().with_temporality(opentelemetry_sdk::metrics::Temporality::Cumulative).build(),
        );
        meter_builder = meter_builder.with_reader(SharedReader(reader.clone()));
        scrape = Some(Prometheus::new(reader));
        meters = true;
        summary.push("metrics at /metrics".to_owned());
    }
    let meter = meters.then(|| meter_builder.build());
    let telemetry = Telemetry::new(
        tracer.as_ref().map(|p| BoxedTracer::new(Box::new(p.tracer(SCOPE)))),
        meter.as_ref().map(|p| p.meter(SCOPE)),
        summary.join("; "),
    );
    Ok(Installed { telemetry, prometheus: scrape, tracer, meter })
}

fn resource(config: Option<&OtelConfig>, version: &str) -> Resource {
    let name = config.map_or(crate::config::DEFAULT_SERVICE_NAME, |c| c.service_name.as_str()).to_owned();
    let mut attributes = vec![KeyValue::new("service.version", version.to_owned())];
    if let Some(config) = config {
        attributes.extend(config.resource.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())));
    }
    Resource::builder_empty().with_service_name(name).with_attributes(attributes).build()
}

fn headers(config: &OtelConfig) -> HashMap<String, String> {
    config.headers.iter().cloned().collect()
}

fn protocol(protocol: Protocol) -> opentelemetry_otlp::Protocol {
    match protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::Protocol::HttpBinary,
        Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
    }
}

fn temporality(temporality: Temporality) -> opentelemetry_sdk::metrics::Temporality {
    match temporality {
        Temporality::Delta => opentelemetry_sdk::metrics::Temporality::Delta,
        Temporality::Cumulative => opentelemetry_sdk::metrics::Temporality::Cumulative,
        Temporality::LowMemory => opentelemetry_sdk::metrics::Temporality::LowMemory,
    }
}
