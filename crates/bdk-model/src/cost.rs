//! Token prices and cost estimates. Prices are USD per million tokens.
//!
//! The built-in table holds list prices as we last knew them: estimates that go stale. An
//! agent's `[model.pricing]` overrides them, and recorded costs are labelled estimates.

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached input tokens; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

const fn price(input: f64, output: f64, cached_input: f64) -> Price {
    Price { input, output, cached_input: Some(cached_input) }
}

/// Built-in prices by model id prefix. ESTIMATES, not quotes: copied from the providers'
/// public price lists (grok-4.5 has none published; it is priced like grok-4). Override per
/// agent with `[model.pricing]`.
const TABLE: &[(&str, Price)] = &[
    ("grok-4.5", price(3.0, 15.0, 0.75)),
    ("grok-4-fast", price(0.20, 0.50, 0.05)),
    ("grok-4.1-fast", price(0.20, 0.50, 0.05)),
    ("grok-4", price(3.0, 15.0, 0.75)),
    ("grok-code-fast-1", price(0.20, 1.50, 0.02)),
    ("grok-3-mini", price(0.30, 0.50, 0.075)),
    ("grok-3", price(3.0, 15.0, 0.75)),
    ("gpt-5", price(1.25, 10.0, 0.125)),
    ("gpt-5-mini", price(0.25, 2.0, 0.025)),
    ("gpt-5-nano", price(0.05, 0.40, 0.005)),
    ("gpt-4.1", price(2.0, 8.0, 0.50)),
    ("gpt-4.1-mini", price(0.40, 1.60, 0.10)),
    ("gpt-4o", price(2.50, 10.0, 1.25)),
    ("gpt-4o-mini", price(0.15, 0.60, 0.075)),
    ("o3", price(2.0, 8.0, 0.50)),
    ("o3-mini", price(1.10, 4.40, 0.55)),
    ("o4-mini", price(1.10, 4.40, 0.275)),
    ("claude-opus-4-5", price(5.0, 25.0, 0.50)),
    ("claude-opus-4", price(15.0, 75.0, 1.50)),
    ("claude-sonnet-4", price(3.0, 15.0, 0.30)),
    ("claude-haiku-4-5", price(1.0, 5.0, 0.10)),
    ("claude-3-5-haiku", price(0.80, 4.0, 0.08)),
];

/// The built-in price of `model`: the longest table entry that is `model` or a dash- or
/// dot-separated prefix of it (`claude-sonnet-4-5-20250929` → `claude-sonnet-4`).
pub fn price_for(model: &str) -> Option<Price> {
    let model = model.trim().to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(id, _)| {
            model == *id || model.strip_prefix(id).is_some_and(|rest| rest.starts_with(['-', '.', ':', '@']))
        })
        .max_by_key(|(id, _)| id.len())
        .map(|(_, price)| *price)
}

/// Estimated USD cost of `usage` at `price`. Cache writes are charged at the input price.
pub fn estimate_cost(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cached_input_tokens.min(usage.input_tokens);
    let uncached = usage.input_tokens - cached;
    let per_token = |per_million: f64| per_million / 1_000_000.0;
    uncached as f64 * per_token(price.input)
        + cached as f64 * per_token(price.cached_input.unwrap_or(price.input))
        + usage.output_tokens as f64 * per_token(price.output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(price_for("gpt-5-mini-2025-08-07"), Some(price(0.25, 2.0, 0.025)));
        assert_eq!(price_for("gpt-5"), Some(price(1.25, 10.0, 0.125)));
        assert_eq!(price_for("claude-sonnet-4-5-20250929"), Some(price(3.0, 15.0, 0.30)));
        assert_eq!(price_for("GROK-4.5"), Some(price(3.0, 15.0, 0.75)));
        assert_eq!(price_for("gpt-50"), None);
        assert_eq!(price_for("llama3"), None);
    }
}
