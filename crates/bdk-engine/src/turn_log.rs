//! The turn log a person reads under `bdk serve` (target `bdk::turn`, level info): one line
//! when a turn starts and one when it ends, with its tokens, estimated cost and duration or
//! its failure. Structured fields carry the same facts for `--log-format json`.

use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::NewEvent;

pub(crate) fn started(session: &SessionId, turn: &TurnId) {
    tracing::info!(target: "bdk::turn", session = %session, turn = %turn, "turn started");
}

/// Logs the turn-closing event among `events` (the closing batch the actor appends).
pub(crate) fn closed(session: &SessionId, events: &[NewEvent]) {
    for event in events {
        let turn = event.turn_id.as_ref().map(ToString::to_string).unwrap_or_default();
        match &event.data {
            EventData::TurnCompleted(done) => {
                let usage = &done.usage;
                let cost = done.estimated_cost_usd.unwrap_or(0.0);
                let ms = done.duration_ms.unwrap_or(0);
                tracing::info!(
                    target: "bdk::turn",
                    session = %session,
                    turn = %turn,
                    input_tokens = usage.input_tokens,
                    output_tokens = usage.output_tokens,
                    cost_usd = cost,
                    duration_ms = ms,
                    "turn completed in {ms} ms: {} input, {} output tokens, ${cost:.6}",
                    usage.input_tokens,
                    usage.output_tokens
                );
            }
            EventData::TurnFailed(failed) => {
                let status = serde_json::to_value(failed.status).ok();
                let status = status.as_ref().and_then(|v| v.as_str()).unwrap_or("failed");
                tracing::info!(
                    target: "bdk::turn",
                    session = %session,
                    turn = %turn,
                    status,
                    "turn {status}: {}",
                    failed.message
                );
            }
            _ => {}
        }
    }
}
