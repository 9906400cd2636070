//! Identifier newtypes (`SessionId`, `TurnId`, `CallId`): generation, parsing and validation.
//! Ids travel as plain JSON strings. Storage and routing rely on every valid id being safe as one
//! path segment and one URL segment, which is what validation guarantees.
//!
//! Generated ids end in a 26-character suffix: 48 bits of milliseconds since the Unix epoch and
//! 80 random bits, in lowercase Crockford base32 (the ULID layout). Ids made by one process
//! therefore sort by creation time, so a directory listing of sessions is already in order.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest id accepted, prefix included.
pub const MAX_ID_LEN: usize = 160;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdError {
    pub kind: &'static str,
    pub value: String,
    pub reason: &'static str,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {} {:?}: {}", self.kind, self.value, self.reason)
    }
}

impl std::error::Error for IdError {}

/// Defines a prefixed string id with `generate`, `parse`, `as_str`, `Display`, `FromStr` and serde.
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// Validates `value` as an id of this kind.
            pub fn parse(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                match validate(&value, $prefix) {
                    Ok(()) => Ok(Self(value)),
                    Err(reason) => Err(IdError { kind: $kind, value, reason }),
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::parse(value).map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// A session: `ses_<suffix>`. Names the folder `sessions/<id>/` and the stream route.
    SessionId,
    "ses_",
    "session id"
);

prefixed_id!(
    /// A turn within a session: `turn_<suffix>`. Session-bound direct tool calls get one too.
    TurnId,
    "turn_",
    "turn id"
);

prefixed_id!(
    /// A tool call: `tool_<toolName>_<suffix>`, as in `actions.requested` and `action.result`.
    CallId,
    "tool_",
    "call id"
);

impl SessionId {
    pub fn generate() -> Self {
        Self(format!("{}{}", Self::PREFIX, suffix()))
    }
}

impl TurnId {
    pub fn generate() -> Self {
        Self(format!("{}{}", Self::PREFIX, suffix()))
    }
}

impl CallId {
    /// A new call id for `tool_name`. Characters outside `[A-Za-z0-9_-]` become `-`, so any
    /// name still yields a valid id.
    pub fn generate(tool_name: &str) -> Self {
        let name: String = tool_name
            .chars()
            .take(64)
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
            .collect();
        let name = if name.is_empty() { "call".to_owned() } else { name };
        Self(format!("{}{}_{}", Self::PREFIX, name, suffix()))
    }

    /// The tool name embedded in a generated id (everything between the prefix and the last `_`).
    pub fn tool_name(&self) -> Option<&str> {
        let rest = &self.0[Self::PREFIX.len()..];
        rest.rsplit_once('_').map(|(name, _)| name).filter(|name| !name.is_empty())
    }
}

/// The rule every id follows: the prefix, then 1.. characters of `[A-Za-z0-9_-]`, at most
/// [`MAX_ID_LEN`] in all. No `.`, `/` or `\`, so an id is never a path traversal.
fn validate(value: &str, prefix: &str) -> Result<(), &'static str> {
    let Some(rest) = value.strip_prefix(prefix) else {
        return Err("wrong prefix");
    };
    if rest.is_empty() {
        return Err("empty after the prefix");
    }
    if value.len() > MAX_ID_LEN {
        return Err("too long");
    }
    if !rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err("only letters, digits, '_' and '-' are allowed");
    }
    Ok(())
}

const CROCKFORD: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// 26 base32 characters: 48-bit millisecond timestamp, then 80 random bits.
fn suffix() -> String {
    let millis = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let mut random = [0u8; 10];
    fill_random(&mut random);
    let mut value: u128 = (millis & 0xFFFF_FFFF_FFFF) << 80;
    for (i, byte) in random.iter().enumerate() {
        value |= u128::from(*byte) << (8 * (9 - i));
    }
    (0..26).rev().map(|i| CROCKFORD[((value >> (5 * i)) & 0x1F) as usize] as char).collect()
}

/// Appends `bytes` to `out` as lowercase hex digits, two per byte: how tokens, signatures and
/// delivery ids are written.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
    }
}

/// Bytes of OS randomness a thread draws at once (see [`os_random`]).
const RANDOM_BUFFER: usize = 256;

