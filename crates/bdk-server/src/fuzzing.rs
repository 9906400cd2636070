//! One entry point that feeds arbitrary bytes to the parser of every JSON request body the host
//! accepts, for the cargo-fuzz target `request_body` (`fuzz/`). Not part of the public API.
//!
//! The properties checked (a panic is a finding): parsing returns; a refusal is always 400
//! `invalid_request` with a message; what parses was JSON; and a body type the protocol defines
//! (with `Serialize`) survives a round trip: serialized and parsed again it is the same request.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::extract::parse_json;

/// How many body types `selector` chooses among (it is taken modulo this).
pub const BODIES: u8 = 19;

/// Parses `bytes` as the body type chosen by `selector`, checking the properties above.
pub fn request_body(selector: u8, bytes: &[u8]) {
    use crate::host_services::routes as host;
    match selector % BODIES {
        0 => round_trip::<bdk_protocol::http::StartSessionRequest>(bytes),
        1 => round_trip::<bdk_protocol::http::FollowUpRequest>(bytes),
        2 => round_trip::<bdk_protocol::http::ToolCallRequest>(bytes),
        3 => drop(parses::<crate::routes::approvals::DecisionBody>(bytes)),
        4 => drop(parses::<crate::routes::evals::StartBody>(bytes)),
        5 => drop(parses::<crate::channels::github::PostBody>(bytes)),
        6 => drop(parses::<crate::host_services::mcp::ToolsBody>(bytes)),
        7 => drop(parses::<crate::host_services::mcp::CallBody>(bytes)),
        8 => drop(parses::<bdk_engine::reminders::CreateReminder>(bytes)),
        9 => drop(parses::<crate::host_services::reminders::CancelBody>(bytes)),
        10 => drop(parses::<host::KeyBody>(bytes)),
        11 => drop(parses::<host::PutBody>(bytes)),
        12 => drop(parses::<host::PrefixBody>(bytes)),
        13 => drop(parses::<host::PathBody>(bytes)),
        14 => drop(parses::<host::WriteBody>(bytes)),
        15 => drop(parses::<bdk_tools::host::SendRequest>(bytes)),
        16 => drop(parses::<crate::host_services::otel::MetricBody>(bytes)),
        17 => drop(parses::<crate::host_services::otel::TagBody>(bytes)),
        _ => drop(parses::<host::CallToolBody>(bytes)),
    }
}

/// Parses `bytes` as `T`: `Some` when accepted; a refusal must be a well-formed 400.
fn parses<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    match parse_json::<T>(bytes) {
        Ok(value) => {
            assert!(serde_json::from_slice::<Value>(bytes).is_ok(), "accepted a body that is not JSON");
            Some(value)
        }
        Err(error) => {
            assert_eq!((error.status.as_u16(), error.code), (400, "invalid_request"), "{}", error.message);
            assert!(!error.message.is_empty());
            None
        }
    }
}

/// [`parses`], then: the request serialized and parsed again is the same request (numbers
/// compared to the precision a JSON float parse keeps).
fn round_trip<T: DeserializeOwned + Serialize>(bytes: &[u8]) {
    let Some(first) = parses::<T>(bytes) else { return };
    let text = serde_json::to_vec(&first).unwrap_or_else(|e| panic!("an accepted request does not serialize: {e}"));
    let second = parse_json::<T>(&text).unwrap_or_else(|e| {
        panic!("a serialized request is refused: {} ({})", e.message, String::from_utf8_lossy(&text))
    });
    let (a, b) = (serde_json::to_value(&first), serde_json::to_value(&second));
    match (a, b) {
        (Ok(a), Ok(b)) => assert!(same(&a, &b), "round trip changed the request: {a} vs {b}"),
        _ => panic!("a parsed request does not convert to JSON"),
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            _ if x == y => true,
            (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * 4.0 * x.abs().max(y.abs()),
            _ => false,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    /// The fuzz target's seed corpus holds (so the properties run in the normal suite too), for
    /// every body type.
    #[test]
    fn the_seed_corpus_holds_the_properties() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/request_body");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            let Some((_, body)) = bytes.split_first() else { continue };
            for selector in 0..super::BODIES {
                super::request_body(selector, body);
            }
            seeds += 1;
        }
        assert!(seeds >= 5, "seeds in {}", dir.display());
    }
}
