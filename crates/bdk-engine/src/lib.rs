//! The session engine: one actor per live session, the turn loop against a model provider and a
//! tool registry, admission (preempt / coalesce), `max_running_turns`, continuation tokens,
//! ownership, and recovery after a restart. Everything that happens is an event appended to the
//! session's log before anyone is told; the conversation is rebuilt from that log.
//!
//! The engine holds its providers, tools and stores as trait objects and never names a concrete
//! one. Servers and the CLI drive it through [`Engine`].

mod api;
mod error;

pub use api::*;
pub use error::{EngineError, Result};
