//! Decides which model an agent runs on, and builds the provider for it.
//!
//! Precedence, highest first: command line > environment (`BDK_MODEL*`) > `agent.toml`
//! `[model]` > the default (`grok-4.5` on xAI). Each field is taken from the highest layer that
//! sets it, with one rule on top: connection settings (provider, base URL, key) belong to the
//! model they were written for. When a higher layer names a model whose provider is known from
//! its id (`claude-*`, `grok-*`, `gpt-*`, `o<digit>*`), a lower layer's connection settings
//! apply only if that layer is for the same provider. A model id that names no provider
//! (`llama3`, `qwen3:8b`) keeps the lower layers' settings, so `BDK_MODEL=llama3` re-points a
//! project already set up for a local server.
//!
//! Resolution never fails: with no usable provider or key, the result carries a `problem` and
//! [`build`] returns a provider that fails each call with `model_unavailable` saying what to set.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::anthropic::AnthropicProvider;
use crate::cost::{Price, price_for};
use crate::env;
use crate::http::{HttpConfig, Timeouts};
use crate::openai::OpenAiProvider;
use crate::presets::{DEFAULT_MODEL, ProviderKind, default_model_params};
use crate::provider::{ModelProvider, ProviderInfo, UnavailableProvider};
use crate::retry::{RetryPolicy, Retrying};
use crate::scripted::ScriptedProvider;
use crate::types::{Effort, ModelParams};

/// One layer of model settings; every field optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelLayer {
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    /// A key given directly (`--api-key`, `BDK_MODEL_API_KEY`).
    pub api_key: Option<String>,
    /// The name of the variable holding the key (`[model] api_key_env`).
    pub api_key_env: Option<String>,
    /// `[model] params`: `effort`, `max_tokens`, `temperature`, `top_p`, `fast`, `script`
    /// (scripted provider); other keys are sent as they are.
    pub params: Map<String, Value>,
    /// `[model.pricing]`.
    pub pricing: Option<Price>,
}

impl ModelLayer {
    /// The `BDK_MODEL*` variables, read through `env`. Empty values count as unset.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        ModelLayer {
            model: var(env::BDK_MODEL),
            provider: var(env::BDK_MODEL_PROVIDER),
            base_url: var(env::BDK_MODEL_BASE_URL),
            api_key: var(env::BDK_MODEL_API_KEY),
            ..Default::default()
        }
    }

    /// A subagent's `[model]` (`self`) over its parent's: the layer to pass as
    /// [`ModelInput::agent`] when resolving the subagent, so it runs on the parent's model
    /// unless it sets its own. The command line and `BDK_MODEL*` still sit above both.
    ///
    /// Fields the subagent sets win; the rest come from the parent, with the rule [`resolve()`]
    /// applies between layers: connection settings (provider, base URL, key, key variable)
    /// belong to their model. When the subagent's provider (its `provider`, else inferred from
    /// its model id) differs from the parent's, nothing of the parent's is taken, model
    /// included. The parent's params and pricing apply only while the subagent runs the
    /// parent's model; its own params override the parent's key by key.
    pub fn inherit(&self, parent: &ModelLayer) -> ModelLayer {
        let set = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
        let provider_of = |layer: &ModelLayer| {
            set(&layer.provider)
                .map(|p| p.parse::<ProviderKind>().ok())
                .unwrap_or_else(|| set(&layer.model).and_then(|m| ProviderKind::infer(&m)))
        };
        let own = set(&self.provider).is_some() || set(&self.model).and_then(|m| ProviderKind::infer(&m)).is_some();
        if own && provider_of(self) != provider_of(parent) {
            return self.clone();
        }
        let model = set(&self.model).or_else(|| set(&parent.model));
        let same_model = set(&self.model).is_none() || model == set(&parent.model);
        let mut params = if same_model { parent.params.clone() } else { Map::new() };
        params.extend(self.params.iter().map(|(k, v)| (k.clone(), v.clone())));
        let pick = |own: &Option<String>, theirs: &Option<String>| set(own).or_else(|| set(theirs));
        ModelLayer {
            model,
            provider: pick(&self.provider, &parent.provider),
            base_url: pick(&self.base_url, &parent.base_url),
            api_key: pick(&self.api_key, &parent.api_key),
            api_key_env: pick(&self.api_key_env, &parent.api_key_env),
            params,
            pricing: self.pricing.or(if same_model { parent.pricing } else { None }),
        }
    }
}

/// What resolution reads besides the environment: the command line and the agent's `[model]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelInput {
    pub cli: ModelLayer,
    pub agent: ModelLayer,
}

