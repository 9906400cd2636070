//! Usage and estimated cost: the mapping from a provider's token counts to the event's, the
//! estimate recorded on `turn.completed`, and the session cost report folded from those events
//! (what `GET /v1/session/:id/cost` and `bdk cost` print).

use bdk_model::{Price, Usage as ModelUsage};
use bdk_protocol::event::Usage;
use bdk_protocol::{Event, EventData, SessionId};

use crate::types::{CostReport, TurnCost};

/// A provider's usage as events record it.
pub(crate) fn protocol_usage(usage: &ModelUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        reasoning_tokens: usage.reasoning_tokens.unwrap_or(0),
    }
}

/// Estimated USD for `usage`; 0 when the model has no known price.
pub(crate) fn estimate(price: Option<&Price>, usage: &ModelUsage) -> f64 {
    round_usd(price.map_or(0.0, |price| bdk_model::estimate_cost(usage, price)))
}

/// Rounds to a billionth of a dollar, so sums print as `0.0003`, not `0.00030000000000000003`.
pub(crate) fn round_usd(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

/// Per-turn usage and cost of a session, folded from its `turn.completed` events, and totals.
pub fn cost_report(session: &SessionId, events: &[Event]) -> CostReport {
    let mut report =
        CostReport { session_id: session.clone(), turns: Vec::new(), usage: Usage::default(), cost_usd: 0.0 };
    for event in events {
        let (EventData::TurnCompleted(completed), Some(turn_id)) = (&event.data, &event.turn_id) else { continue };
        let cost_usd = completed.estimated_cost_usd.unwrap_or(0.0);
        report.usage.add(&completed.usage);
        report.cost_usd = round_usd(report.cost_usd + cost_usd);
        report.turns.push(TurnCost {
            turn_id: turn_id.clone(),
            model: completed.model.clone(),
            usage: completed.usage,
            cost_usd,
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_prices_cost_nothing() {
        let usage = ModelUsage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Default::default() };
        assert_eq!(estimate(None, &usage), 0.0);
        let price = Price { input: 1.0, output: 2.0, cached_input: None };
        assert!((estimate(Some(&price), &usage) - 3.0).abs() < 1e-9);
    }
}
