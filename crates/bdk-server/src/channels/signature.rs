//! Request signatures: HMAC over the raw body with a shared secret, compared in constant time.
//!
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
//! - Slack: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:<timestamp>:<body>")>` with
//!   `X-Slack-Request-Timestamp` no more than five minutes from now (the replay window).
//! - Generic webhooks: a configurable header, algorithm (`sha256`, `sha512`) and prefix.

use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};

/// How far a Slack request's timestamp may be from now, in seconds.
pub const SLACK_REPLAY_WINDOW_SECS: i64 = 5 * 60;

/// A hash for HMAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }
}

/// Lowercase hex of HMAC(`secret`, `parts` concatenated). (HMAC takes keys of any length, so
/// the empty answer for a refused key never happens.)
pub fn hmac_hex(algorithm: Algorithm, secret: &[u8], parts: &[&[u8]]) -> String {
    let bytes = match algorithm {
        Algorithm::Sha256 => Hmac::<Sha256>::new_from_slice(secret).map(|mut mac| {
            parts.iter().for_each(|p| mac.update(p));
            mac.finalize().into_bytes().to_vec()
        }),
        Algorithm::Sha512 => Hmac::<Sha512>::new_from_slice(secret).map(|mut mac| {
            parts.iter().for_each(|p| mac.update(p));
            mac.finalize().into_bytes().to_vec()
        }),
    };
    bytes.map(|b| hex(&b)).unwrap_or_default()
}

/// Whether `presented` (the header value) is `prefix` + the HMAC of `parts`, compared in
/// constant time (hex case-insensitive).
pub fn verify(algorithm: Algorithm, secret: &[u8], parts: &[&[u8]], prefix: &str, presented: &str) -> bool {
    let Some(digest) = presented.trim().strip_prefix(prefix) else { return false };
    let Some(presented) = unhex(digest) else { return false };
    match algorithm {
        Algorithm::Sha256 => {
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else { return false };
            parts.iter().for_each(|p| mac.update(p));
            mac.verify_slice(&presented).is_ok()
        }
        Algorithm::Sha512 => {
            let Ok(mut mac) = Hmac::<Sha512>::new_from_slice(secret) else { return false };
            parts.iter().for_each(|p| mac.update(p));
            mac.verify_slice(&presented).is_ok()
        }
    }
}

/// The GitHub header value for `body`: `sha256=<hex>`.
pub fn github_signature(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(Algorithm::Sha256, secret, &[body]))
}

/// The Slack header value for `body` sent at `timestamp`: `v0=<hex>`.
pub fn slack_signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!("v0={}", hmac_hex(Algorithm::Sha256, secret, &[b"v0:", timestamp.as_bytes(), b":", body]))
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    bdk_protocol::ids::push_hex(&mut out, bytes);
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.as_bytes().chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_signatures_match_the_documented_example() {
        // GitHub's documentation: secret "It's a Secret to Everybody", payload "Hello, World!".
        let signature = github_signature(b"It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(signature, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
        let secret = b"It's a Secret to Everybody";
        assert!(verify(Algorithm::Sha256, secret, &[b"Hello, World!"], "sha256=", &signature));
        assert!(verify(
            Algorithm::Sha256,
            secret,
            &[b"Hello, World!"],
            "sha256=",
            &signature.to_uppercase().replace("SHA256=", "sha256=")
        ));
        assert!(!verify(Algorithm::Sha256, secret, &[b"Hello, World?"], "sha256=", &signature));
        assert!(!verify(Algorithm::Sha256, b"other", &[b"Hello, World!"], "sha256=", &signature));
        assert!(!verify(Algorithm::Sha256, secret, &[b"Hello, World!"], "sha256=", "sha256=zz"));
        assert!(!verify(Algorithm::Sha256, secret, &[b"Hello, World!"], "sha256=", "757107ea"));
    }

    #[test]
    fn slack_signatures_match_the_documented_example() {
        // Slack's "Verifying requests" example.
        let secret = b"8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            slack_signature(secret, "1531420618", body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn sha512_round_trips() {
        let header = format!("sha512={}", hmac_hex(Algorithm::Sha512, b"k", &[b"body"]));
        assert!(verify(Algorithm::Sha512, b"k", &[b"body"], "sha512=", &header));
        assert!(!verify(Algorithm::Sha256, b"k", &[b"body"], "sha512=", &header));
    }
}
