//! OpenTelemetry end to end: `bdk serve` (a child process) with `OTEL_*` set exports to a test
//! OTLP receiver on 127.0.0.1 that decodes with the OpenTelemetry protobuf definitions (and
//! their JSON mapping for `http/json`). Guards: a turn with a tool call gives the span tree
//! `agent_sdk.http` → `agent_sdk.turn` → (`chat <model>`, `execute_tool <tool>`) with GenAI
//! attributes; a client's `traceparent` is the parent of the request span; the model request
//! and the command tool (`TRACEPARENT`) carry the right span; host tags and metrics arrive;
//! metrics come with the configured temporality; `/metrics` and `/v1/health` tell the truth;
//! with no `OTEL_*` nothing is traced and an inherited `TRACEPARENT` never reaches a tool.
//! One-shot commands: `bdk run` and `bdk eval` flush their spans and metrics before exiting; an
//! MCP tool call over streamable HTTP (a Python SDK server) gets a `tools/call <tool>` client
//! span under `execute_tool`, and the server receives that span as its parent in the
//! `traceparent` header and in `params._meta`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use super::serve::{Server, client, within};
use super::support::bdk;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// OTLP's `AggregationTemporality`.
const DELTA: i32 = 1;
const CUMULATIVE: i32 = 2;

/// One metric as received: its name, its kind, its temporality (0 for a gauge) and its points'
/// attributes.
#[derive(Debug, Clone)]
struct MetricSeen {
    name: String,
    temporality: i32,
    attributes: Vec<Vec<(String, String)>>,
}

#[derive(Debug, Default)]
struct Received {
    spans: Vec<Span>,
    service_names: Vec<String>,
    metrics: Vec<MetricSeen>,
    content_types: Vec<String>,
}

/// The test OTLP/HTTP receiver.
struct Receiver {
    url: String,
    seen: Arc<Mutex<Received>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start() -> Self {
        let seen = Arc::new(Mutex::new(Received::default()));
        let app = axum::Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { url, seen, _task: task }
    }

