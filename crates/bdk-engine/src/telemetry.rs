//! What the engine records for OpenTelemetry (see `docs/telemetry.md`): the turn, model-call
//! and tool-call spans with their GenAI attributes, and the engine's metrics. Every function
//! starts with the handle's `None` check, so with telemetry off a turn builds no attribute,
//! reads no clock beyond its own and touches no context. The handle itself is
//! `bdk_telemetry::Telemetry`; the exporters are not the engine's business.

use std::sync::Arc;
use std::time::Instant;

use bdk_model::{FinishReason, Usage as ModelUsage};
use bdk_protocol::{SessionId, TurnId};
use bdk_store::{BoxFuture, EventLog, LogLayer, NewEvent, SharedEvent};
use bdk_telemetry::{Context, HostKind, KeyValue, Span, SpanKind, Telemetry, names};
use bdk_tools::{HostError, ToolOutcome};

/// The span of one turn (the reference's name).
pub const TURN_SPAN: &str = "agent_sdk.turn";
/// The span of one hook delivery.
pub const HOOK_SPAN: &str = "agent_sdk.hook";
/// The span of one schedule firing.
pub const SCHEDULE_SPAN: &str = "agent_sdk.schedule";

/// How a message was admitted (or refused), for `bdk.admissions`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Admission {
    Started,
    FollowedUp,
    Queued,
    Preempted,
    Coalesced,
    Conflict,
}

impl Admission {
    fn as_str(self) -> &'static str {
        match self {
            Admission::Started => "started",
            Admission::FollowedUp => "followed_up",
            Admission::Queued => "queued",
            Admission::Preempted => "preempted",
            Admission::Coalesced => "coalesced",
            Admission::Conflict => "conflict",
        }
    }
}

pub(crate) fn admission(telemetry: &Telemetry, kind: Admission) {
    if let Some(metrics) = telemetry.metrics() {
        metrics.admissions.add(1, &[KeyValue::new(names::ADMISSION, kind.as_str())]);
    }
}

/// A live actor more (`+1`) or fewer (`-1`).
pub(crate) fn actors(telemetry: &Telemetry, delta: i64) {
    if let Some(metrics) = telemetry.metrics() {
        metrics.actors.add(delta, &[]);
    }
}

/// The turn's span, under `parent` (the request that started it, or a subagent call).
pub(crate) fn turn_span(
    telemetry: &Telemetry,
    parent: Option<&Context>,
    agent: &str,
    session: &SessionId,
    turn: &TurnId,
) -> Span {
    if let Some(metrics) = telemetry.metrics() {
        metrics.running_turns.add(1, &[]);
    }
    // A turn with no parent starts its own trace rather than joining whatever is current.
    let root = Context::new();
    telemetry.span(TURN_SPAN, SpanKind::Internal, Some(parent.unwrap_or(&root)), || {
        vec![
            KeyValue::new(names::AGENT, agent.to_owned()),
            KeyValue::new(names::SESSION_ID, session.to_string()),
            KeyValue::new(names::TURN_ID, turn.to_string()),
        ]
    })
}

/// Closes the turn's span and records `bdk.turn.duration`. `outcome`: completed, failed,
/// cancelled; `error` the failure code.
#[allow(clippy::too_many_arguments)]
pub(crate) fn turn_ended(
    telemetry: &Telemetry,
    span: &Span,
    started: Instant,
    model: &str,
    usage: &ModelUsage,
    outcome: &'static str,
    error: Option<(&str, &str)>,
    tags: Vec<KeyValue>,
) {
    if !telemetry.is_enabled() {
        return;
    }
    if let Some(metrics) = telemetry.metrics() {
        metrics.running_turns.add(-1, &[]);
        metrics.turn_duration.record(
            started.elapsed().as_secs_f64(),
            &[KeyValue::new(names::OUTCOME, outcome), KeyValue::new(names::GEN_AI_REQUEST_MODEL, model.to_owned())],
        );
    }
    span.set(|| {
        let mut attributes = vec![
            KeyValue::new(names::OUTCOME, outcome),
            KeyValue::new(names::GEN_AI_REQUEST_MODEL, model.to_owned()),
            KeyValue::new(names::GEN_AI_INPUT_TOKENS, usage.input_tokens as i64),
            KeyValue::new(names::GEN_AI_OUTPUT_TOKENS, usage.output_tokens as i64),
        ];
        attributes.extend(tags);
        attributes
    });
    if let Some((code, message)) = error {
        span.set(|| vec![KeyValue::new(names::ERROR_TYPE, code.to_owned())]);
        span.fail_with(|| message.to_owned());
    }
    span.end();
}

