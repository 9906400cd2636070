//! The bdk-mcp integration suite: one binary, one module per behaviour (see `suite/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
