//! `GET /v1/abs`: the agent's A/B experiments, each with its arms' totals (sessions, turns,
//! failures, tokens, cost) and its assignments, folded from the durable logs of the sessions the
//! caller may see (its own; every principal's under `--dev` on loopback or `--allow-anonymous`).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use bdk_engine::AbReport;

use crate::auth::Caller;
use crate::error::ApiResult;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/abs", get(list))
}

async fn list(State(state): State<AgentState>, caller: Caller) -> ApiResult<OkJson<AbReport>> {
    Ok(OkJson(state.engine().abs(&caller.list_scope()).await?))
}
