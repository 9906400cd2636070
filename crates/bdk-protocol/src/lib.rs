//! Wire types shared by every BDK crate: diagnostics, the project manifest that `bdk info --json`
//! and `GET /v1/info` return, and the event vocabulary. This crate does no IO.

pub mod diagnostic;
pub mod events;
pub mod info;

pub use diagnostic::{Diagnostic, Severity};