/// One model call's span (`chat <model>`, a client span), under the turn's.
pub(crate) fn model_span(telemetry: &Telemetry, turn: &Span, system: &str, model: &str) -> Span {
    let Some(parent) = turn.context() else { return Span::none() };
    telemetry.span(format!("chat {model}"), SpanKind::Client, Some(parent), || {
        vec![
            KeyValue::new(names::GEN_AI_OPERATION, "chat"),
            KeyValue::new(names::GEN_AI_SYSTEM, system.to_owned()),
            KeyValue::new(names::GEN_AI_REQUEST_MODEL, model.to_owned()),
        ]
    })
}

/// What one model call produced, for its span and metrics.
pub(crate) struct ModelCall<'a> {
    pub system: &'a str,
    pub model: &'a str,
    pub started: Instant,
    pub first_output: Option<Instant>,
    pub usage: &'a ModelUsage,
    pub finish: Option<&'a FinishReason>,
    /// The cost estimate of this call in USD.
    pub cost_usd: f64,
    /// The failure, when the call failed (error type, message).
    pub error: Option<(&'a str, String)>,
}

pub(crate) fn model_ended(telemetry: &Telemetry, span: &Span, call: ModelCall<'_>) {
    if !telemetry.is_enabled() {
        return;
    }
    if let Some(metrics) = telemetry.metrics() {
        let mut attributes = vec![
            KeyValue::new(names::GEN_AI_OPERATION, "chat"),
            KeyValue::new(names::GEN_AI_SYSTEM, call.system.to_owned()),
            KeyValue::new(names::GEN_AI_REQUEST_MODEL, call.model.to_owned()),
        ];
        if let Some(first) = call.first_output {
            metrics.model_first_token.record(first.duration_since(call.started).as_secs_f64(), &attributes);
        }
        metrics.cost.add(call.cost_usd, &attributes[2..]);
        let mut input = attributes.clone();
        input.push(KeyValue::new(names::GEN_AI_TOKEN_TYPE, "input"));
        metrics.token_usage.record(call.usage.input_tokens, &input);
        let mut output = attributes.clone();
        output.push(KeyValue::new(names::GEN_AI_TOKEN_TYPE, "output"));
        metrics.token_usage.record(call.usage.output_tokens, &output);
        if let Some((kind, _)) = &call.error {
            attributes.push(KeyValue::new(names::ERROR_TYPE, (*kind).to_owned()));
        }
        metrics.model_duration.record(call.started.elapsed().as_secs_f64(), &attributes);
    }
    span.set(|| {
        let mut attributes = vec![
            KeyValue::new(names::GEN_AI_INPUT_TOKENS, call.usage.input_tokens as i64),
            KeyValue::new(names::GEN_AI_OUTPUT_TOKENS, call.usage.output_tokens as i64),
        ];
        if let Some(reason) = call.finish {
            let reasons = vec![bdk_telemetry::StringValue::from(finish_name(reason))];
            attributes.push(KeyValue::new(
                names::GEN_AI_FINISH_REASONS,
                bdk_telemetry::Value::Array(bdk_telemetry::Array::String(reasons)),
            ));
        }
        attributes
    });
    if let Some((kind, message)) = call.error {
        span.set(|| vec![KeyValue::new(names::ERROR_TYPE, kind.to_owned())]);
        span.fail(message);
    }
    span.end();
}

