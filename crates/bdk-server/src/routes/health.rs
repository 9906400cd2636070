//! `GET /v1/health`: liveness, no auth. The host-level one (multi-agent layout) lives in `host`.
//!
//! Besides `status`, it tells an operator what they need (the [`Operator`] group): the version
//! and uptime, the telemetry export, each agent's schedules, and, with `?check=model`, whether
//! the model provider answers at all (one request to its base URL, a few seconds at most).
//!
//! Always 200 while the process answers (it is a liveness check: restarting the host does not
//! fix a full disk, and reads still work). When the state store refuses writes, `status` is
//! `degraded` and `store` says why; both go back by themselves once a probe write succeeds.

use std::time::Duration;

use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};

use crate::routes::OkJson;
use crate::state::{Agent, AgentState, AppState};

/// How long the `?check=model` probe waits for the provider.
const MODEL_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<usize>,
    /// Each hook's delivered / dropped / restart counts (absent without hooks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<bdk_engine::HookStatus>,
    /// The last hot reload under `serve --dev` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload: Option<crate::reload::ReloadReport>,
    /// Present only while the state store refuses writes (`writable: false`, `error`, `since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<bdk_engine::StoreStatus>,
    #[serde(flatten)]
    pub operator: Operator,
}

/// `ok`, or `degraded` while the store refuses writes.
pub fn status_of(store: Option<&bdk_engine::StoreStatus>) -> &'static str {
    if store.is_some() { "degraded" } else { "ok" }
}

/// What an operator reads beside `status`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    pub version: &'static str,
    pub uptime_seconds: u64,
    pub telemetry: TelemetryHealth,
    /// The agent's schedules (absent without any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedules: Option<ScheduleHealth>,
    /// The provider probe, only with `?check=model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelHealth>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TelemetryHealth {
    pub traces: bool,
    pub metrics: bool,
    /// What is exported where (absent when off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// Whether `GET /metrics` is served.
    pub prometheus: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleHealth {
    pub count: usize,
    /// Whether this host fires them by itself (not under `--dev`, `--no-schedules` or
    /// `--no-control-plane`).
    pub clock: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Schedules whose latest firing failed.
    pub failing: Vec<String>,
    /// Set when the firing records could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelHealth {
    pub provider: String,
    pub model: String,
    /// Whether the provider answered HTTP at all (any status counts: the probe sends no key).
    pub reachable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct HealthQuery {
    /// `model`: probe the model provider.
    pub check: Option<String>,
}

pub async fn agent_health(State(state): State<AgentState>, Query(query): Query<HealthQuery>) -> OkJson<Health> {
    let hooks = state.agent.engine.hooks();
    let check_model = query.check.as_deref() == Some("model");
    let operator = operator(&state.app, Some(&state.agent), check_model).await;
    let reload = state.app.reload.as_ref().map(|r| r.report());
    let store = Some(state.agent.engine.store_status()).filter(|s| !s.writable);
    OkJson(Health {
        status: status_of(store.as_ref()),
        slug: Some(state.agent.slug().to_owned()),
        agents: None,
        hooks,
        reload,
        store,
        operator,
    })
}

/// The operator group for the host (`agent: None`) or one agent.
pub(crate) async fn operator(app: &AppState, agent: Option<&Agent>, check_model: bool) -> Operator {
    let telemetry = &app.telemetry;
    let schedules = match agent.and_then(|a| a.schedules.as_ref()) {
        Some(schedules) => schedule_health(schedules, Agent::clocks_run(&app.options)).await,
        None => None,
    };
    let model = match agent {
        Some(agent) if check_model => Some(probe(agent.engine.model_info()).await),
        _ => None,
    };
    Operator {
        version: env!("CARGO_PKG_VERSION"),
        uptime_seconds: app.started.elapsed().as_secs(),
        telemetry: TelemetryHealth {
            traces: telemetry.traces(),
            metrics: telemetry.metrics().is_some(),
            export: telemetry.summary().map(str::to_owned),
            prometheus: app.options.metrics,
        },
        schedules,
        model,
    }
}

async fn schedule_health(schedules: &bdk_engine::schedules::Schedules, clock: bool) -> Option<ScheduleHealth> {
    match schedules.status().await {
        Ok(list) if list.is_empty() => None,
        Ok(list) => Some(ScheduleHealth {
            count: list.len(),
            clock,
            next_fire_at: list.iter().filter_map(|s| s.next_fire_at).min(),
            failing: list
                .iter()
                .filter(|s| s.last.as_ref().is_some_and(|l| l.status == bdk_store::timed::FiringStatus::Failed))
                .map(|s| s.id.clone())
                .collect(),
            error: None,
        }),
        Err(error) => Some(ScheduleHealth {
            count: 0,
            clock,
            next_fire_at: None,
            failing: Vec::new(),
            error: Some(error.to_string()),
        }),
    }
}

/// One unauthenticated GET to the provider's base URL: any HTTP answer means reachable.
async fn probe(info: bdk_model::ProviderInfo) -> ModelHealth {
    let mut health = ModelHealth {
        provider: info.provider,
        model: info.model,
        reachable: false,
        http_status: None,
        latency_ms: None,
        error: None,
    };
    let Some(url) = info.base_url else {
        // The scripted provider: nothing to reach.
        health.reachable = health.provider == "scripted";
        if !health.reachable {
            health.error = Some("the provider has no HTTP endpoint".into());
        }
        return health;
    };
    let client = match reqwest::Client::builder().timeout(MODEL_PROBE_TIMEOUT).build() {
        Ok(client) => client,
        Err(error) => {
            health.error = Some(format!("cannot build an HTTP client: {error}"));
            return health;
        }
    };
    let started = std::time::Instant::now();
    match client.get(&url).send().await {
        Ok(response) => {
            health.reachable = true;
            health.http_status = Some(response.status().as_u16());
            health.latency_ms = Some(started.elapsed().as_millis() as u64);
        }
        Err(error) => health.error = Some(format!("{url}: {error}")),
    }
    health
}
