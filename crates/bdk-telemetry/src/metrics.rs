//! The instruments BDK records (names in [`names`]), and the ones host code adds at run time
//! through the host services (`bdk.host.*`-free: host code picks the whole name, checked by
//! [`check_name`]). Durations are in seconds, as the OpenTelemetry conventions ask.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter};

/// Metric and attribute names.
pub mod names {
    pub const TURN_DURATION: &str = "bdk.turn.duration";
    pub const MODEL_DURATION: &str = "gen_ai.client.operation.duration";
    pub const MODEL_TIME_TO_FIRST_TOKEN: &str = "bdk.model.time_to_first_token";
    pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    pub const COST: &str = "bdk.cost.estimated";
    pub const TOOL_DURATION: &str = "bdk.tool.duration";
    pub const ADMISSIONS: &str = "bdk.admissions";
    pub const ACTORS: &str = "bdk.actors.live";
    pub const RUNNING_TURNS: &str = "bdk.turns.running";
    pub const HOOK_DROPPED: &str = "bdk.hook.dropped";
    pub const STORE_APPEND_DURATION: &str = "bdk.store.append.duration";
    pub const STORE_APPEND_BATCH: &str = "bdk.store.append.batch_size";
    pub const HTTP_DURATION: &str = "http.server.request.duration";

    pub const SESSION_ID: &str = "bdk.session.id";
    pub const TURN_ID: &str = "bdk.turn.id";
    pub const AGENT: &str = "bdk.agent";
    pub const OUTCOME: &str = "bdk.outcome";
    pub const ADMISSION: &str = "bdk.admission";
    pub const HOOK: &str = "bdk.hook";
    pub const GEN_AI_SYSTEM: &str = "gen_ai.system";
    pub const GEN_AI_OPERATION: &str = "gen_ai.operation.name";
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    pub const GEN_AI_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    pub const ERROR_TYPE: &str = "error.type";
}

/// Most distinct metrics host code may create (further names are refused).
pub const MAX_HOST_METRICS: usize = 200;

/// Buckets for durations in seconds (model calls and turns run long).
const SECONDS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Buckets for token counts.
const TOKENS: &[f64] = &[1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0];
/// Buckets for a store append's batch size.
const BATCH: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];

/// What kind of instrument a host metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostKind {
    /// Adds the value (must be >= 0).
    Counter,
    /// Records the value in a distribution.
    Histogram,
    /// Sets the current value.
    Gauge,
}

#[derive(Clone)]
enum HostInstrument {
    Counter(Counter<f64>),
    Histogram(Histogram<f64>),
    Gauge(Gauge<f64>),
}

