//! The Prometheus text exposition (`GET /metrics`, off by default): a cumulative manual reader
//! on the same meter provider as the OTLP exporter, rendered in text format 0.0.4 on each scrape.

use std::fmt::{Display, Write as _};
use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the current metrics. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prometheus {
    reader: Arc<ManualReader>,
}

impl Prometheus {
    pub(crate) fn new(reader: Arc<ManualReader>) -> Self {
        Self { reader }
    }

    /// Every metric, in the text format.
    pub fn render(&self) -> Result<String, String> {
        let mut metrics = ResourceMetrics::default();
        self.reader.collect(&mut metrics).map_err(|e| e.to_string())?;
        let mut out = String::new();
        for scope in metrics.scope_metrics() {
            for metric in scope.metrics() {
                encode(&mut out, metric);
            }
        }
        Ok(out)
    }
}

/// The manual reader, shared between the provider and [`Prometheus`].
#[derive(Debug)]
pub(crate) struct SharedReader(pub Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

fn encode(out: &mut String, metric: &Metric) {
    let base = sanitize(metric.name());
    let base = match metric.unit() {
        "s" => format!("{base}_seconds"),
        "USD" => format!("{base}_usd"),
        _ => base,
    };
    match metric.data() {
        AggregatedMetrics::F64(data) => encode_data(out, &base, metric.description(), data),
        AggregatedMetrics::U64(data) => encode_data(out, &base, metric.description(), data),
        AggregatedMetrics::I64(data) => encode_data(out, &base, metric.description(), data),
    }
}

fn encode_data<T: Copy + Display>(out: &mut String, base: &str, help: &str, data: &MetricData<T>) {
    match data {
        MetricData::Gauge(gauge) => {
            header(out, base, help, "gauge");
            for point in gauge.data_points() {
                let _ = writeln!(out, "{base}{} {}", labels(point.attributes(), None), point.value());
            }
        }
        MetricData::Sum(sum) => {
            let name = if sum.is_monotonic() { format!("{base}_total") } else { base.to_owned() };
            header(out, &name, help, if sum.is_monotonic() { "counter" } else { "gauge" });
            for point in sum.data_points() {
                let _ = writeln!(out, "{name}{} {}", labels(point.attributes(), None), point.value());
            }
        }
        MetricData::Histogram(histogram) => {
            header(out, base, help, "histogram");
            for point in histogram.data_points() {
                let mut cumulative = 0u64;
                for (bound, count) in point.bounds().zip(point.bucket_counts()) {
                    cumulative += count;
                    let le = format!("{bound}");
                    let _ = writeln!(out, "{base}_bucket{} {cumulative}", labels(point.attributes(), Some(&le)));
                }
                let _ = writeln!(out, "{base}_bucket{} {}", labels(point.attributes(), Some("+Inf")), point.count());
                let _ = writeln!(out, "{base}_sum{} {}", labels(point.attributes(), None), point.sum());
                let _ = writeln!(out, "{base}_count{} {}", labels(point.attributes(), None), point.count());
            }
        }
        // Not produced by BDK's instruments (no exponential histogram views).
        MetricData::ExponentialHistogram(_) => {}
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    if !help.is_empty() {
        let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
    }
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn labels<'a>(attributes: impl Iterator<Item = &'a opentelemetry::KeyValue>, le: Option<&str>) -> String {
    let mut parts: Vec<String> =
        attributes.map(|kv| format!("{}=\"{}\"", sanitize(kv.key.as_str()), escape(&kv.value.to_string()))).collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

/// A Prometheus name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, every other character an underscore.
fn sanitize(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' }).collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use opentelemetry::KeyValue;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::SdkMeterProvider;

    use super::*;

    #[test]
    fn counters_gauges_and_histograms_render_in_the_text_format() {
        let reader = Arc::new(ManualReader::builder().with_temporality(Temporality::Cumulative).build());
        let provider = SdkMeterProvider::builder().with_reader(SharedReader(reader.clone())).build();
        let meter = provider.meter("bdk");
        let counter = meter.u64_counter("bdk.admissions").with_description("Admitted").build();
        counter.add(2, &[KeyValue::new("bdk.admission", "started")]);
        counter.add(1, &[KeyValue::new("bdk.admission", "started")]);
        let running = meter.i64_up_down_counter("bdk.turns.running").build();
        running.add(1, &[]);
        let histogram = meter.f64_histogram("bdk.tool.duration").with_unit("s").with_boundaries(vec![0.1, 1.0]).build();
        histogram.record(0.05, &[KeyValue::new("gen_ai.tool.name", "a\"b")]);
        histogram.record(0.5, &[KeyValue::new("gen_ai.tool.name", "a\"b")]);
        let text = Prometheus::new(reader).render().unwrap();
        assert!(text.contains("# TYPE bdk_admissions_total counter\n"), "{text}");
        assert!(text.contains("bdk_admissions_total{bdk_admission=\"started\"} 3\n"), "{text}");
        assert!(text.contains("# TYPE bdk_turns_running gauge\nbdk_turns_running 1\n"), "{text}");
        assert!(
            text.contains("bdk_tool_duration_seconds_bucket{gen_ai_tool_name=\"a\\\"b\",le=\"0.1\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("bdk_tool_duration_seconds_bucket{gen_ai_tool_name=\"a\\\"b\",le=\"1\"} 2\n"), "{text}");
        assert!(
            text.contains("bdk_tool_duration_seconds_bucket{gen_ai_tool_name=\"a\\\"b\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("bdk_tool_duration_seconds_count{gen_ai_tool_name=\"a\\\"b\"} 2\n"), "{text}");
    }
}
