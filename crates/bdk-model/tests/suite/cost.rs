//! Cost estimates: uncached, cached and output tokens each at their price; agent pricing wins.

use bdk_model::{ModelInput, ModelLayer, Price, Usage, estimate_cost, price_for, resolve};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn estimate_splits_cached_input() {
    let price = Price { input: 3.0, output: 15.0, cached_input: Some(0.75) };
    let usage =
        Usage { input_tokens: 1_000_000, output_tokens: 100_000, cached_input_tokens: 400_000, ..Default::default() };
    // 600k uncached at $3/M + 400k cached at $0.75/M + 100k output at $15/M.
    assert!(close(estimate_cost(&usage, &price), 1.8 + 0.3 + 1.5));
    let no_cache_price = Price { cached_input: None, ..price };
    assert!(close(estimate_cost(&usage, &no_cache_price), 3.0 + 1.5));
    assert!(close(estimate_cost(&Usage::default(), &price), 0.0));
}

#[test]
fn default_models_have_prices() {
    for model in ["grok-4.5", "gpt-5", "gpt-4o-mini", "claude-sonnet-4-5", "claude-opus-4-1"] {
        assert!(price_for(model).is_some(), "{model}");
    }
}

#[test]
fn agent_pricing_overrides_the_table() {
    let custom = Price { input: 1.0, output: 2.0, cached_input: None };
    let input = ModelInput {
        agent: ModelLayer { model: Some("grok-4.5".into()), pricing: Some(custom), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(resolve(&input, &|_| None).price, Some(custom));
    // Pricing written for another model does not follow an override.
    let cli = ModelLayer { model: Some("gpt-5".into()), ..Default::default() };
    let overridden = ModelInput { cli, ..input };
    assert_eq!(resolve(&overridden, &|_| None).price, price_for("gpt-5"));
}
