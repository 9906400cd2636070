//! Every mounted agent as an MCP server: `/v1/mcp` (`ask`, `check`, `call_tool`) and
//! `/v1/mcp/tools` (each server tool as its own MCP tool), streamable HTTP in stateless mode
//! (POST carries the protocol; GET and DELETE answer 405), behind the agent's auth chain. The
//! same `/v1/mcp` handler serves in-process peers (`agent = "<slug>"` connections) over an
//! in-memory stream ([`LocalPeers`]). The protocol is rmcp's; this module only maps tools to
//! the engine.

use std::sync::{Arc, Weak};

use axum::Router;
use bdk_mcp::PeerConnector;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::DuplexStream;
use tokio_util::sync::CancellationToken;

pub mod agent;
pub mod tools;
mod wait;

pub use agent::AgentMcp;
pub use tools::ToolsMcp;

use crate::state::Agent;

/// How many bytes an in-process peer stream buffers each way.
const PEER_BUFFER: usize = 256 * 1024;

fn config(cancel: &CancellationToken) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig {
        sse_keep_alive: None,
        sse_retry: None,
        stateful_mode: false,
        cancellation_token: cancel.child_token(),
    }
}

/// `/v1/mcp` and `/v1/mcp/tools` for `agent`, relative to its base path. The caller puts them
/// behind the auth layer. `cancel` ends their streams at shutdown.
pub fn routes<S: Clone + Send + Sync + 'static>(agent: &Agent, cancel: &CancellationToken) -> Router<S> {
    let sessions = Arc::new(LocalSessionManager::default());
    let ask = {
        let agent = agent.clone();
        StreamableHttpService::new(move || Ok(AgentMcp::http(agent.clone())), Arc::clone(&sessions), config(cancel))
    };
    let tools = {
        let agent = agent.clone();
        StreamableHttpService::new(move || Ok(ToolsMcp::new(agent.clone())), sessions, config(cancel))
    };
    Router::new().route_service("/v1/mcp", ask).route_service("/v1/mcp/tools", tools)
}

/// In-process MCP sessions with the agents of one host, opened for agent `caller`.
#[derive(Debug)]
pub struct LocalPeers {
    agents: Weak<Vec<Agent>>,
    caller: String,
}

impl LocalPeers {
    pub fn new(agents: &Arc<Vec<Agent>>, caller: &str) -> Self {
        Self { agents: Arc::downgrade(agents), caller: caller.to_owned() }
    }
}

impl PeerConnector for LocalPeers {
    fn connect(&self, slug: &str) -> Option<DuplexStream> {
        let agents = self.agents.upgrade()?;
        let agent = agents.iter().find(|a| a.slug() == slug)?.clone();
        let (client, server) = tokio::io::duplex(PEER_BUFFER);
        let handler = AgentMcp::peer(agent, &self.caller);
        tokio::spawn(async move {
            match handler.serve(server).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(error) => tracing::warn!(%error, "an in-process MCP peer session failed to open"),
            }
        });
        Some(client)
    }
}
