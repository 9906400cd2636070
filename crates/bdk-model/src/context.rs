//! Context windows: how many tokens (input and output together) a model accepts in one request,
//! per model id prefix. Like the price table, these are published figures as we last knew them;
//! an agent's `[model] context_window` overrides them, and a model missing here has no known
//! window (the engine then compacts only when the provider refuses a request as too long).

/// Built-in context windows by model id prefix (tokens).
const TABLE: &[(&str, u64)] = &[
    ("grok-4.5", 256_000),
    ("grok-4-fast", 2_000_000),
    ("grok-4.1-fast", 2_000_000),
    ("grok-4", 256_000),
    ("grok-code-fast-1", 256_000),
    ("grok-3-mini", 131_072),
    ("grok-3", 131_072),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-haiku-4-5", 200_000),
    ("claude-3-5-haiku", 200_000),
];

/// The built-in context window of `model`: the longest table entry that is `model` or a dash-,
/// dot-, colon- or at-separated prefix of it (`claude-sonnet-4-5-20250929` → `claude-sonnet-4`).
pub fn context_window_for(model: &str) -> Option<u64> {
    let model = model.trim().to_ascii_lowercase();
    TABLE
        .iter()
        .filter(|(id, _)| {
            model == *id || model.strip_prefix(id).is_some_and(|rest| rest.starts_with(['-', '.', ':', '@']))
        })
        .max_by_key(|(id, _)| id.len())
        .map(|(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(context_window_for("grok-4-fast-reasoning"), Some(2_000_000));
        assert_eq!(context_window_for("grok-4-0709"), Some(256_000));
        assert_eq!(context_window_for("claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(context_window_for("GPT-5-mini"), Some(400_000));
        assert_eq!(context_window_for("gpt-50"), None);
        assert_eq!(context_window_for("llama3"), None);
    }
}