    /// Waits until `ready` holds for what was received (30 s at most), and returns a copy.
    async fn wait_for(
        &self,
        what: &str,
        ready: impl Fn(&Received) -> bool,
    ) -> (Vec<Span>, Vec<MetricSeen>, Vec<String>) {
        within(what, async {
            loop {
                {
                    let seen = self.seen.lock().unwrap();
                    if ready(&seen) {
                        return (seen.spans.clone(), seen.metrics.clone(), seen.service_names.clone());
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
    }

    fn content_types(&self) -> Vec<String> {
        self.seen.lock().unwrap().content_types.clone()
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"))
}

async fn traces(State(seen): State<Arc<Mutex<Received>>>, headers: HeaderMap, body: Bytes) -> (HeaderMap, Vec<u8>) {
    let json = is_json(&headers);
    let request: ExportTraceServiceRequest =
        if json { serde_json::from_slice(&body).unwrap() } else { ExportTraceServiceRequest::decode(body).unwrap() };
    let mut seen = seen.lock().unwrap();
    seen.content_types.push(content_type(&headers));
    for resource in request.resource_spans {
        if let Some(name) = resource.resource.as_ref().and_then(|r| string_attr(&r.attributes, "service.name")) {
            seen.service_names.push(name);
        }
        for scope in resource.scope_spans {
            seen.spans.extend(scope.spans);
        }
    }
    reply(json)
}

async fn metrics(State(seen): State<Arc<Mutex<Received>>>, headers: HeaderMap, body: Bytes) -> (HeaderMap, Vec<u8>) {
    let json = is_json(&headers);
    let request: ExportMetricsServiceRequest =
        if json { serde_json::from_slice(&body).unwrap() } else { ExportMetricsServiceRequest::decode(body).unwrap() };
    let mut seen = seen.lock().unwrap();
    seen.content_types.push(content_type(&headers));
    for resource in request.resource_metrics {
        for scope in resource.scope_metrics {
            for metric in scope.metrics {
                let (temporality, attributes) = match &metric.data {
                    Some(Data::Histogram(h)) => {
                        (h.aggregation_temporality, h.data_points.iter().map(|p| pairs(&p.attributes)).collect())
                    }
                    Some(Data::Sum(s)) => {
                        (s.aggregation_temporality, s.data_points.iter().map(|p| pairs(&p.attributes)).collect())
                    }
                    Some(Data::Gauge(g)) => (0, g.data_points.iter().map(|p| pairs(&p.attributes)).collect()),
                    _ => (0, Vec::new()),
                };
                seen.metrics.push(MetricSeen { name: metric.name.clone(), temporality, attributes });
            }
        }
    }
    reply(json)
}

fn content_type(headers: &HeaderMap) -> String {
    headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

fn reply(json: bool) -> (HeaderMap, Vec<u8>) {
    let mut headers = HeaderMap::new();
    let kind = if json { "application/json" } else { "application/x-protobuf" };
    headers.insert("content-type", kind.parse().unwrap());
    (headers, if json { b"{}".to_vec() } else { Vec::new() })
}

fn value_text(value: &AnyValue) -> String {
    match value {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        AnyValue::ArrayValue(a) => {
            let items: Vec<String> = a.values.iter().filter_map(|v| v.value.as_ref()).map(value_text).collect();
            format!("[{}]", items.join(","))
        }
        other => format!("{other:?}"),
    }
}

fn pairs(attributes: &[KeyValue]) -> Vec<(String, String)> {
    attributes.iter().filter_map(|kv| Some((kv.key.clone(), value_text(kv.value.as_ref()?.value.as_ref()?)))).collect()
}

fn string_attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    pairs(attributes).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn attr(span: &Span, key: &str) -> Option<String> {
    string_attr(&span.attributes, key)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// A project whose `add` tool (python) tags its session and records a metric through the host
/// services, and answers the sum with the `TRACEPARENT` it was given.
fn write_project(root: &Path, model_url: &str) -> PathBuf {
    let bot = root.join("adder").join("bot");
    std::fs::create_dir_all(bot.join("tools")).unwrap();
    std::fs::create_dir_all(bot.join("lib")).unwrap();
    std::fs::write(
        bot.join("agent.toml"),
        format!(
            "name = \"adder\"\n\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{model_url}\"\n\n\
             [model.pricing]\ninput = 1.0\noutput = 2.0\ncached_input = 0.5\n"
        ),
    )
    .unwrap();
    std::fs::write(bot.join("instructions.md"), "Use the add tool for sums.\n").unwrap();
    std::fs::write(
        bot.join("tools/add.toml"),
        r#"description = "Adds two integers."
effect = "read"
command = ["python3", "lib/add.py"]

[input_schema]
type = "object"
required = ["a", "b"]
properties = { a = { type = "integer" }, b = { type = "integer" } }
"#,
    )
    .unwrap();
    std::fs::write(
        bot.join("lib/add.py"),
        r#"import json, os, sys, urllib.request

def host(path, body):
    request = urllib.request.Request(
        os.environ["BDK_HOST_URL"] + path,
        data=json.dumps(body).encode(),
        headers={"authorization": "Bearer " + os.environ["BDK_HOST_TOKEN"], "content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)

args = json.load(sys.stdin)["input"]
tagged = host("/otel/tag", {"key": "customer.tier", "value": "gold"})
metric = host("/otel/metric", {"name": "orders.checked", "kind": "counter", "value": 2, "attributes": {"region": "eu"}})
json.dump({
    "sum": args["a"] + args["b"],
    "traceparent": os.environ.get("TRACEPARENT"),
    "tagged": tagged["recorded"],
    "metric": metric["recorded"],
}, sys.stdout)
"#,
    )
    .unwrap();
    root.join("adder")
}

/// A tool call, then the answer.
fn push_turn(model: &FakeServer) {
    model.push(Reply::sse(vec![
        oa::role(),
        oa::tool_call(0, Some("call_1"), Some("add"), r#"{"a": 2, "b": 40}"#),
        oa::finish("tool_calls"),
        oa::usage(100, 20, 0, 0),
        oa::done(),
    ]));
    model.push(Reply::sse(vec![
        oa::role(),
        oa::text("42."),
        oa::finish("stop"),
        oa::usage(150, 10, 100, 0),
        oa::done(),
    ]));
}

fn serve(project: &Path, envs: &[(&str, &str)], extra: &[&str]) -> Server {
    let mut command = bdk();
    command.arg("serve").arg("--port").arg("0").args(["--mode", "single", "--dir", project.to_str().unwrap()]);
    command.args(extra);
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
        "OTEL_SDK_DISABLED",
        "TRACEPARENT",
    ] {
        command.env_remove(var);
    }
    Server::launch(command, envs)
}

/// Starts a session (with `traceparent` when given) and reads its stream to `session.waiting`.
async fn run_turn(origin: &str, traceparent: Option<&str>) -> (String, Vec<Value>) {
    let mut request = client().post(format!("{origin}/v1/session")).json(&json!({"message": "What is 2 + 40?"}));
    if let Some(value) = traceparent {
        request = request.header("traceparent", value);
    }
    let response = within("POST /v1/session", request.send()).await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let session = body["sessionId"].as_str().unwrap().to_owned();
    let url = format!("{origin}/v1/session/{session}/stream?startIndex=0");
    let mut response = within("the stream", client().get(url).send()).await.unwrap();
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    within("session.waiting", async {
        loop {
            while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=pos).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                let waiting = event["type"] == "session.waiting";
                events.push(event);
                if waiting {
                    return;
                }
            }
            match response.chunk().await.unwrap() {
                Some(chunk) => buffer.extend_from_slice(&chunk),
                None => panic!("the stream ended early: {events:#?}"),
            }
        }
    })
    .await;
    (session, events)
}

/// The tool's JSON answer, as the stream recorded it.
fn tool_answer(events: &[Value]) -> Value {
    fn find(value: &Value) -> Option<&Value> {
        match value {
            Value::Object(map) if map.contains_key("sum") => Some(value),
            Value::Object(map) => map.values().find_map(find),
            Value::Array(items) => items.iter().find_map(find),
            Value::String(text) if text.contains("\"sum\"") => None,
            _ => None,
        }
    }
    // The result may be recorded as an object or as its JSON text.
    for event in events {
        if let Some(found) = find(event) {
            return found.clone();
        }
        let text = event.to_string();
        if let Some(start) = text.find("{\\\"sum\\\"") {
            let rest = &text[start..];
            let end = rest.find('}').unwrap();
            let unescaped = rest[..=end].replace("\\\"", "\"");
            return serde_json::from_str(&unescaped).unwrap();
        }
    }
    panic!("no tool result with `sum` in {events:#?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_exports_the_span_tree_and_delta_metrics() {
    let receiver = Receiver::start().await;
    let model = FakeServer::start().await;
    push_turn(&model);
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let server = serve(
        &project,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
        ],
        &[],
    );
    let client_parent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let (session, events) = run_turn(&server.origin, Some(&client_parent)).await;

    let (spans, _, services) = receiver
        .wait_for("the turn's spans", |seen| {
            let names: Vec<&str> = seen.spans.iter().map(|s| s.name.as_str()).collect();
            names.contains(&"agent_sdk.turn")
                && names.contains(&"execute_tool add")
                && names.iter().filter(|n| **n == "chat fake-model").count() == 2
        })
        .await;
    assert!(services.iter().all(|s| s == "adder"), "service.name defaults to the agent: {services:?}");
    let in_trace: Vec<Span> = spans.iter().filter(|s| hex(&s.trace_id) == TRACE_ID).cloned().collect();

    // The request span is the client's child; the turn is the request span's child.
    let http = in_trace
        .iter()
        .find(|s| s.name == "agent_sdk.http" && attr(s, "url.path").as_deref() == Some("/v1/session"))
        .unwrap_or_else(|| panic!("no agent_sdk.http span for POST /v1/session in {in_trace:#?}"));
    assert_eq!(hex(&http.parent_span_id), CLIENT_SPAN);
    assert_eq!(attr(http, "http.request.method").as_deref(), Some("POST"));
    assert_eq!(attr(http, "http.response.status_code").as_deref(), Some("200"));
    let turns = named(&in_trace, "agent_sdk.turn");
    assert_eq!(turns.len(), 1, "{in_trace:#?}");
    let turn = turns[0];
    assert_eq!(turn.parent_span_id, http.span_id);
    assert_eq!(attr(turn, "bdk.session.id").as_deref(), Some(session.as_str()));
    assert!(attr(turn, "bdk.turn.id").is_some_and(|t| !t.is_empty()));
    assert_eq!(attr(turn, "bdk.outcome").as_deref(), Some("completed"));
    assert_eq!(attr(turn, "gen_ai.usage.input_tokens").as_deref(), Some("250"));
    assert_eq!(attr(turn, "gen_ai.usage.output_tokens").as_deref(), Some("30"));
    // The tag host code put on the session during the turn.
    assert_eq!(attr(turn, "customer.tier").as_deref(), Some("gold"));

    // Two model calls and the tool call, all under the turn.
    let chats = named(&in_trace, "chat fake-model");
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.parent_span_id, turn.span_id);
        assert_eq!(attr(chat, "gen_ai.system").as_deref(), Some("openai-compatible"));
        assert_eq!(attr(chat, "gen_ai.request.model").as_deref(), Some("fake-model"));
        assert_eq!(attr(chat, "gen_ai.operation.name").as_deref(), Some("chat"));
    }
    let first = chats.iter().find(|c| attr(c, "gen_ai.response.finish_reasons").as_deref() == Some("[tool_calls]"));
    let first = first.unwrap_or_else(|| panic!("no chat span finished with tool_calls: {chats:#?}"));
    assert_eq!(attr(first, "gen_ai.usage.input_tokens").as_deref(), Some("100"));
    assert_eq!(attr(first, "gen_ai.usage.output_tokens").as_deref(), Some("20"));
    assert!(chats.iter().any(|c| attr(c, "gen_ai.response.finish_reasons").as_deref() == Some("[stop]")));
    let tool = named(&in_trace, "execute_tool add")[0];
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(attr(tool, "gen_ai.tool.name").as_deref(), Some("add"));
    let call_id = attr(tool, "gen_ai.tool.call.id").unwrap();
    assert!(events.iter().any(|e| e.to_string().contains(&call_id)), "call id {call_id} is not the stream's");
    assert_eq!(attr(tool, "bdk.outcome").as_deref(), Some("ok"));

    // Each model request named its own call's span.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let value = request.header("traceparent").expect("a traceparent on the model request");
        let parts: Vec<&str> = value.split('-').collect();
        assert_eq!(parts[1], TRACE_ID);
        assert!(chats.iter().any(|c| hex(&c.span_id) == parts[2]), "{value} names no chat span");
    }
    // The command tool ran under its span, and its host calls were recorded.
    let answer = tool_answer(&events);
    assert_eq!(answer["sum"], 42);
    assert_eq!(answer["traceparent"], format!("00-{TRACE_ID}-{}-01", hex(&tool.span_id)));
    assert_eq!((answer["tagged"].clone(), answer["metric"].clone()), (json!(true), json!(true)));

    // Metrics, delta by default, with the host's own.
    let (_, metrics, _) = receiver
        .wait_for("the turn's metrics", |seen| {
            let has = |name: &str| seen.metrics.iter().any(|m| m.name == name);
            has("bdk.turn.duration")
                && has("bdk.tool.duration")
                && has("gen_ai.client.token.usage")
                && has("orders.checked")
        })
        .await;
    for name in [
        "bdk.turn.duration",
        "bdk.tool.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "bdk.admissions",
        "orders.checked",
    ] {
        let metric = metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no {name} in {metrics:#?}"));
        assert_eq!(metric.temporality, DELTA, "{name}");
    }
    let tool_metric = metrics.iter().find(|m| m.name == "bdk.tool.duration").unwrap();
    assert!(
        tool_metric.attributes.iter().any(|a| a.contains(&("gen_ai.tool.name".into(), "add".into()))
            && a.contains(&("bdk.outcome".into(), "ok".into()))),
        "{tool_metric:?}"
    );
    let host_metric = metrics.iter().find(|m| m.name == "orders.checked").unwrap();
    assert!(host_metric.attributes.iter().any(|a| a.contains(&("region".into(), "eu".into()))), "{host_metric:?}");
    assert!(receiver.content_types().iter().all(|c| c == "application/x-protobuf"), "{:?}", receiver.content_types());

    // Health tells what is exported.
    let health: Value =
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["telemetry"]["traces"], true, "{health}");
    assert_eq!(health["telemetry"]["metrics"], true, "{health}");
    assert_eq!(health["telemetry"]["prometheus"], false, "{health}");
    assert!(health["uptimeSeconds"].is_u64() && health["version"].is_string(), "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_cumulative_metrics_and_the_prometheus_endpoint() {
    let receiver = Receiver::start().await;
    let model = FakeServer::start().await;
    push_turn(&model);
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let server = serve(
        &project,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "cumulative"),
            ("OTEL_SERVICE_NAME", "adder-json"),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
        ],
        &["--metrics"],
    );
    let (_, _events) = run_turn(&server.origin, None).await;
    let (spans, metrics, services) = receiver
        .wait_for("spans and metrics over http/json", |seen| {
            seen.spans.iter().any(|s| s.name == "execute_tool add")
                && seen.metrics.iter().any(|m| m.name == "bdk.turn.duration")
        })
        .await;
    assert!(services.iter().all(|s| s == "adder-json"), "{services:?}");
    let turn = spans.iter().find(|s| s.name == "agent_sdk.turn").unwrap();
    let tool = spans.iter().find(|s| s.name == "execute_tool add").unwrap();
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(tool.trace_id, turn.trace_id);
    for name in ["bdk.turn.duration", "bdk.admissions"] {
        let metric = metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no {name}"));
        assert_eq!(metric.temporality, CUMULATIVE, "{name}");
    }
    assert!(receiver.content_types().iter().all(|c| c == "application/json"), "{:?}", receiver.content_types());

    let response = client().get(format!("{}/metrics", server.origin)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = response.text().await.unwrap();
    assert!(text.contains("# TYPE bdk_turn_duration_seconds histogram"), "{text}");
    assert!(text.contains("bdk_admissions_total{bdk_admission=\"started\"} 1"), "{text}");
    assert!(text.contains("orders_checked_total{region=\"eu\"} 2"), "{text}");
    let health: Value =
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["telemetry"]["prometheus"], true, "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_otel_variables_nothing_is_traced_and_no_traceparent_leaks() {
    let model = FakeServer::start().await;
    push_turn(&model);
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    // A TRACEPARENT in the host's own environment must not reach tools.
    let inherited = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let server = serve(&project, &[("TRACEPARENT", inherited.as_str())], &[]);
    let (_, events) = run_turn(&server.origin, Some(&inherited)).await;
    let answer = tool_answer(&events);
    assert_eq!(answer["sum"], 42);
    assert_eq!(answer["traceparent"], Value::Null);
    assert_eq!((answer["tagged"].clone(), answer["metric"].clone()), (json!(false), json!(false)));
    assert!(model.requests().iter().all(|r| r.header("traceparent").is_none()));
    // No /metrics without --metrics; health says telemetry is off, and checks the model on request.
    let response = client().get(format!("{}/metrics", server.origin)).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let url = format!("{}/v1/health?check=model", server.origin);
    let health: Value = client().get(url).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["telemetry"]["traces"], false, "{health}");
    assert_eq!(health["telemetry"]["metrics"], false, "{health}");
    assert_eq!(health["model"]["reachable"], true, "{health}");
    assert_eq!(health["model"]["model"], "fake-model", "{health}");
}

#[test]
fn a_bad_otel_variable_stops_serve_with_its_name() {
    use super::support::OutputWithin as _;
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "http://127.0.0.1:9");
    let output = bdk()
        .args(["serve", "--port", "0", "--mode", "single", "--dir", project.to_str().unwrap()])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
        .output_within();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{stderr}");
    assert!(stderr.contains("http/json"), "{stderr}");
}

/// The `OTEL_*` environment of a one-shot command exporting to `receiver`. The batch delay and
/// the metric interval are far longer than the command runs: what arrives was sent by the flush
/// at exit.
fn one_shot(args: &[&str], receiver: &Receiver) -> std::process::Command {
    let mut command = bdk();
    command.args(args);
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        "OTEL_METRICS_EXPORTER",
        "TRACEPARENT",
        "BDK_MODEL",
        "BDK_MODEL_PROVIDER",
        "BDK_MODEL_BASE_URL",
        "BDK_MODEL_API_KEY",
    ] {
        command.env_remove(var);
    }
    command
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "600000");
    command
}

/// Runs `command` (within the suite's command timeout) off the runtime.
async fn finish(command: std::process::Command) -> std::process::Output {
    use super::support::OutputWithin as _;
    let mut command = command;
    tokio::task::spawn_blocking(move || command.output_within()).await.unwrap()
}

/// An MCP server on the official Python SDK (streamable HTTP at `/mcp`) whose `probe` tool
/// appends what trace context its call carried (the `traceparent` header and
/// `params._meta.traceparent`) to a file, and whose `broken` tool always fails (`isError`).
const PROBE_SERVER: &str = r#"import json, sys
from mcp.server.fastmcp import Context, FastMCP

port, out = int(sys.argv[1]), sys.argv[2]
server = FastMCP("probe", host="127.0.0.1", port=port, log_level="WARNING")

@server.tool()
def probe(ctx: Context) -> str:
    """Reports the trace context of its call."""
    request = ctx.request_context.request
    meta = ctx.request_context.meta
    seen = {
        "header": request.headers.get("traceparent") if request is not None else None,
        "meta": (meta.model_extra or {}).get("traceparent") if meta is not None else None,
    }
    with open(out, "a") as f:
        f.write(json.dumps(seen) + "\n")
    return "probed"

@server.tool()
def broken() -> str:
    """Always fails."""
    raise ValueError("broken on purpose")

server.run(transport="streamable-http")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bdk_run_exports_at_exit_and_an_mcp_call_carries_its_span_to_the_server() {
    let Some(python) = bdk_test_support::peers::require("mcp-python") else { return };
    let receiver = Receiver::start().await;
    let model = FakeServer::start().await;
    model.push(Reply::sse(vec![
        oa::role(),
        oa::tool_call(0, Some("call_1"), Some("probe"), "{}"),
        oa::tool_call(1, Some("call_2"), Some("broken"), "{}"),
        oa::finish("tool_calls"),
        oa::usage(10, 5, 0, 0),
        oa::done(),
    ]));
    model.push(Reply::sse(vec![
        oa::role(),
        oa::text("Probed."),
        oa::finish("stop"),
        oa::usage(20, 3, 0, 0),
        oa::done(),
    ]));
    let root = tempfile::tempdir().unwrap();

    // The MCP server, on a free port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = root.path().join("probe_server.py");
    std::fs::write(&script, PROBE_SERVER).unwrap();
    let seen_file = root.path().join("seen.ndjson");
    let _server = tokio::process::Command::new(python.join("bin/python"))
        .arg(&script)
        .arg(port.to_string())
        .arg(&seen_file)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    within("the MCP server to listen", async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;

    let project = root.path().join("prober");
    std::fs::create_dir_all(project.join("bot/mcp-connections")).unwrap();
    std::fs::write(
        project.join("bot/agent.toml"),
        format!(
            "name = \"prober\"\n\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{}\"\n",
            model.url()
        ),
    )
    .unwrap();
    std::fs::write(project.join("bot/instructions.md"), "Probe when asked.\n").unwrap();
    std::fs::write(
        project.join("bot/mcp-connections/probe.toml"),
        format!("description = \"The probe.\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nadvertise_tools = [\"probe\", \"broken\"]\n"),
    )
    .unwrap();
    let state = root.path().join("state");
    let args = ["run", "--dir", project.to_str().unwrap(), "--message", "Probe.", "--approve", "all", "--state-root"];
    let mut command = one_shot(&args, &receiver);
    command.arg(&state);
    let output = finish(command).await;
    let printed = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{printed}");

    // Everything was flushed before the process exited.
    let (spans, metrics, services) = {
        let seen = receiver.seen.lock().unwrap();
        (seen.spans.clone(), seen.metrics.clone(), seen.service_names.clone())
    };
    assert!(services.iter().all(|s| s == "prober"), "{services:?}");
    let one = |name: &str| -> Span {
        let found = named(&spans, name);
        assert_eq!(found.len(), 1, "one {name} span in {spans:#?}\n{printed}");
        found[0].clone()
    };
    let turn = one("agent_sdk.turn");
    let tool = one("execute_tool probe");
    let mcp = one("tools/call probe");
    assert_eq!(named(&spans, "chat fake-model").len(), 2);
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(mcp.parent_span_id, tool.span_id, "the MCP span is the tool call's child");
    assert_eq!(mcp.trace_id, turn.trace_id);
    assert_eq!(mcp.kind, 3, "a client span");
    assert_eq!(attr(&mcp, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(&mcp, "gen_ai.tool.name").as_deref(), Some("probe"));
    assert_eq!(attr(&mcp, "gen_ai.operation.name").as_deref(), Some("execute_tool"));
    assert_eq!(attr(&mcp, "bdk.mcp.server").as_deref(), Some("probe"));
    assert_eq!(attr(&mcp, "network.transport").as_deref(), Some("tcp"));
    assert_eq!(attr(&mcp, "server.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(attr(&mcp, "server.port"), Some(port.to_string()));
    assert!(attr(&mcp, "mcp.session.id").is_some_and(|s| !s.is_empty()), "{mcp:#?}");
    assert!(attr(&mcp, "mcp.protocol.version").is_some_and(|s| !s.is_empty()), "{mcp:#?}");
    assert!(attr(&mcp, "error.type").is_none(), "{mcp:#?}");
    assert!(metrics.iter().any(|m| m.name == "bdk.turn.duration"), "metrics flushed at exit: {metrics:#?}");
    // A tool that answered `isError`: its MCP span says so.
    let failed = one("tools/call broken");
    assert_eq!(failed.parent_span_id, one("execute_tool broken").span_id);
    assert_eq!(attr(&failed, "error.type").as_deref(), Some("tool_error"));
    assert_eq!(failed.status.as_ref().map(|s| s.code), Some(2), "error status: {failed:#?}");

    // The server saw the MCP span as the parent, in the header and in `_meta`.
    let expected = format!("00-{}-{}-01", hex(&turn.trace_id), hex(&mcp.span_id));
    let seen: Vec<Value> =
        std::fs::read_to_string(&seen_file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(seen, vec![json!({"header": expected, "meta": expected})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bdk_eval_exports_its_attempts_before_exiting() {
    let receiver = Receiver::start().await;
    let model = FakeServer::start().await;
    model.push(Reply::sse(vec![oa::role(), oa::text("yes"), oa::finish("stop"), oa::usage(10, 5, 0, 0), oa::done()]));
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("evalbot");
    std::fs::create_dir_all(project.join("bot")).unwrap();
    std::fs::create_dir_all(project.join("evals")).unwrap();
    std::fs::write(
        project.join("bot/agent.toml"),
        format!("[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{}\"\n", model.url()),
    )
    .unwrap();
    std::fs::write(project.join("bot/instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(project.join("evals/evals.toml"), "max_concurrency = 1\ntimeout = \"20s\"\n").unwrap();
    std::fs::write(
        project.join("evals/smoke.eval.toml"),
        "message = \"Say yes.\"\n[expect]\nreply_includes = [\"yes\"]\n",
    )
    .unwrap();
    let state = root.path().join("state");
    let mut command = one_shot(&["eval", "--dir", project.to_str().unwrap(), "--state-root"], &receiver);
    command.arg(&state);
    let output = finish(command).await;
    let printed = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{printed}");

    let (spans, metrics, services) = {
        let seen = receiver.seen.lock().unwrap();
        (seen.spans.clone(), seen.metrics.clone(), seen.service_names.clone())
    };
    assert!(services.iter().all(|s| s == "evalbot"), "{services:?}");
    let turns = named(&spans, "agent_sdk.turn");
    assert_eq!(turns.len(), 1, "{spans:#?}\n{printed}");
    assert_eq!(attr(turns[0], "bdk.outcome").as_deref(), Some("completed"));
    let chats = named(&spans, "chat fake-model");
    assert_eq!(chats.len(), 1, "{spans:#?}");
    assert_eq!(chats[0].parent_span_id, turns[0].span_id);
    assert!(metrics.iter().any(|m| m.name == "gen_ai.client.token.usage"), "{metrics:#?}");
}

#[test]
fn a_bad_otel_variable_stops_a_one_shot_command_with_its_name() {
    use super::support::OutputWithin as _;
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "http://127.0.0.1:9");
    std::fs::create_dir_all(project.join("evals")).unwrap();
    std::fs::write(project.join("evals/evals.toml"), "max_concurrency = 1\n").unwrap();
    std::fs::write(project.join("evals/smoke.eval.toml"), "message = \"hi\"\n[expect]\nreply_includes = [\"hi\"]\n")
        .unwrap();
    for command in [["run", "--message", "hi"].as_slice(), ["eval"].as_slice()] {
        let output = bdk()
            .args(command)
            .args(["--dir", project.to_str().unwrap(), "--state-root"])
            .arg(root.path().join("state"))
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
            .output_within();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{command:?}: {stderr}");
        assert!(stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{command:?}: {stderr}");
    }
}
