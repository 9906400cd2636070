//! Model resolution: CLI > env > agent.toml > default, provider inference from the model id,
//! connection settings that follow their model, and `model_unavailable` naming what to set.

use std::collections::HashMap;

use bdk_model::{
    Effort, ModelEvent, ModelInput, ModelLayer, ModelRequest, ProviderKind, ProviderOptions, build, resolve,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{collect, last_error, text_of};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

fn layer(model: &str) -> ModelLayer {
    ModelLayer { model: Some(model.into()), ..Default::default() }
}

#[test]
fn default_is_grok_on_xai_with_high_effort() {
    let resolved = resolve(&ModelInput::default(), &env(&[("XAI_API_KEY", "xai-key")]));
    assert_eq!(resolved.provider, Some(ProviderKind::Xai));
    assert_eq!(resolved.model, "grok-4.5");
    assert_eq!(resolved.base_url.as_deref(), Some("https://api.x.ai/v1"));
    assert_eq!(resolved.api_key.as_deref(), Some("xai-key"));
    assert_eq!(resolved.api_key_source.as_deref(), Some("XAI_API_KEY"));
    assert_eq!(resolved.params.effort, Some(Effort::High));
    assert_eq!(resolved.params.fast, Some(true));
    assert_eq!(resolved.problem, None);
    assert!(!format!("{resolved:?}").contains("xai-key"), "the key must not appear in Debug output");
    // Naming the default model explicitly does not bring its default params (docs/formats.md).
    let named = resolve(&ModelInput { agent: layer("grok-4.5"), ..Default::default() }, &env(&[]));
    assert_eq!((named.params.effort, named.params.fast), (None, None));
}

#[test]
fn cli_beats_env_beats_agent() {
    let input = ModelInput { cli: layer("gpt-5"), agent: layer("claude-sonnet-4-5") };
    let vars =
        env(&[("BDK_MODEL", "grok-4"), ("OPENAI_API_KEY", "o"), ("XAI_API_KEY", "x"), ("ANTHROPIC_API_KEY", "a")]);
    assert_eq!(resolve(&input, &vars).model, "gpt-5");
    assert_eq!(resolve(&input, &vars).provider, Some(ProviderKind::OpenAi));
    let no_cli = ModelInput { cli: ModelLayer::default(), ..input.clone() };
    assert_eq!(resolve(&no_cli, &vars).model, "grok-4");
    assert_eq!(resolve(&no_cli, &vars).provider, Some(ProviderKind::Xai));
    let only_agent = resolve(&no_cli, &env(&[("ANTHROPIC_API_KEY", "a")]));
    assert_eq!((only_agent.model.as_str(), only_agent.provider), ("claude-sonnet-4-5", Some(ProviderKind::Anthropic)));
    assert_eq!(only_agent.base_url.as_deref(), Some("https://api.anthropic.com/v1"));
}

#[test]
fn env_points_a_project_at_a_local_server() {
    let agent = ModelLayer { model: Some("grok-4.5".into()), ..Default::default() };
    let vars = env(&[
        ("BDK_MODEL", "qwen3:8b"),
        ("BDK_MODEL_PROVIDER", "openai-compatible"),
        ("BDK_MODEL_BASE_URL", "http://127.0.0.1:8080/v1"),
    ]);
    let resolved = resolve(&ModelInput { agent, ..Default::default() }, &vars);
    assert_eq!(resolved.provider, Some(ProviderKind::OpenAiCompatible));
    assert_eq!(resolved.model, "qwen3:8b");
    assert_eq!(resolved.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
    assert_eq!(resolved.api_key, None);
    assert_eq!(resolved.problem, None, "local servers need no key");
}

#[test]
fn connection_settings_follow_their_model() {
    // The agent is set up for a local server; a model id with no known provider keeps that setup.
    let agent = ModelLayer {
        model: Some("qwen3".into()),
        provider: Some("openai-compatible".into()),
        base_url: Some("http://localhost:11434/v1".into()),
        ..Default::default()
    };
    let input = ModelInput { agent, ..Default::default() };
    let kept = resolve(&input, &env(&[("BDK_MODEL", "llama3")]));
    assert_eq!(
        (kept.provider, kept.base_url.as_deref()),
        (Some(ProviderKind::OpenAiCompatible), Some("http://localhost:11434/v1"))
    );
    // A model id that names its provider starts afresh.
    let moved = resolve(&input, &env(&[("BDK_MODEL", "claude-haiku-4-5"), ("ANTHROPIC_API_KEY", "a")]));
    assert_eq!(moved.provider, Some(ProviderKind::Anthropic));
    assert_eq!(moved.base_url.as_deref(), Some("https://api.anthropic.com/v1"));
    assert!(!moved.warnings.is_empty());
}

#[test]
fn agent_key_variable_and_params_apply() {
    let agent = ModelLayer {
        model: Some("gpt-5-mini".into()),
        api_key_env: Some("TEAM_OPENAI_KEY".into()),
        params: json!({"effort": "low", "max_tokens": 500, "seed": 7, "effort_typo": 1, "temperature": "hot"})
            .as_object()
            .cloned()
            .unwrap(),
        ..Default::default()
    };
    let input = ModelInput { agent, ..Default::default() };
    let resolved = resolve(&input, &env(&[("TEAM_OPENAI_KEY", "team"), ("OPENAI_API_KEY", "personal")]));
    assert_eq!(resolved.api_key.as_deref(), Some("team"));
    assert_eq!(resolved.params.effort, Some(Effort::Low));
    assert_eq!(resolved.params.max_tokens, Some(500));
    assert_eq!(resolved.params.extra.get("seed"), Some(&json!(7)));
    assert_eq!(resolved.params.temperature, None);
    assert!(resolved.warnings.iter().any(|w| w.contains("temperature")), "{:?}", resolved.warnings);
    // BDK_MODEL_API_KEY beats the variable agent.toml names.
    let over = resolve(&input, &env(&[("TEAM_OPENAI_KEY", "team"), ("BDK_MODEL_API_KEY", "override")]));
    assert_eq!(
        (over.api_key.as_deref(), over.api_key_source.as_deref()),
        (Some("override"), Some("BDK_MODEL_API_KEY"))
    );
}

#[tokio::test]
async fn missing_key_gives_a_provider_that_says_what_to_set() {
    let resolved = resolve(&ModelInput::default(), &env(&[]));
    let problem = resolved.problem.clone().unwrap();
    assert!(problem.contains("XAI_API_KEY"), "{problem}");
    // Both offline ways: the echoing scripted model, and a script in agent.toml.
    assert!(problem.contains("BDK_MODEL_PROVIDER=scripted"), "{problem}");
    assert!(problem.contains("[[model.params.script]]") && problem.contains("examples/refunds"), "{problem}");
    let provider = build(&resolved, &ProviderOptions::default());
    assert_eq!(provider.info().model, "grok-4.5");
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    let err = last_error(&items);
    assert_eq!(err.code(), "model_unavailable");
    assert!(err.to_string().contains("XAI_API_KEY"), "{err}");

    let named = ModelLayer { model: Some("gpt-5".into()), api_key_env: Some("MY_KEY".into()), ..Default::default() };
    let resolved = resolve(&ModelInput { agent: named, ..Default::default() }, &env(&[]));
    assert!(resolved.problem.unwrap().contains("set MY_KEY"));
}

#[test]
fn unknown_providers_and_models_are_problems() {
    let bad = resolve(&ModelInput::default(), &env(&[("BDK_MODEL_PROVIDER", "bedrock")]));
    assert!(bad.problem.unwrap().contains("bedrock"));
    let unknown = resolve(&ModelInput { cli: layer("mystery-model"), ..Default::default() }, &env(&[]));
    assert!(unknown.problem.unwrap().contains("BDK_MODEL_PROVIDER"));
    let compatible_without_url = ModelLayer { provider: Some("openai-compatible".into()), ..layer("m") };
    let resolved = resolve(&ModelInput { agent: compatible_without_url, ..Default::default() }, &env(&[]));
    assert!(resolved.problem.unwrap().contains("BDK_MODEL_BASE_URL"));
}

#[tokio::test]
async fn scripted_only_when_asked_for() {
    let agent = ModelLayer { provider: Some("scripted".into()), ..layer("echo") };
    let resolved = resolve(&ModelInput { agent, ..Default::default() }, &env(&[]));
    assert_eq!(resolved.problem, None);
    let provider = build(&resolved, &ProviderOptions::default());
    let request = ModelRequest { messages: vec![bdk_model::Message::user("ping")].into(), ..Default::default() };
    let items = collect(provider.stream(request, CancellationToken::new())).await;
    let events: Vec<ModelEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(text_of(&events), "ping");

    let scripted = ModelLayer {
        provider: Some("scripted".into()),
        params: json!({"script": [{"text": "from the script"}]}).as_object().cloned().unwrap(),
        ..layer("demo")
    };
    let provider =
        build(&resolve(&ModelInput { agent: scripted, ..Default::default() }, &env(&[])), &ProviderOptions::default());
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    let events: Vec<ModelEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(text_of(&events), "from the script");
}

#[test]
fn scripted_runs_cost_nothing_even_under_a_priced_model_id() {
    // `BDK_MODEL_PROVIDER=scripted` on a project that keeps the default `grok-4.5` id.
    let resolved = resolve(&ModelInput::default(), &env(&[("BDK_MODEL_PROVIDER", "scripted")]));
    assert_eq!(resolved.model, "grok-4.5");
    assert_eq!(resolved.price, None, "a scripted turn must not be billed at grok prices");
    let priced = resolve(&ModelInput::default(), &env(&[("XAI_API_KEY", "k")]));
    assert!(priced.price.is_some());
}