/// Fills `dest` with randomness from the OS, the source ids, continuation tokens and host
/// tokens come from. A thread draws [`RANDOM_BUFFER`] bytes at a time and hands them out
/// once each, erasing what it hands out, so one `getrandom` call serves a few turns' ids and
/// tokens instead of one call each. Fails only if the OS source does.
pub fn os_random(dest: &mut [u8]) -> Result<(), getrandom::Error> {
    struct Pool {
        bytes: [u8; RANDOM_BUFFER],
        /// Bytes from here on are not handed out yet.
        next: usize,
    }
    thread_local! {
        static POOL: std::cell::RefCell<Pool> =
            const { std::cell::RefCell::new(Pool { bytes: [0; RANDOM_BUFFER], next: RANDOM_BUFFER }) };
    }
    if dest.len() > RANDOM_BUFFER / 4 {
        return getrandom::fill(dest);
    }
    POOL.with_borrow_mut(|pool| {
        if RANDOM_BUFFER - pool.next < dest.len() {
            getrandom::fill(&mut pool.bytes)?;
            pool.next = 0;
        }
        let taken = &mut pool.bytes[pool.next..pool.next + dest.len()];
        dest.copy_from_slice(taken);
        taken.fill(0);
        pool.next += dest.len();
        Ok(())
    })
}

/// OS randomness ([`os_random`]). If the OS source fails (it does not on supported platforms),
/// fall back to the randomly keyed std hasher mixed with a counter, so generation never panics.
fn fill_random(dest: &mut [u8]) {
    if os_random(dest).is_ok() {
        return;
    }
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for chunk in dest.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        let bytes = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_per_byte() {
        let mut out = String::from("x:");
        push_hex(&mut out, &[0x00, 0x0f, 0xa5, 0xff]);
        assert_eq!(out, "x:000fa5ff");
    }

    #[test]
    fn os_random_hands_each_drawn_byte_out_once() {
        // More than one buffer's worth, in pieces that do not divide it, and pieces too big
        // for it: no two 16-byte draws alike, and none all zero (erased bytes handed out again).
        let mut seen = std::collections::HashSet::new();
        for size in [16, 10, 32, 7, 16, 64, 16, 100, 16] {
            for _ in 0..40 {
                let mut bytes = vec![0u8; size];
                os_random(&mut bytes).unwrap();
                assert!(bytes.iter().any(|b| *b != 0), "{size} bytes all zero");
                if size == 16 {
                    assert!(seen.insert(bytes), "a 16-byte draw repeated");
                }
            }
        }
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("ses_"));
        assert_eq!(a.as_str().len(), 4 + 26);
        assert_eq!(SessionId::parse(a.as_str()).unwrap(), a);
        let turn = TurnId::generate();
        assert_eq!(TurnId::parse(turn.to_string()).unwrap(), turn);
    }

    #[test]
    fn generated_ids_sort_by_time() {
        let a = SessionId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = SessionId::generate();
        assert!(a < b, "{a} < {b}");
    }

    #[test]
    fn call_ids_carry_the_tool_name() {
        let id = CallId::generate("inspect_pr");
        assert!(id.as_str().starts_with("tool_inspect_pr_"));
        assert_eq!(id.tool_name(), Some("inspect_pr"));
        assert_eq!(CallId::generate("a/b c").tool_name(), Some("a-b-c"));
        assert_eq!(CallId::generate("").tool_name(), Some("call"));
        assert_eq!(CallId::parse("tool_x").unwrap().tool_name(), None);
    }

    #[test]
    fn parse_rejects_unsafe_or_foreign_values() {
        for bad in ["", "ses_", "turn_abc", "ses_../x", "ses_a/b", "ses_a.b", "ses_a b", "ses_\u{e9}"] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(SessionId::parse(format!("ses_{}", "a".repeat(MAX_ID_LEN))).is_err());
        let err = SessionId::parse("nope").unwrap_err();
        assert_eq!(err.to_string(), "invalid session id \"nope\": wrong prefix");
    }

    #[test]
    fn serde_uses_plain_strings() {
        let id = SessionId::parse("ses_abc").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"ses_abc\"");
        let back: SessionId = serde_json::from_str("\"ses_abc\"").unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<SessionId>("\"ses_a/b\"").is_err());
    }
}