/// The model an agent runs on.
#[derive(Clone, PartialEq)]
pub struct ResolvedModel {
    /// `None` when no provider could be told; `problem` says why.
    pub provider: Option<ProviderKind>,
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Where the key came from (a variable name or `--api-key`), for `info`; never the key.
    pub api_key_source: Option<String>,
    pub params: ModelParams,
    /// The script for the scripted provider (`params.script`).
    pub script: Option<Value>,
    /// The agent's pricing if it is for this model, else the built-in table's.
    pub price: Option<Price>,
    /// Why no call can succeed, with what to set.
    pub problem: Option<String>,
    /// Settings that were ignored, for diagnostics.
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for ResolvedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedModel")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_source", &self.api_key_source)
            .field("params", &self.params)
            .field("price", &self.price)
            .field("problem", &self.problem)
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

const LAYER_NAMES: [&str; 3] = ["the command line", "the environment", "agent.toml"];

/// Resolves `input` with the environment read through `env` (pass
/// `&|name| std::env::var(name).ok()` in production; tests pass a map).
pub fn resolve(input: &ModelInput, env: &dyn Fn(&str) -> Option<String>) -> ResolvedModel {
    let env_layer = ModelLayer::from_env(env);
    let layers: [&ModelLayer; 3] = [&input.cli, &env_layer, &input.agent];
    let set = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let mut warnings = Vec::new();

    let id_layer = layers.iter().position(|l| set(&l.model).is_some()).unwrap_or(layers.len());
    let model = layers.get(id_layer).and_then(|l| set(&l.model)).unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let inferred = ProviderKind::infer(&model);

    // Which layers' connection settings apply (see the module docs).
    let kept: Vec<(usize, &ModelLayer)> = layers
        .iter()
        .enumerate()
        .filter(|(i, layer)| {
            let Some(target) = inferred else { return true };
            if *i <= id_layer {
                return true;
            }
            let own = set(&layer.provider)
                .and_then(|p| p.parse().ok())
                .or_else(|| set(&layer.model).and_then(|m| ProviderKind::infer(&m)));
            let keep = own == Some(target);
            if !keep && (layer.provider.is_some() || layer.base_url.is_some() || layer.api_key_env.is_some()) {
                warnings.push(format!("{}: provider settings ignored because the model is `{model}`", LAYER_NAMES[*i]));
            }
            keep
        })
        .map(|(i, layer)| (i, *layer))
        .collect();

    let first =
        |field: fn(&ModelLayer) -> &Option<String>| kept.iter().find_map(|(i, l)| set(field(l)).map(|v| (*i, v)));
    let base_url = first(|l| &l.base_url).map(|(_, url)| url);
    let mut problem = None;
    let provider = match first(|l| &l.provider) {
        Some((i, name)) => match name.parse::<ProviderKind>() {
            Ok(kind) => Some(kind),
            Err(err) => {
                problem = Some(format!("{err}, set in {}", LAYER_NAMES[i]));
                None
            }
        },
        None => inferred.or(base_url.as_ref().map(|_| ProviderKind::OpenAiCompatible)),
    };
    if provider.is_none() && problem.is_none() {
        problem = Some(format!(
            "cannot tell which provider serves model `{model}`: set {} or `[model] provider` in agent.toml",
            env::BDK_MODEL_PROVIDER
        ));
    }

    let agent_kept = kept.iter().any(|(i, _)| *i == 2);
    let (mut params, script) = parse_params(&input.agent.params, &mut warnings);
    if id_layer == layers.len() {
        params = params.or(&default_model_params());
    }
    let agent_model = set(&input.agent.model);
    let price = match input.agent.pricing {
        Some(price) if agent_kept && agent_model.as_deref().is_none_or(|m| m == model) => Some(price),
        // The scripted provider calls no paid model, whatever id it was given.
        _ if provider == Some(ProviderKind::Scripted) => None,
        _ => price_for(&model),
    };

    let mut resolved = ResolvedModel {
        provider,
        base_url: base_url.or_else(|| provider.and_then(|p| p.default_base_url()).map(str::to_owned)),
        model,
        api_key: None,
        api_key_source: None,
        params,
        script,
        price,
        problem,
        warnings,
    };
    if let Some(kind) = provider {
        connect(&mut resolved, kind, &kept, env);
    }
    resolved
}

