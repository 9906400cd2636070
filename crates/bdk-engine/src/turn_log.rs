//! The turn log a person reads under `bdk serve` (target `bdk::turn`, level info): one line
//! when a turn starts and one when it ends, with its tokens, estimated cost, duration and the
//! tools it called, or its failure. Structured fields carry the same facts for
//! `--log-format json`.

use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::NewEvent;

pub(crate) fn started(session: &SessionId, turn: &TurnId) {
    tracing::info!(target: "bdk::turn", session = %session, turn = %turn, "turn started");
}

/// Logs the turn-closing event among `events` (the closing batch the actor appends); `tools`
/// is the tool of each call that got a result in the turn, in order.
pub(crate) fn closed(session: &SessionId, events: &[NewEvent], tools: &[String]) {
    let called = called(tools);
    let listed = tools_field(tools);
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
                    tools = %listed,
                    "turn completed in {ms} ms: {} input, {} output tokens, ${cost:.6}; {called}",
                    usage.input_tokens,
                    usage.output_tokens
                );
            }
            EventData::TurnFailed(failed) => {
                let status = serde_json::to_value(failed.status).ok();
                let status = status.as_ref().and_then(|v| v.as_str()).unwrap_or("failed");
                let usage = failed.usage.unwrap_or_default();
                let cost = failed.estimated_cost_usd.unwrap_or(0.0);
                tracing::info!(
                    target: "bdk::turn",
                    session = %session,
                    turn = %turn,
                    status,
                    input_tokens = usage.input_tokens,
                    output_tokens = usage.output_tokens,
                    cost_usd = cost,
                    tools = %listed,
                    "turn {status}: {} ({} input, {} output tokens, ${cost:.6}; {called})",
                    failed.message,
                    usage.input_tokens,
                    usage.output_tokens
                );
            }
            _ => {}
        }
    }
}

/// `tools: a, b ×2` in first-call order, or `no tools`.
fn called(tools: &[String]) -> String {
    let mut counted: Vec<(&str, usize)> = Vec::new();
    for tool in tools {
        match counted.iter_mut().find(|(name, _)| name == tool) {
            Some((_, n)) => *n += 1,
            None => counted.push((tool, 1)),
        }
    }
    if counted.is_empty() {
        return "no tools".to_owned();
    }
    let names: Vec<String> =
        counted.iter().map(|(name, n)| if *n > 1 { format!("{name} ×{n}") } else { (*name).to_owned() }).collect();
    format!("tools: {}", names.join(", "))
}

/// The `tools` field: every call's tool, comma-separated, in order.
fn tools_field(tools: &[String]) -> String {
    tools.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_listed_once_each_with_a_count() {
        let tools: Vec<String> = ["lookup", "refund", "lookup"].iter().map(|t| (*t).to_owned()).collect();
        assert_eq!(called(&tools), "tools: lookup ×2, refund");
        assert_eq!(tools_field(&tools), "lookup,refund,lookup");
        assert_eq!(called(&[]), "no tools");
    }
}
