//! Host services over HTTP for command tools (DESIGN.md §3): the capability tokens behind
//! `BDK_HOST_TOKEN` ([`HostTokens`], the engine's `HostAuthority`) and the `/v1/host/...` routes
//! that serve a token's kv, files, send and callTool. The services themselves are the engine's
//! (`Engine::host_services`); this module is transport and admission only.

pub(crate) mod artifacts;
mod base64;
pub(crate) mod mcp;
pub(crate) mod otel;
pub(crate) mod reminders;
pub(crate) mod routes;
mod tokens;

pub use tokens::{HostTokens, Resolved};
