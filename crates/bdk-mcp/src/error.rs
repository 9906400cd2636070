//! What can go wrong reaching an MCP server. Every variant names the server; the message is
//! what the model (as a tool error) or a host caller reads.

/// A failure to reach a server or run a call on it (not a tool's own `isError` result).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpError {
    #[error("unknown MCP server `{0}`")]
    UnknownServer(String),
    #[error("MCP server `{server}` has no tool `{tool}`")]
    UnknownTool { server: String, tool: String },
    #[error("MCP server `{server}`: tool `{tool}` is not allowed by this connection's allow_tools/deny_tools")]
    NotAllowed { server: String, tool: String },
    #[error("MCP server `{server}`: {message}")]
    Unavailable { server: String, message: String },
    #[error("MCP server `{server}`: the call to `{tool}` timed out after {seconds:.1}s")]
    Timeout { server: String, tool: String, seconds: f64 },
    #[error("MCP server `{server}`: {message}")]
    Protocol { server: String, message: String },
    #[error("MCP connections are closed: the host is shutting down")]
    Closed,
}

pub type Result<T> = std::result::Result<T, McpError>;
