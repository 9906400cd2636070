//! Names of the environment variables this crate reads; nothing else names them.

/// Model id for every agent, above `agent.toml`.
pub const BDK_MODEL: &str = "BDK_MODEL";
/// Provider name (`xai`, `openai`, `openai-compatible`, `anthropic`, `scripted`).
pub const BDK_MODEL_PROVIDER: &str = "BDK_MODEL_PROVIDER";
/// API root, for example `http://127.0.0.1:8080/v1` for a local llama.cpp server.
pub const BDK_MODEL_BASE_URL: &str = "BDK_MODEL_BASE_URL";
/// API key, above the provider's own variable.
pub const BDK_MODEL_API_KEY: &str = "BDK_MODEL_API_KEY";

/// Every variable above, for `info` and docs.
pub const ALL: [&str; 4] = [BDK_MODEL, BDK_MODEL_PROVIDER, BDK_MODEL_BASE_URL, BDK_MODEL_API_KEY];
