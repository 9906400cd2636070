//! The providers BDK knows by name, with each one's default URL, key variable and model.

use std::fmt;
use std::str::FromStr;

use crate::types::{Effort, ModelParams};

/// The model an agent runs on when nothing names one.
pub const DEFAULT_MODEL: &str = "grok-4.5";

/// The settings that come with [`DEFAULT_MODEL`] when nothing names a model: `effort = "high"`,
/// `fast = true` (the reference's default). Naming `grok-4.5` explicitly does not add them.
pub fn default_model_params() -> ModelParams {
    ModelParams { effort: Some(Effort::High), fast: Some(true), ..Default::default() }
}

/// A provider name as `agent.toml`, `BDK_MODEL_PROVIDER` and `--provider` spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// xAI's OpenAI-compatible API.
    Xai,
    /// OpenAI's Chat Completions API.
    OpenAi,
    /// Any Chat Completions server at a `base_url` (llama.cpp, vLLM, Ollama, LM Studio, ...).
    OpenAiCompatible,
    /// Anthropic's Messages API.
    Anthropic,
    /// The deterministic test and demo provider; no network.
    Scripted,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 5] = [
        ProviderKind::Xai,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiCompatible,
        ProviderKind::Anthropic,
        ProviderKind::Scripted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Xai => "xai",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiCompatible => "openai-compatible",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// Where requests go unless a `base_url` is given.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Xai => Some("https://api.x.ai/v1"),
            ProviderKind::OpenAi => Some("https://api.openai.com/v1"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com/v1"),
            ProviderKind::OpenAiCompatible | ProviderKind::Scripted => None,
        }
    }

    /// The environment variable holding the key, unless `api_key_env` names another.
    pub fn api_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Xai => Some("XAI_API_KEY"),
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::OpenAiCompatible | ProviderKind::Scripted => None,
        }
    }

    /// Whether a call without a key is pointless (local servers usually need none).
    pub fn requires_key(self) -> bool {
        matches!(self, ProviderKind::Xai | ProviderKind::OpenAi | ProviderKind::Anthropic)
    }

    /// Guesses the provider from a model id: `claude-*` → anthropic, `grok-*` → xai,
    /// `gpt-*`, `chatgpt-*` and `o<digit>*` → openai.
    pub fn infer(model: &str) -> Option<ProviderKind> {
        let id = model.trim().to_ascii_lowercase();
        let o_series = id.strip_prefix('o').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if id.starts_with("claude-") {
            Some(ProviderKind::Anthropic)
        } else if id.starts_with("grok-") {
            Some(ProviderKind::Xai)
        } else if id.starts_with("gpt-") || id.starts_with("chatgpt-") || o_series {
            Some(ProviderKind::OpenAi)
        } else {
            None
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().to_ascii_lowercase();
        ProviderKind::ALL.into_iter().find(|kind| kind.as_str() == value).ok_or_else(|| {
            let names: Vec<_> = ProviderKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown provider `{value}` (expected one of {})", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_from_model_ids() {
        assert_eq!(ProviderKind::infer("claude-sonnet-4-5"), Some(ProviderKind::Anthropic));
        assert_eq!(ProviderKind::infer("grok-4.5"), Some(ProviderKind::Xai));
        assert_eq!(ProviderKind::infer("gpt-5-mini"), Some(ProviderKind::OpenAi));
        assert_eq!(ProviderKind::infer("o3"), Some(ProviderKind::OpenAi));
        assert_eq!(ProviderKind::infer("o4-mini"), Some(ProviderKind::OpenAi));
        assert_eq!(ProviderKind::infer("ollama-llama3"), None);
        assert_eq!(ProviderKind::infer("qwen3:8b"), None);
    }

    #[test]
    fn parses_names() {
        for kind in ProviderKind::ALL {
            assert_eq!(kind.as_str().parse::<ProviderKind>(), Ok(kind));
        }
        assert!("bedrock".parse::<ProviderKind>().is_err());
    }
}
