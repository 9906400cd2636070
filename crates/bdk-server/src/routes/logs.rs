//! `GET /v1/logs?after=N&limit=M`: recent server log lines from the ring buffer, oldest first,
//! with the cursor to pass as `after` next time.

use axum::extract::State;
use serde::{Deserialize, Serialize};

use crate::extract::ApiQuery;
use crate::logs::LogLine;
use crate::routes::OkJson;
use crate::state::AgentState;

/// The most lines one call returns.
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Deserialize)]
pub struct LogsQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Logs {
    lines: Vec<LogLine>,
    /// The last `seq` returned (or `after` when nothing is new): poll with `?after=<cursor>`.
    cursor: u64,
}

pub async fn get_logs(State(state): State<AgentState>, ApiQuery(query): ApiQuery<LogsQuery>) -> OkJson<Logs> {
    let limit = query.limit.unwrap_or(MAX_LIMIT).min(MAX_LIMIT);
    let (lines, cursor) = state.app.logs.after(query.after.unwrap_or(0), limit);
    OkJson(Logs { lines, cursor })
}
