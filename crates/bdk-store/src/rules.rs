//! The validation rules every backend applies the same way, so a key or path accepted by one
//! backend is accepted by all (and `bdk migrate --from-fs` never meets a name it cannot store).

use crate::error::{Error, Result};

/// Longest kv key, measured as the filesystem backend encodes it (`[A-Za-z0-9_-]` one byte,
/// every other byte three).
pub const MAX_KEY_ENCODED: usize = 240;

/// A kv key: non-empty, and at most [`MAX_KEY_ENCODED`] once encoded.
pub fn check_kv_key(key: &str) -> Result<()> {
    let invalid = |reason| Err(Error::InvalidKey { key: key.to_owned(), reason });
    if key.is_empty() {
        return invalid("empty");
    }
    let encoded: usize =
        key.bytes().map(|b| if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' { 1 } else { 3 }).sum();
    if encoded > MAX_KEY_ENCODED {
        return invalid("too long");
    }
    Ok(())
}

/// A `host.files` path: relative, `/`-separated, no empty, `.`, `..` or dot-leading segment.
pub fn check_file_path(path: &str) -> Result<()> {
    crate::fs::check_path(path).map(|_| ())
}

/// A firing owner or reminder id: one plain name (`[A-Za-z0-9_.-]`, not dot-leading, ≤ 200).
pub fn check_plain_name(name: &str) -> Result<()> {
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain { Ok(()) } else { Err(Error::InvalidKey { key: name.to_owned(), reason: "not a plain name" }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_the_filesystem_limits() {
        assert!(check_kv_key("pr:acme/checkout#42").is_ok());
        assert!(matches!(check_kv_key(""), Err(Error::InvalidKey { reason: "empty", .. })));
        assert!(matches!(check_kv_key(&"/".repeat(100)), Err(Error::InvalidKey { reason: "too long", .. })));
        assert!(check_kv_key(&"a".repeat(240)).is_ok());
        assert!(check_plain_name("daily-digest").is_ok());
        assert!(check_plain_name("../x").is_err());
    }
}
