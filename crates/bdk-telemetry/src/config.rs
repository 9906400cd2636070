//! Reading the standard `OTEL_*` variables into an [`OtelConfig`]. It does no IO: a lookup
//! function stands in for the environment, so tests (and `bdk serve`, which passes the process
//! environment) read the same way. No endpoint set means no config: nothing is exported.
//!
//! Honoured: `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL, `/v1/traces` and
//! `/v1/metrics` appended), `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT` (used as written),
//! `OTEL_EXPORTER_OTLP_HEADERS` (URL-encoded `k=v` pairs), `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (`http/protobuf` default, `http/json`; `grpc` warns and falls back), `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` (`delta`
//! default, `cumulative`, `lowmemory`), `OTEL_METRIC_EXPORT_INTERVAL` (ms),
//! `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER` (`none` turns a signal off).

use std::time::Duration;

/// The wire encoding of OTLP over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `http/protobuf`.
    #[default]
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }
}

/// Aggregation temporality of exported metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Temporality {
    /// Each export holds what changed since the last one (the reference's default).
    #[default]
    Delta,
    /// Each export holds the totals since start (Prometheus, Grafana Cloud).
    Cumulative,
    /// Delta for counters and histograms, cumulative for up-down counters.
    LowMemory,
}

impl Temporality {
    pub fn as_str(self) -> &'static str {
        match self {
            Temporality::Delta => "delta",
            Temporality::Cumulative => "cumulative",
            Temporality::LowMemory => "lowmemory",
        }
    }
}

/// The default metric export interval (`OTEL_METRIC_EXPORT_INTERVAL`).
pub const DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);
/// The service name when neither `OTEL_SERVICE_NAME` nor `service.name` is set and the caller
/// has no better one.
pub const DEFAULT_SERVICE_NAME: &str = "bdk";

/// What to export, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// Full URL spans are posted to; `None`: no trace exporter.
    pub traces_endpoint: Option<String>,
    /// Full URL metrics are posted to; `None`: no metric exporter.
    pub metrics_endpoint: Option<String>,
    /// Extra request headers (decoded).
    pub headers: Vec<(String, String)>,
    pub protocol: Protocol,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, decoded, in order (without `service.name`).
    pub resource: Vec<(String, String)>,
    pub temporality: Temporality,
    pub metric_interval: Duration,
    /// Things worth a log line (a `grpc` protocol that fell back, ...).
    pub warnings: Vec<String>,
}

/// A variable that is set but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub value: String,
    pub message: String,
}

impl OtelConfig {
    /// Reads the process environment. `default_service` names the service when nothing else does.
    pub fn from_env(default_service: &str) -> Result<Option<Self>, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok(), default_service)
    }

    /// Reads the variables through `lookup`. `Ok(None)`: telemetry is off (no endpoint, or
    /// `OTEL_SDK_DISABLED=true`, or both signals set to `none`).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        default_service: &str,
    ) -> Result<Option<Self>, ConfigError> {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let base = get("OTEL_EXPORTER_OTLP_ENDPOINT");
        let endpoint = |signal_var: &'static str, path: &str, exporter_var: &'static str| {
            if get(exporter_var).is_some_and(|v| v.eq_ignore_ascii_case("none")) {
                return Ok(None);
            }
            let url = match get(signal_var) {
                Some(url) => Some((signal_var, url)),
                None => base.as_ref().map(|b| ("OTEL_EXPORTER_OTLP_ENDPOINT", join(b, path))),
            };
            match url {
                Some((variable, url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                    Err(ConfigError {
                        variable,
                        value: url,
                        message: "an OTLP/HTTP endpoint must start with http:// or https:// \
                                  (e.g. http://127.0.0.1:4318)"
                            .into(),
                    })
                }
                Some((_, url)) => Ok(Some(url)),
                None => Ok(None),
            }
        };
        let traces_endpoint = endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "v1/traces", "OTEL_TRACES_EXPORTER")?;
        let metrics_endpoint = endpoint("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "v1/metrics", "OTEL_METRICS_EXPORTER")?;
        if traces_endpoint.is_none() && metrics_endpoint.is_none() {
            return Ok(None);
        }
        let mut warnings = Vec::new();
        let protocol = match get("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("http/json") => Protocol::HttpJson,
            Some("grpc") => {
                warnings.push("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported; using http/protobuf".to_owned());
                Protocol::HttpProtobuf
            }
            Some(other) => {
                return Err(ConfigError {
                    variable: "OTEL_EXPORTER_OTLP_PROTOCOL",
                    value: other.to_owned(),
                    message: "use http/protobuf (the default) or http/json".into(),
                });
            }
        };
        let temporality =
            match get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE").map(|v| v.to_ascii_lowercase()).as_deref() {
                None | Some("delta") => Temporality::Delta,
                Some("cumulative") => Temporality::Cumulative,
                Some("lowmemory") => Temporality::LowMemory,
                Some(other) => {
                    return Err(ConfigError {
                        variable: "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
                        value: other.to_owned(),
                        message: "use delta (the default), cumulative or lowmemory".into(),
                    });
                }
            };
        let headers = match get("OTEL_EXPORTER_OTLP_HEADERS") {
            Some(raw) => pairs(&raw).map_err(|message| ConfigError {
                variable: "OTEL_EXPORTER_OTLP_HEADERS",
                value: raw.clone(),
                message,
            })?,
            None => Vec::new(),
        };
        let mut resource = match get("OTEL_RESOURCE_ATTRIBUTES") {
            Some(raw) => pairs(&raw).map_err(|message| ConfigError {
                variable: "OTEL_RESOURCE_ATTRIBUTES",
                value: raw.clone(),
                message,
            })?,
            None => Vec::new(),
        };
        let from_resource = resource.iter().position(|(k, _)| k == "service.name").map(|i| resource.remove(i).1);
        let service_name = get("OTEL_SERVICE_NAME").or(from_resource).unwrap_or_else(|| default_service.to_owned());
        let metric_interval = match get("OTEL_METRIC_EXPORT_INTERVAL") {
            Some(raw) => match raw.parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(ConfigError {
                        variable: "OTEL_METRIC_EXPORT_INTERVAL",
                        value: raw,
                        message: "a positive number of milliseconds (default 60000)".into(),
                    });
                }
            },
            None => DEFAULT_METRIC_INTERVAL,
        };
        Ok(Some(OtelConfig {
            traces_endpoint,
            metrics_endpoint,
            headers,
            protocol,
            service_name,
            resource,
            temporality,
            metric_interval,
            warnings,
        }))
    }
}

