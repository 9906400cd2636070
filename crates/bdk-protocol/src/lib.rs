//! Wire types shared by every BDK crate: diagnostics, the project manifest that `bdk info --json`
//! and `GET /v1/info` return, ids, and session events. This crate does no IO (beyond asking the
//! OS for random bytes when generating an id).

pub mod diagnostic;
pub mod event;
pub mod events;
pub mod http;
pub mod ids;
pub mod info;

pub use diagnostic::{Diagnostic, Severity};
pub use event::{Event, EventData};
pub use ids::{CallId, IdError, SessionId, TurnId};