/// Fills the key and checks the provider can be reached.
fn connect(
    resolved: &mut ResolvedModel,
    kind: ProviderKind,
    kept: &[(usize, &ModelLayer)],
    env: &dyn Fn(&str) -> Option<String>,
) {
    if kind == ProviderKind::Scripted {
        resolved.base_url = None;
        return;
    }
    let lookup = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let direct = kept.iter().find_map(|(i, l)| {
        let source = if *i == 0 { "--api-key".to_owned() } else { env::BDK_MODEL_API_KEY.to_owned() };
        l.api_key.clone().filter(|k| !k.trim().is_empty()).map(|k| (k, source))
    });
    let named = kept.iter().find_map(|(_, l)| l.api_key_env.clone().filter(|n| !n.trim().is_empty()));
    let wanted = named.clone().or_else(|| kind.api_key_env().map(str::to_owned));
    let key = direct.or_else(|| wanted.as_ref().and_then(|name| lookup(name).map(|k| (k, name.clone()))));
    match key {
        Some((key, source)) => {
            resolved.api_key = Some(key);
            resolved.api_key_source = Some(source);
        }
        None if kind.requires_key() || named.is_some() => {
            let var = wanted.unwrap_or_else(|| env::BDK_MODEL_API_KEY.to_owned());
            resolved.problem = Some(format!(
                "no API key for provider {kind} (model `{}`): set {var} (or {}); to try the agent \
                 offline, set {}=scripted (an echoing model) or give it a script \
                 (`[model] provider = \"scripted\"` with `[[model.params.script]]` steps, as \
                 examples/refunds does)",
                resolved.model,
                env::BDK_MODEL_API_KEY,
                env::BDK_MODEL_PROVIDER
            ));
        }
        None => {}
    }
    if resolved.base_url.is_none() {
        resolved.problem = Some(format!(
            "provider {kind} needs a base URL: set {} or `[model] base_url` in agent.toml",
            env::BDK_MODEL_BASE_URL
        ));
    }
}

/// Splits `[model] params` into typed settings, the scripted provider's script and extras.
fn parse_params(raw: &Map<String, Value>, warnings: &mut Vec<String>) -> (ModelParams, Option<Value>) {
    let mut params = ModelParams::default();
    let mut script = None;
    for (key, value) in raw {
        let ok = match key.as_str() {
            "effort" | "reasoning_effort" => value.as_str().and_then(Effort::parse).map(|e| params.effort = Some(e)),
            "max_tokens" => value.as_u64().and_then(|n| u32::try_from(n).ok()).map(|n| params.max_tokens = Some(n)),
            "temperature" => value.as_f64().map(|t| params.temperature = Some(t)),
            "top_p" => value.as_f64().map(|t| params.top_p = Some(t)),
            "fast" => match value {
                Value::Bool(b) => Some(*b),
                Value::String(s) => s.parse().ok(),
                _ => None,
            }
            .map(|b| params.fast = Some(b)),
            "script" => {
                script = Some(value.clone());
                Some(())
            }
            _ => {
                params.extra.insert(key.clone(), value.clone());
                Some(())
            }
        };
        if ok.is_none() {
            warnings.push(format!("agent.toml: [model] params.{key} = {value} is not valid and was ignored"));
        }
    }
    (params, script)
}

/// How HTTP providers wait and retry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderOptions {
    pub timeouts: Timeouts,
    pub retry: RetryPolicy,
}

/// Builds the provider for `resolved`: HTTP providers wrapped in [`Retrying`], the scripted one
/// as it is, and an [`UnavailableProvider`] when `resolved.problem` is set.
pub fn build(resolved: &ResolvedModel, options: &ProviderOptions) -> Arc<dyn ModelProvider> {
    let info = ProviderInfo {
        provider: resolved.provider.map_or("unavailable", |p| p.as_str()).to_owned(),
        model: resolved.model.clone(),
        base_url: resolved.base_url.clone(),
    };
    let unavailable =
        |message: String| -> Arc<dyn ModelProvider> { Arc::new(UnavailableProvider::new(info.clone(), message)) };
    if let Some(problem) = &resolved.problem {
        return unavailable(problem.clone());
    }
    let (Some(kind), Some(base_url)) = (resolved.provider, resolved.base_url.clone()) else {
        return match (resolved.provider, &resolved.script) {
            (Some(ProviderKind::Scripted), Some(script)) => match ScriptedProvider::from_json(script) {
                Ok(provider) => Arc::new(provider),
                Err(err) => unavailable(format!("agent.toml: [model] params.{err}")),
            },
            (Some(ProviderKind::Scripted), None) => Arc::new(ScriptedProvider::echo()),
            _ => unavailable(format!("no provider for model `{}`", resolved.model)),
        };
    };
    let config = HttpConfig {
        model: resolved.model.clone(),
        base_url,
        api_key: resolved.api_key.clone(),
        params: resolved.params.clone(),
        timeouts: options.timeouts,
    };
    let built: Result<Arc<dyn ModelProvider>, _> = match kind {
        ProviderKind::Anthropic => AnthropicProvider::new(config).map(|p| Arc::new(p) as Arc<dyn ModelProvider>),
        _ => OpenAiProvider::new(kind, config).map(|p| Arc::new(p) as Arc<dyn ModelProvider>),
    };
    match built {
        Ok(provider) => Arc::new(Retrying::new(provider, options.retry)),
        Err(err) => unavailable(err.to_string()),
    }
}
