//! Connections to the reference MCP server (`@modelcontextprotocol/server-everything`, installed
//! by `scripts/peers/mcp-everything.sh`), built as a project file would describe them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bdk_mcp::{McpHub, PeerSlot};
use bdk_project::model::{Advertise, ConnectionDef, ConnectionScope, Transport};
use bdk_protocol::info::Source;

/// The server's entry script, or `None` (after a loud SKIPPED notice) without node.
pub fn everything() -> Option<PathBuf> {
    let dir = bdk_test_support::peers::require("mcp-everything")?;
    let entry = std::fs::read_to_string(dir.join("entry")).expect("entry file");
    Some(PathBuf::from(entry.trim()))
}

pub fn def(name: &str, transport: Transport) -> ConnectionDef {
    ConnectionDef {
        name: name.into(),
        scope: ConnectionScope::Model,
        source: Source::File,
        file: format!("bot/mcp-connections/{name}.toml"),
        description: Some(format!("the {name} server")),
        transport,
        advertise: Advertise::None,
        placeholders: Vec::new(),
        namespace: None,
        allow_tools: None,
        deny_tools: Vec::new(),
        timeout: Duration::from_secs(30),
    }
}

pub fn stdio(command: &str, args: &[&str]) -> Transport {
    Transport::Stdio { command: command.into(), args: args.iter().map(|a| a.to_string()).collect(), env: Vec::new() }
}

/// `node <entry> stdio`.
pub fn everything_stdio(entry: &Path) -> Transport {
    stdio("node", &[entry.to_str().unwrap(), "stdio"])
}

/// A hub over `defs`, with placeholders read from `vars` only.
pub fn hub(defs: &[ConnectionDef], vars: &[(&str, &str)]) -> McpHub {
    let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    McpHub::with_lookup(defs, std::env::temp_dir(), PeerSlot::default(), Arc::new(move |name| vars.get(name).cloned()))
}

/// Waits (bounded) for `cond`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn alive(pid: i32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')),
        Err(_) => false,
    }
}
