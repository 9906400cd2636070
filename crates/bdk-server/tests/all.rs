//! Integration tests for the HTTP host: real listeners on 127.0.0.1:0, requests and NDJSON
//! streams read as a client reads them, a scripted model for deterministic turns.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
