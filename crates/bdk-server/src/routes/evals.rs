//! `/v1/dev/evals...`: the playground's eval routes, as the reference has them (registered in
//! every serve, behind the agent's auth chain). List the discovered evals with the config, list
//! runs newest first (with the running one's id), start a run (`{filterIds?, tags?,
//! iterations?}`: 202 with its snapshot, 404 when nothing matches, 409 while one runs), poll a
//! run, cancel a running one (200 with its snapshot, 404 unknown, 409 not running). Runs are
//! `bdk_eval::EvalService`'s; their snapshots are saved, so they survive a restart.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bdk_eval::{EvalError, EvalService, RunSnapshot, StartRun};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::extract::parse_json;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/dev/evals", get(list_evals))
        .route("/v1/dev/evals/runs", get(list_runs).post(start))
        .route("/v1/dev/evals/runs/{run_id}", get(get_run))
        .route("/v1/dev/evals/runs/{run_id}/cancel", post(cancel))
}

fn service(state: &AgentState) -> ApiResult<std::sync::Arc<EvalService>> {
    state.app.evals.get(state.agent.slug()).cloned().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "evals_unavailable", "eval runs are not enabled for this agent")
    })
}

fn eval_error(err: EvalError) -> ApiError {
    match err {
        EvalError::NoEvals | EvalError::NothingMatches => {
            ApiError::new(StatusCode::NOT_FOUND, "no_matching_evals", err.to_string())
        }
        EvalError::AlreadyRunning(_) => ApiError::new(StatusCode::CONFLICT, "eval_run_active", err.to_string()),
        EvalError::RunNotFound(_) | EvalError::InvalidRunId(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "eval_run_not_found", err.to_string())
        }
        EvalError::NotRunning(_) => ApiError::new(StatusCode::CONFLICT, "eval_run_not_running", err.to_string()),
        other => ApiError::internal(&other),
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EvalRow {
    id: String,
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    tags: Vec<String>,
    turns: usize,
    expectations: usize,
    iterations: u32,
    dry_run: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EvalConfig {
    max_concurrency: u32,
    timeout_ms: u64,
    /// Runs are saved under the state directory, so every run is kept and listed.
    durable_runs: bool,
}

#[derive(Debug, Serialize)]
struct EvalList {
    evals: Vec<EvalRow>,
    config: EvalConfig,
}

/// `GET /v1/dev/evals`: `{evals, config}`.
async fn list_evals(State(state): State<AgentState>) -> ApiResult<OkJson<EvalList>> {
    let service = service(&state)?;
    let evals = service
        .cases()
        .iter()
        .map(|c| EvalRow {
            id: c.id.clone(),
            file: c.file.clone(),
            description: c.description.clone(),
            tags: c.tags.clone(),
            turns: c.turns.len(),
            expectations: c.expect.count(),
            iterations: c.iterations,
            dry_run: c.dry_run,
        })
        .collect();
    let (max_concurrency, timeout) = service.config();
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    Ok(OkJson(EvalList { evals, config: EvalConfig { max_concurrency, timeout_ms, durable_runs: true } }))
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RunList {
    runs: Vec<RunSnapshot>,
    #[serde(skip_serializing_if = "Option::is_none")]
    active_run_id: Option<String>,
}

/// `GET /v1/dev/evals/runs`: `{runs, activeRunId?}`, newest first.
async fn list_runs(State(state): State<AgentState>) -> ApiResult<OkJson<RunList>> {
    let (runs, active_run_id) = service(&state)?.runs().await.map_err(eval_error)?;
    Ok(OkJson(RunList { runs, active_run_id }))
}

/// The body of `POST /v1/dev/evals/runs` (an empty body runs everything).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StartBody {
    #[serde(default)]
    filter_ids: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    iterations: Option<u32>,
}

/// `POST /v1/dev/evals/runs`: 202 with the new run's snapshot.
async fn start(State(state): State<AgentState>, body: Bytes) -> ApiResult<(StatusCode, OkJson<RunSnapshot>)> {
    let service = service(&state)?;
    let body: StartBody =
        if body.iter().all(u8::is_ascii_whitespace) { StartBody::default() } else { parse_json(&body)? };
    if body.iterations == Some(0) {
        return Err(ApiError::invalid_request("iterations must be at least 1"));
    }
    let request = StartRun { filter_ids: body.filter_ids, tags: body.tags, iterations: body.iterations };
    let snapshot = service.start(request).await.map_err(eval_error)?;
    Ok((StatusCode::ACCEPTED, OkJson(snapshot)))
}

/// `GET /v1/dev/evals/runs/:runId`: the run's snapshot (live while it runs).
async fn get_run(State(state): State<AgentState>, Path(run_id): Path<String>) -> ApiResult<OkJson<RunSnapshot>> {
    Ok(OkJson(service(&state)?.run(&run_id).await.map_err(eval_error)?))
}

/// `POST /v1/dev/evals/runs/:runId/cancel`: 200 with the snapshot once its attempts stopped.
async fn cancel(State(state): State<AgentState>, Path(run_id): Path<String>) -> ApiResult<OkJson<RunSnapshot>> {
    Ok(OkJson(service(&state)?.cancel(&run_id).await.map_err(eval_error)?))
}