/// BDK's instruments. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    meter: Meter,
    pub turn_duration: Histogram<f64>,
    pub model_duration: Histogram<f64>,
    pub model_first_token: Histogram<f64>,
    pub token_usage: Histogram<u64>,
    pub cost: Counter<f64>,
    pub tool_duration: Histogram<f64>,
    pub admissions: Counter<u64>,
    pub actors: UpDownCounter<i64>,
    pub running_turns: UpDownCounter<i64>,
    pub hook_dropped: Counter<u64>,
    pub store_append: Histogram<f64>,
    pub store_batch: Histogram<u64>,
    pub http_duration: Histogram<f64>,
    host: Arc<Mutex<HashMap<String, (HostKind, HostInstrument)>>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub fn new(meter: Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(SECONDS.to_vec())
                .build()
        };
        Metrics {
            turn_duration: seconds(names::TURN_DURATION, "Duration of a turn, from admission to its end"),
            model_duration: seconds(names::MODEL_DURATION, "Duration of one model call (one step)"),
            model_first_token: seconds(names::MODEL_TIME_TO_FIRST_TOKEN, "Time from a model call to its first output"),
            token_usage: meter
                .u64_histogram(names::TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Tokens used per model call, by gen_ai.token.type")
                .with_boundaries(TOKENS.to_vec())
                .build(),
            cost: meter
                .f64_counter(names::COST)
                .with_unit("USD")
                .with_description("Estimated cost of model calls")
                .build(),
            tool_duration: seconds(names::TOOL_DURATION, "Duration of a tool call, by tool and outcome"),
            admissions: meter
                .u64_counter(names::ADMISSIONS)
                .with_description("Messages admitted (started, queued, preempted, coalesced) or refused (conflict)")
                .build(),
            actors: meter.i64_up_down_counter(names::ACTORS).with_description("Live session actors").build(),
            running_turns: meter
                .i64_up_down_counter(names::RUNNING_TURNS)
                .with_description("Turns running now (active sessions)")
                .build(),
            hook_dropped: meter
                .u64_counter(names::HOOK_DROPPED)
                .with_description("Hook events dropped because a hook's queue was full")
                .build(),
            store_append: seconds(names::STORE_APPEND_DURATION, "Latency of one durable append to a session log"),
            store_batch: meter
                .u64_histogram(names::STORE_APPEND_BATCH)
                .with_unit("{event}")
                .with_description("Events written by one append")
                .with_boundaries(BATCH.to_vec())
                .build(),
            http_duration: seconds(names::HTTP_DURATION, "Duration of an HTTP request (to its response head)"),
            host: Arc::default(),
            meter,
        }
    }

    /// Records `value` on the host metric `name` of `kind`, creating it on first use.
    pub fn host(&self, kind: HostKind, name: &str, value: f64, attributes: &[KeyValue]) -> Result<(), String> {
        check_name(name)?;
        if !value.is_finite() {
            return Err("the value must be a finite number".into());
        }
        if kind == HostKind::Counter && value < 0.0 {
            return Err("a counter only goes up: the value must be >= 0".into());
        }
        let instrument = {
            let mut host = self.host.lock().unwrap_or_else(PoisonError::into_inner);
            match host.get(name) {
                Some((existing, _)) if *existing != kind => {
                    return Err(format!("`{name}` is already a {existing:?}, not a {kind:?}").to_lowercase());
                }
                Some((_, instrument)) => instrument.clone(),
                None if host.len() >= MAX_HOST_METRICS => {
                    return Err(format!("at most {MAX_HOST_METRICS} host metrics may exist"));
                }
                None => {
                    let owned = name.to_owned();
                    let instrument = match kind {
                        HostKind::Counter => HostInstrument::Counter(self.meter.f64_counter(owned).build()),
                        HostKind::Histogram => HostInstrument::Histogram(self.meter.f64_histogram(owned).build()),
                        HostKind::Gauge => HostInstrument::Gauge(self.meter.f64_gauge(owned).build()),
                    };
                    host.insert(name.to_owned(), (kind, instrument.clone()));
                    instrument
                }
            }
        };
        match instrument {
            HostInstrument::Counter(c) => c.add(value, attributes),
            HostInstrument::Histogram(h) => h.record(value, attributes),
            HostInstrument::Gauge(g) => g.record(value, attributes),
        }
        Ok(())
    }
}

/// A metric or attribute name host code may use: 1-63 characters of `[A-Za-z0-9._-]`, starting
/// with a letter, and not in BDK's own `bdk.` / `gen_ai.` namespaces.
pub fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err(format!("`{name}` is not a valid name: 1-63 of A-Z a-z 0-9 . _ -, starting with a letter"));
    }
    if name.starts_with("bdk.") || name.starts_with("gen_ai.") {
        return Err(format!("`{name}` is in a namespace BDK reserves (bdk., gen_ai.)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Metrics {
        // The API's no-op meter: recording is accepted and dropped.
        Metrics::new(opentelemetry::global::meter("test"))
    }

    #[test]
    fn host_names_are_checked() {
        assert!(check_name("orders.checked").is_ok());
        assert!(check_name("a-b_c.9").is_ok());
        for bad in ["", "9lives", "has space", "bdk.turns", "gen_ai.tokens", &"x".repeat(64), "é"] {
            assert!(check_name(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn a_host_metric_keeps_its_kind_and_counters_only_go_up() {
        let metrics = metrics();
        metrics.host(HostKind::Counter, "orders", 1.0, &[]).unwrap();
        metrics.host(HostKind::Counter, "orders", 2.0, &[KeyValue::new("region", "eu")]).unwrap();
        let error = metrics.host(HostKind::Gauge, "orders", 1.0, &[]).unwrap_err();
        assert!(error.contains("already a counter"), "{error}");
        assert!(metrics.host(HostKind::Counter, "orders", -1.0, &[]).is_err());
        assert!(metrics.host(HostKind::Histogram, "latency", f64::NAN, &[]).is_err());
        metrics.host(HostKind::Gauge, "queue.depth", -3.0, &[]).unwrap();
    }

    #[test]
    fn host_metrics_are_bounded() {
        let metrics = metrics();
        for i in 0..MAX_HOST_METRICS {
            metrics.host(HostKind::Counter, &format!("m{i}"), 1.0, &[]).unwrap();
        }
        assert!(metrics.host(HostKind::Counter, "one.more", 1.0, &[]).is_err());
        // An existing one still records.
        metrics.host(HostKind::Counter, "m0", 1.0, &[]).unwrap();
    }
}
