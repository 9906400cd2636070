//! The BDK HTTP host: the session API of the reference (`docs/http.md`) over axum, in the
//! multi-agent layout (`/<slug>/v1/...` plus host routes) or `--mode single` (`/v1/...`).
//!
//! What lives here: the router ([`app`]) with one module per resource, the auth chain
//! ([`auth`]), the one error type ([`ApiError`]), the log ring buffer ([`logs`]), mounting a
//! project as an agent ([`mount`]) and serving with an orderly drain ([`serve`]). What does not:
//! sessions, turns and events (`bdk-engine`), storage (`bdk-store`), the command line
//! (`bdk-cli`).

pub mod access_log;
pub mod auth;
pub mod backend;
pub mod channels;
pub mod error;
pub mod extract;
#[doc(hidden)]
pub mod fuzzing;
pub mod host_services;
pub mod listen;
pub mod logs;
pub mod mcp;
pub mod mount;
pub mod openapi;
pub mod reload;
mod routes;
mod server;
pub mod state;
pub mod telemetry;
mod timed;
pub mod web;

pub use auth::{AuthPolicy, BearerToken, Caller};
pub use error::{ApiError, ApiResult};
pub use host_services::HostTokens;
pub use listen::ConnectionLimits;
pub use logs::{LogBuffer, LogLine};
pub use routes::app;
pub use server::{DEFAULT_DRAIN_GRACE, serve, shutdown_signal};
pub use state::{Agent, AppState, DEFAULT_BODY_LIMIT, Mode, ServeOptions};
