//! Integration tests for the `bdk` binary: run as a user runs it, read what it prints.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
