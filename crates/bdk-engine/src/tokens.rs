//! Continuation tokens: opaque `http:<random>` tokens that rotate on every accepted follow-up,
//! and stable channel tokens `<channelId>:<key>`. Only the session's actor compares or rotates
//! them, which is what makes "exactly one racing follow-up wins" hold.

use crate::error::{EngineError, Result};

const HTTP_PREFIX: &str = "http:";

/// A fresh HTTP token: 128 random bits from the OS (`os_random`), hex-encoded.
pub(crate) fn http_token() -> String {
    let mut bytes = [0u8; 16];
    if bdk_protocol::ids::os_random(&mut bytes).is_err() {
        // The OS source does not fail on supported platforms; fall back to an id's randomness.
        let id = bdk_protocol::SessionId::generate();
        return format!("{HTTP_PREFIX}{}", &id.as_str()[4..]);
    }
    let mut token = String::with_capacity(HTTP_PREFIX.len() + 32);
    token.push_str(HTTP_PREFIX);
    bdk_protocol::ids::push_hex(&mut token, &bytes);
    token
}

/// A channel's stable token for a conversation key.
pub(crate) fn channel_token(channel: &str, key: &str) -> Result<String> {
    if channel.is_empty() || channel.contains(':') {
        return Err(EngineError::InvalidRequest(format!("invalid channel id {channel:?}")));
    }
    if key.is_empty() {
        return Err(EngineError::InvalidRequest("the continuation key is empty".into()));
    }
    Ok(format!("{channel}:{key}"))
}

/// The channel id and key of a token presented to a direct call: `<channelId>:<key>` with both
/// parts non-empty, no whitespace in the channel id and no control characters (an HTTP token is
/// channel `http`). `None` when malformed.
pub(crate) fn split(token: &str) -> Option<(&str, &str)> {
    const MAX_LEN: usize = 1024;
    let (channel, key) = token.split_once(':')?;
    let well_formed = !channel.is_empty()
        && !key.is_empty()
        && token.len() <= MAX_LEN
        && !channel.chars().any(char::is_whitespace)
        && !token.chars().any(char::is_control);
    well_formed.then_some((channel, key))
}

/// Whether a token rotates on each accepted follow-up (the built-in HTTP channel's do).
pub(crate) fn rotates(token: &str) -> bool {
    token.starts_with(HTTP_PREFIX)
}

/// Whether `presented` is the session's current token, compared in constant time.
pub(crate) fn matches(current: Option<&str>, presented: &str) -> bool {
    let Some(current) = current else { return false };
    let (a, b) = (current.as_bytes(), presented.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_tokens_are_fresh_and_rotate() {
        let (a, b) = (http_token(), http_token());
        assert_ne!(a, b);
        assert!(a.starts_with("http:") && a.len() == 5 + 32);
        assert!(a[5..].bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{a}");
        assert!(rotates(&a));
    }

    #[test]
    fn channel_tokens_are_stable() {
        let token = channel_token("github", "pr:acme/app#1").unwrap();
        assert_eq!(token, "github:pr:acme/app#1");
        assert!(!rotates(&token));
        assert!(channel_token("", "k").is_err());
        assert!(channel_token("slack", "").is_err());
    }

    #[test]
    fn direct_call_tokens_split_into_channel_and_key() {
        assert_eq!(split("github:pr:acme/app#1"), Some(("github", "pr:acme/app#1")));
        assert_eq!(split("http:abc"), Some(("http", "abc")));
        for bad in ["", "nocolon", ":key", "chan:", "a b:c", "chan:k\ney"] {
            assert_eq!(split(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn matching_is_exact() {
        assert!(matches(Some("http:ab"), "http:ab"));
        assert!(!matches(Some("http:ab"), "http:ac"));
        assert!(!matches(Some("http:ab"), "http:abc"));
        assert!(!matches(None, ""));
    }
}
