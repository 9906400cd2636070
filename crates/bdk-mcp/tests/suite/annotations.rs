//! Guards the effect of advertised tools: a tool its server annotates `readOnlyHint: true` is a
//! read (a dry-run session runs it), any other is a write (a dry-run session gets the stub). The
//! server is an rmcp server in this process, reached as a peer (`agent = "<slug>"`) through a
//! `PeerSlot`, which also guards the in-process peer path of the hub.

use std::sync::Arc;

use bdk_mcp::{McpTools, PeerConnector, PeerSlot};
use bdk_project::model::{Advertise, Transport};
use bdk_tools::{Effect, ToolInvocation, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerInfo, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::def;

#[derive(Debug, Clone)]
struct Ledger;

fn tool(name: &str, read_only: bool) -> Tool {
    let schema = json!({"type": "object"}).as_object().unwrap().clone();
    Tool {
        name: name.to_owned().into(),
        title: None,
        description: Some(format!("{name} the ledger").into()),
        input_schema: Arc::new(schema),
        output_schema: None,
        annotations: Some(ToolAnnotations::new().read_only(read_only)),
        execution: None,
        icons: None,
        meta: None,
    }
}

impl ServerHandler for Ledger {
    fn get_info(&self) -> ServerInfo {
        ServerInfo { capabilities: ServerCapabilities::builder().enable_tools().build(), ..ServerInfo::default() }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult { tools: vec![tool("read", true), tool("write", false)], ..ListToolsResult::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![Content::text(format!("{} ran", request.name))]))
    }
}

#[derive(Debug)]
struct InProcess;

impl PeerConnector for InProcess {
    fn connect(&self, slug: &str) -> Option<tokio::io::DuplexStream> {
        if slug != "ledger" {
            return None;
        }
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = Ledger.serve(server).await {
                let _ = running.waiting().await;
            }
        });
        Some(client)
    }
}

#[tokio::test]
async fn read_only_annotations_decide_effect_and_dry_run() {
    let slot = PeerSlot::default();
    slot.set(Arc::new(InProcess));
    let mut ledger = def("ledger", Transport::Agent { slug: "ledger".into() });
    ledger.advertise = Advertise::All;
    let missing = def("missing", Transport::Agent { slug: "nobody".into() });
    let hub = bdk_mcp::McpHub::new(&[ledger, missing], std::env::temp_dir(), slot);
    let tools = McpTools::new(Arc::new(bdk_tools::NoTools), hub);
    tools.refresh().await;
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read", "write", "mcp"], "advertise_tools = true lists all; `missing` keeps the mcp tool");
    assert_eq!(tools.effect("read", &json!({})), Effect::Read);
    assert_eq!(tools.effect("write", &json!({})), Effect::Write);

    let dry = |name: &str| ToolInvocation { dry_run: true, ..ToolInvocation::generate(name, json!({})) };
    let read = tools.call(dry("read"), CancellationToken::new()).await;
    assert_eq!((read.is_error, read.stubbed, read.result), (false, false, json!("read ran")));
    let write = tools.call(dry("write"), CancellationToken::new()).await;
    assert!(write.stubbed, "a dry-run write is stubbed: {write:?}");

    let unmounted = tools
        .call(
            ToolInvocation::generate("mcp", json!({"action": "list_tools", "server": "missing"})),
            CancellationToken::new(),
        )
        .await;
    assert!(unmounted.is_error);
    assert!(unmounted.result.as_str().unwrap().contains("agent `nobody` is not mounted"), "{unmounted:?}");
}