/// One tool call's span (`execute_tool <name>`), under the turn's.
pub(crate) fn tool_span(
    telemetry: &Telemetry,
    parent: Option<&Context>,
    name: &str,
    call_id: &str,
    session: &SessionId,
    turn: &TurnId,
) -> Span {
    let Some(parent) = parent else { return Span::none() };
    telemetry.span(format!("execute_tool {name}"), SpanKind::Internal, Some(parent), || {
        vec![
            KeyValue::new(names::GEN_AI_OPERATION, "execute_tool"),
            KeyValue::new(names::GEN_AI_TOOL_NAME, name.to_owned()),
            KeyValue::new(names::GEN_AI_TOOL_CALL_ID, call_id.to_owned()),
            KeyValue::new(names::SESSION_ID, session.to_string()),
            KeyValue::new(names::TURN_ID, turn.to_string()),
        ]
    })
}

pub(crate) fn tool_ended(telemetry: &Telemetry, span: &Span, name: &str, started: Instant, outcome: &ToolOutcome) {
    if !telemetry.is_enabled() {
        return;
    }
    let result = if outcome.is_error { "error" } else { "ok" };
    if let Some(metrics) = telemetry.metrics() {
        metrics.tool_duration.record(
            started.elapsed().as_secs_f64(),
            &[KeyValue::new(names::GEN_AI_TOOL_NAME, name.to_owned()), KeyValue::new(names::OUTCOME, result)],
        );
    }
    span.set(|| vec![KeyValue::new(names::OUTCOME, result)]);
    if outcome.is_error {
        span.fail_with(|| crate::dispatch::result_text(&outcome.result));
    }
    span.end();
}

/// A subagent's span (`invoke_agent <name>`): the child turn's parent.
pub(crate) fn subagent_span(
    telemetry: &Telemetry,
    parent: Option<&Context>,
    input: &serde_json::Value,
    call_id: &str,
) -> Span {
    let Some(parent) = parent else { return Span::none() };
    let name = crate::subagents::named(input);
    telemetry.span(format!("invoke_agent {name}"), SpanKind::Internal, Some(parent), || {
        vec![
            KeyValue::new(names::GEN_AI_OPERATION, "invoke_agent"),
            KeyValue::new(names::GEN_AI_AGENT_NAME, name.clone()),
            KeyValue::new(names::GEN_AI_TOOL_CALL_ID, call_id.to_owned()),
        ]
    })
}

/// One hook delivery's span (a new trace: hooks run after the turn, on their own).
pub(crate) fn hook_span(telemetry: &Telemetry, hook: &str, events: u64) -> Span {
    let root = Context::new();
    telemetry.span(HOOK_SPAN, SpanKind::Producer, Some(&root), || {
        vec![KeyValue::new(names::HOOK, hook.to_owned()), KeyValue::new("bdk.hook.events", events as i64)]
    })
}

pub(crate) fn hook_dropped(telemetry: &Telemetry, hook: &str, count: u64) {
    if let Some(metrics) = telemetry.metrics() {
        metrics.hook_dropped.add(count, &[KeyValue::new(names::HOOK, hook.to_owned())]);
    }
}

/// One schedule firing's span (a new trace; the turn it starts is its child).
pub(crate) fn schedule_span(telemetry: &Telemetry, schedule: &str) -> Span {
    let root = Context::new();
    telemetry.span(SCHEDULE_SPAN, SpanKind::Internal, Some(&root), || {
        vec![KeyValue::new("bdk.schedule", schedule.to_owned())]
    })
}

