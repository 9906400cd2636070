//! MCP connections as a client (the reference's `mcp-connections/` and `host-connections/`).
//!
//! [`McpHub`] owns one agent's connections: each server starts on first use, is shared by every
//! session, is restarted (with backoff) after it dies, and is closed with the hub. [`McpTools`]
//! puts the model-facing part behind the tool registry: advertised tools under their own names,
//! and otherwise one built-in `mcp` tool that lists servers, lists a server's tools and calls
//! one. Host connections are reached through [`McpHub`] as [`bdk_tools::McpAccess`], never by
//! the model. A peer agent in the same host is reached in-process through a [`PeerConnector`].
//!
//! It speaks MCP only through `rmcp`; it never imports the engine or the server.
//!
//! Map of the crate:
//! - [`env`]: `${NAME}` placeholders, resolved each time a client opens.
//! - [`server`]: one connection's lifecycle (start, stderr tail, death, backoff, close).
//! - [`hub`]: the connections of one agent, allow/deny lists, per-call timeouts.
//! - [`convert`]: MCP results into tool outcomes.
//! - [`registry`]: [`McpTools`], the registry wrapper and the `mcp` tool.
//! - [`telemetry`]: the client span of a tool call, and its `traceparent` in `params._meta`.
//! - [`http`]: the streamable HTTP client that also sends that `traceparent` as a header.

pub mod convert;
pub mod env;
mod error;
pub mod http;
pub mod hub;
pub mod registry;
pub mod server;
pub mod telemetry;

pub use error::{McpError, Result};
pub use hub::{McpHub, PeerConnector, PeerSlot, ServerTool};
pub use registry::McpTools;