/// `base` and `path` with exactly one slash between them.
fn join(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path)
}

/// `k=v,k2=v2`, each side percent-decoded and trimmed.
fn pairs(raw: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("`{item}` is not key=value (pairs are comma-separated, URL-encoded)"));
        };
        let key = decode(key.trim())?;
        if key.is_empty() {
            return Err(format!("`{item}` has an empty key"));
        }
        out.push((key, decode(value.trim())?));
    }
    Ok(out)
}

fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
                return Err(format!("`{text}` has a bad %-escape"));
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<OtelConfig>, ConfigError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        OtelConfig::from_lookup(|name| map.get(name).cloned(), "my-agent")
    }

    #[test]
    fn no_endpoint_means_no_telemetry() {
        assert_eq!(read(&[]).unwrap(), None);
        assert_eq!(read(&[("OTEL_SERVICE_NAME", "x")]).unwrap(), None);
        let disabled = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_SDK_DISABLED", "true")];
        assert_eq!(read(&disabled).unwrap(), None);
    }

    #[test]
    fn the_base_endpoint_gets_signal_paths_and_signal_endpoints_are_used_as_written() {
        let config = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]).unwrap().unwrap();
        assert_eq!(config.traces_endpoint.as_deref(), Some("http://c:4318/v1/traces"));
        assert_eq!(config.metrics_endpoint.as_deref(), Some("http://c:4318/v1/metrics"));
        assert_eq!(config.protocol, Protocol::HttpProtobuf);
        assert_eq!(config.temporality, Temporality::Delta);
        assert_eq!(config.service_name, "my-agent");
        let config = read(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.traces_endpoint.as_deref(), Some("http://t:1/custom"));
        assert_eq!(config.metrics_endpoint, None);
    }

    #[test]
    fn headers_resource_protocol_and_temporality_are_read() {
        let config = read(&[
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://m/v1/metrics"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-team=ops"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=from-resource"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Cumulative"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "250"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.traces_endpoint, None);
        assert_eq!(config.headers, [("api-key".to_owned(), "a b".to_owned()), ("x-team".into(), "ops".into())]);
        assert_eq!(config.resource, [("deployment.environment".to_owned(), "prod".to_owned())]);
        assert_eq!(config.service_name, "from-resource");
        assert_eq!(config.protocol, Protocol::HttpJson);
        assert_eq!(config.temporality, Temporality::Cumulative);
        assert_eq!(config.metric_interval, Duration::from_millis(250));
    }

    #[test]
    fn grpc_falls_back_with_a_warning() {
        let config = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")])
            .unwrap()
            .unwrap();
        assert_eq!(config.protocol, Protocol::HttpProtobuf);
        assert_eq!(config.warnings.len(), 1);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
        for (var, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            ("OTEL_RESOURCE_ATTRIBUTES", "a=%zz"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "soon"),
        ] {
            let error = read(&[base, (var, value)]).unwrap_err();
            assert_eq!(error.variable, var);
        }
        let error = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")]).unwrap_err();
        assert_eq!(error.variable, "OTEL_EXPORTER_OTLP_ENDPOINT");
    }
}
