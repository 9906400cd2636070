//! `bdk mcp list`: opens every MCP connection of each project (model and host scope), lists the
//! tools each server offers after its allow/deny lists, and closes them again. A server that
//! cannot open is reported with its error (its stderr tail included) and the exit code is 3.
//! Peer agents (`agent = "<slug>"`) are reached in-process only under `bdk serve`, so here they
//! are listed without tools.

use std::fmt::Write as _;

use anyhow::Context as _;
use bdk_mcp::hub::transport_name;
use bdk_mcp::{McpHub, PeerSlot};
use bdk_project::model::{ConnectionScope, Transport};
use serde::Serialize;

use crate::Embed;
use crate::cli::McpCommand;
use crate::exit::Exit;
use crate::report;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServerListing {
    name: String,
    scope: &'static str,
    transport: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<bdk_tools::host::McpToolInfo>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct AgentListing {
    slug: String,
    servers: Vec<ServerListing>,
}

pub fn run(command: &McpCommand, embed: &Embed) -> anyhow::Result<Exit> {
    let McpCommand::List(args) = command;
    let discovery = embed.discover(&args.dirs);
    if discovery.has_errors() {
        eprint!("{}", report::diagnostics_text(&discovery));
        return Ok(Exit::ProjectErrors);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let agents = runtime.block_on(async {
        let mut agents = Vec::new();
        for project in &discovery.projects {
            agents.push(list(project).await);
        }
        agents
    });
    let failed = agents.iter().flat_map(|a| &a.servers).any(|s| s.error.is_some());
    if args.json {
        report::emit(&format!("{}\n", serde_json::to_string_pretty(&serde_json::json!({ "agents": agents }))?));
    } else {
        report::emit(&text(&agents));
    }
    Ok(if failed { Exit::Failure } else { Exit::Ok })
}

async fn list(project: &bdk_project::Project) -> AgentListing {
    let hub = McpHub::new(&project.caps.connections, &project.bot_dir, PeerSlot::default());
    let mut servers = Vec::new();
    for def in &project.caps.connections {
        let mut listing = ServerListing {
            name: def.name.clone(),
            scope: match def.scope {
                ConnectionScope::Model => "model",
                ConnectionScope::Host => "host",
            },
            transport: transport_name(&def.transport),
            description: def.description.clone(),
            tools: None,
            error: None,
        };
        if !matches!(def.transport, Transport::Agent { .. }) {
            match hub.tools(&def.name).await {
                Ok(tools) => listing.tools = Some(tools.iter().map(|t| t.info()).collect()),
                Err(error) => listing.error = Some(error.to_string()),
            }
        }
        servers.push(listing);
    }
    hub.close().await;
    AgentListing { slug: project.slug.clone(), servers }
}

fn text(agents: &[AgentListing]) -> String {
    let mut out = String::new();
    for agent in agents {
        let _ = writeln!(out, "{}:", agent.slug);
        if agent.servers.is_empty() {
            let _ = writeln!(out, "  no MCP connections");
        }
        for server in &agent.servers {
            let _ = writeln!(out, "  {} ({}, {})", server.name, server.transport, server.scope);
            match (&server.tools, &server.error) {
                (_, Some(error)) => {
                    let _ = writeln!(out, "    error: {}", error.replace('\n', "\n      "));
                }
                (Some(tools), None) if tools.is_empty() => {
                    let _ = writeln!(out, "    no tools");
                }
                (Some(tools), None) => {
                    for tool in tools {
                        let read = if tool.read_only { " [read-only]" } else { "" };
                        let about = tool.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
                        let _ = writeln!(out, "    {}{read}  {about}", tool.name);
                    }
                }
                (None, None) => {
                    let _ = writeln!(out, "    (a peer agent: its tools are listed under `bdk serve`)");
                }
            }
        }
    }
    out
}
