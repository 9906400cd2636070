//! "Did you mean": the closest of a few known words to a near-miss (a misspelt key, folder or
//! tool name), or nothing when none is close enough to be a likely typo.

/// The candidate closest to `word`, if it is a plausible typo of it: a small edit distance
/// for its length, or a shared stem (`max_step` → `max_steps`, `tool` → `tools`).
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (strsim::damerau_levenshtein(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(distance, c)| *distance <= (c.chars().count().max(word.chars().count()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// ` (did you mean `x`?)`, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates).map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default()
}

/// The names serde lists in `expected one of `a`, `b`` (or `expected `a` or `b``).
pub fn expected_names(message: &str) -> Vec<&str> {
    let Some(at) = message.find("expected") else { return Vec::new() };
    message[at..].split('`').skip(1).step_by(2).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_are_suggested_and_strangers_are_not() {
        assert_eq!(closest("max_step", ["max_steps", "model", "tools"]), Some("max_steps"));
        assert_eq!(closest("tool", ["tools", "skills", "hooks"]), Some("tools"));
        assert_eq!(closest("reed", ["read", "write"]), Some("read"));
        assert_eq!(closest("strng", ["string", "number", "integer"]), Some("string"));
        assert_eq!(closest("zzzzzz", ["tools", "skills"]), None);
        assert_eq!(closest("x", ["tools"]), None);
    }

    #[test]
    fn serde_lists_are_read() {
        let message = "unknown field `max_step`, expected one of `name`, `max_steps`";
        assert_eq!(expected_names(message), ["name", "max_steps"]);
        assert_eq!(expected_names("unknown variant `x`, expected `read` or `write`"), ["read", "write"]);
    }
}