/// `host.otel` metric: `{name, kind, value, attributes?}`. `Ok(false)`: metrics are off.
pub(crate) fn host_metric(telemetry: &Telemetry, request: &serde_json::Value) -> Result<bool, HostError> {
    let name = request.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
    let kind = match request.get("kind").and_then(serde_json::Value::as_str).unwrap_or("counter") {
        "counter" => HostKind::Counter,
        "histogram" => HostKind::Histogram,
        "gauge" => HostKind::Gauge,
        other => {
            return Err(HostError::invalid(
                "invalid_metric",
                format!("`kind` is `{other}`: use counter (the default), histogram or gauge"),
            ));
        }
    };
    let Some(value) = request.get("value").and_then(serde_json::Value::as_f64) else {
        return Err(HostError::invalid("invalid_metric", "`value` must be a number"));
    };
    let mut attributes = Vec::new();
    match request.get("attributes") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            if map.len() > 16 {
                return Err(HostError::invalid("invalid_metric", "at most 16 attributes"));
            }
            for (key, value) in map {
                bdk_telemetry::check_name(key).map_err(|m| HostError::invalid("invalid_metric", m))?;
                let value = match value {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(_) | serde_json::Value::Bool(_) => value.to_string(),
                    _ => {
                        return Err(HostError::invalid(
                            "invalid_metric",
                            format!("attribute `{key}` must be a string, number or boolean"),
                        ));
                    }
                };
                attributes.push(KeyValue::new(key.clone(), value));
            }
        }
        Some(_) => return Err(HostError::invalid("invalid_metric", "`attributes` must be an object")),
    }
    // Checked even when metrics are off, so a mistake shows in development too.
    bdk_telemetry::check_name(name).map_err(|m| HostError::invalid("invalid_metric", m))?;
    let Some(metrics) = telemetry.metrics() else { return Ok(false) };
    metrics.host(kind, name, value, &attributes).map_err(|m| HostError::invalid("invalid_metric", m))?;
    Ok(true)
}

/// `host.otel` session tag: `{key, value}`. `Ok(false)`: telemetry is off.
pub(crate) fn host_tag(
    telemetry: &Telemetry,
    session: &SessionId,
    request: &serde_json::Value,
) -> Result<bool, HostError> {
    let key = request.get("key").and_then(serde_json::Value::as_str).unwrap_or_default();
    let value = match request.get("value") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v.to_string(),
        _ => return Err(HostError::invalid("invalid_tag", "`value` must be a string, number or boolean")),
    };
    bdk_telemetry::check_name(key).map_err(|m| HostError::invalid("invalid_tag", m))?;
    telemetry.tag_session(session.as_str(), key, &value).map_err(|m| HostError::invalid("invalid_tag", m))
}

pub(crate) fn finish_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// `events` timed: each append records `bdk.store.append.duration` and its batch size. Only
/// wrapped in when metrics are on.
pub(crate) fn timed_log(events: Arc<dyn EventLog>, telemetry: &Telemetry) -> Arc<dyn EventLog> {
    match telemetry.metrics() {
        Some(_) => Arc::new(TimedLog { inner: events, telemetry: telemetry.clone() }),
        None => events,
    }
}

#[derive(Debug)]
struct TimedLog {
    inner: Arc<dyn EventLog>,
    telemetry: Telemetry,
}

impl LogLayer for TimedLog {
    fn inner(&self) -> &Arc<dyn EventLog> {
        &self.inner
    }

    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: Option<bdk_store::SessionRecord>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            let count = events.len() as u64;
            let started = Instant::now();
            let result = bdk_store::append_to(self.inner.as_ref(), session, events, record).await;
            if let Some(metrics) = self.telemetry.metrics() {
                let outcome = [KeyValue::new(names::OUTCOME, if result.is_ok() { "ok" } else { "error" })];
                metrics.store_append.record(started.elapsed().as_secs_f64(), &outcome);
                metrics.store_batch.record(count, &[]);
            }
            result
        })
    }
}
