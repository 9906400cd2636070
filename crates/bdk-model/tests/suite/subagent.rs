//! Subagents inherit the parent's model unless they set their own: `ModelLayer::inherit` puts
//! the parent's `[model]` under the subagent's, and `resolve` then applies CLI > env above both.

use std::collections::HashMap;

use bdk_model::{Effort, ModelInput, ModelLayer, Price, ProviderKind, resolve};
use serde_json::json;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

fn local_parent() -> ModelLayer {
    ModelLayer {
        model: Some("qwen3:8b".into()),
        provider: Some("openai-compatible".into()),
        base_url: Some("http://127.0.0.1:11434/v1".into()),
        params: json!({"effort": "low", "max_tokens": 512}).as_object().cloned().unwrap(),
        pricing: Some(Price { input: 0.0, output: 0.0, cached_input: None }),
        ..Default::default()
    }
}

fn subagent(own: &ModelLayer, parent: &ModelLayer) -> ModelInput {
    ModelInput { agent: own.inherit(parent), ..Default::default() }
}

#[test]
fn a_subagent_without_a_model_runs_on_the_parents() {
    let parent = local_parent();
    let resolved = resolve(&subagent(&ModelLayer::default(), &parent), &env(&[]));
    let of_parent = resolve(&ModelInput { agent: parent, ..Default::default() }, &env(&[]));
    assert_eq!(resolved, of_parent);
    assert_eq!(resolved.provider, Some(ProviderKind::OpenAiCompatible));
    assert_eq!(resolved.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
    // An empty parent too: both get the default model, with its default params.
    let default = resolve(&subagent(&ModelLayer::default(), &ModelLayer::default()), &env(&[("XAI_API_KEY", "k")]));
    assert_eq!((default.model.as_str(), default.params.effort), ("grok-4.5", Some(Effort::High)));
}

#[test]
fn a_subagent_with_only_params_keeps_the_parents_model_and_overrides_by_key() {
    let own = ModelLayer { params: json!({"effort": "high"}).as_object().cloned().unwrap(), ..Default::default() };
    let resolved = resolve(&subagent(&own, &local_parent()), &env(&[]));
    assert_eq!(resolved.model, "qwen3:8b");
    assert_eq!(resolved.params.effort, Some(Effort::High), "the subagent's own key wins");
    assert_eq!(resolved.params.max_tokens, Some(512), "the parent's other keys stay");
    assert_eq!(resolved.price, Some(Price { input: 0.0, output: 0.0, cached_input: None }));
}

#[test]
fn a_subagent_naming_another_providers_model_takes_nothing_from_the_parent() {
    let own = ModelLayer { model: Some("claude-haiku-4-5".into()), ..Default::default() };
    let layer = own.inherit(&local_parent());
    assert_eq!(layer, own, "no base URL, params or pricing of the parent's");
    let resolved = resolve(&ModelInput { agent: layer, ..Default::default() }, &env(&[("ANTHROPIC_API_KEY", "a")]));
    assert_eq!(resolved.provider, Some(ProviderKind::Anthropic));
    assert_eq!(resolved.base_url.as_deref(), Some("https://api.anthropic.com/v1"));
    assert_eq!(resolved.params.max_tokens, None);
}

#[test]
fn a_subagent_naming_a_model_of_no_known_provider_keeps_the_parents_server() {
    let own = ModelLayer { model: Some("llama3".into()), ..Default::default() };
    let resolved = resolve(&subagent(&own, &local_parent()), &env(&[]));
    assert_eq!(resolved.model, "llama3");
    assert_eq!(resolved.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
    assert_eq!(resolved.params.max_tokens, None, "params were written for the parent's model");
    // Same provider by inference: the parent's key variable follows.
    let parent = ModelLayer { model: Some("gpt-5".into()), api_key_env: Some("TEAM_KEY".into()), ..Default::default() };
    let own = ModelLayer { model: Some("gpt-5-mini".into()), ..Default::default() };
    let resolved = resolve(&subagent(&own, &parent), &env(&[("TEAM_KEY", "team")]));
    assert_eq!((resolved.model.as_str(), resolved.api_key.as_deref()), ("gpt-5-mini", Some("team")));
}

#[test]
fn the_environment_still_overrides_subagents() {
    let own = ModelLayer { model: Some("gpt-5-mini".into()), ..Default::default() };
    let vars = env(&[("BDK_MODEL", "qwen3:32b"), ("BDK_MODEL_BASE_URL", "http://127.0.0.1:8000/v1")]);
    let resolved = resolve(&subagent(&own, &local_parent()), &vars);
    assert_eq!(resolved.model, "qwen3:32b");
    assert_eq!(resolved.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
}
