//! The eval runner's integration suite: one binary, one module per behaviour under `suite/`.

// Test helpers outside `#[test]` functions may panic too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
