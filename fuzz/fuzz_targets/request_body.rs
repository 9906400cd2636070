//! Feeds arbitrary bytes to the parser of every JSON request body the host accepts; the first
//! byte picks the body type. The properties are checked in `bdk_server::fuzzing`: parsing
//! returns, a refusal is a well-formed 400 `invalid_request`, and protocol requests survive a
//! serialize/parse round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    bdk_server::fuzzing::request_body(selector, body);
});
