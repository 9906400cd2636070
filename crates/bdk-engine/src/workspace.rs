//! Session workspace preparation before a turn: the first turn a session's actor runs asks the
//! tool registry to materialize the workspace (skills, agent-tool scripts and their catalog,
//! seeds) together with the files the message brought (`workspaceFiles`); a later turn writes
//! only its message's files, and a turn with none touches nothing. When the registry has
//! nothing to materialize and the message brought no files, no folder is created: the turn
//! creates it when a tool call first needs it. Materialization is
//! idempotent, so an actor re-created after a restart or an idle period prepares again safely.
//!
//! It owns neither what is materialized (`ToolRegistry::prepare_workspace`) nor where the
//! workspace lives (`WorkspaceStore::session_workspace`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bdk_protocol::SessionId;

use crate::engine::Core;

/// What a turn has to prepare.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkspacePrep {
    /// Files (relative path, content) its message brought.
    pub files: Vec<(String, String)>,
    /// Shared by the turns of one actor: set once the workspace has been materialized.
    pub ready: Arc<AtomicBool>,
}

impl WorkspacePrep {
    fn needed(&self) -> bool {
        !self.ready.load(Ordering::SeqCst) || !self.files.is_empty()
    }
}

/// Prepares the session workspace when this turn has to. `Ok(Some(dir))`: prepared, the
/// turn's tool calls run there; `Ok(None)`: nothing to do (the workspace is looked up when a
/// tool is first called). `Err` is the message the turn fails with.
pub(crate) async fn prepare(
    core: &Core,
    tools: &Arc<dyn bdk_tools::ToolRegistry>,
    session: &SessionId,
    prep: &WorkspacePrep,
) -> std::result::Result<Option<PathBuf>, String> {
    if !prep.needed() {
        return Ok(None);
    }
    if prep.files.is_empty() && !tools.materializes_workspace() {
        // Nothing to put there: the folder is created when a tool call first needs it.
        prep.ready.store(true, Ordering::SeqCst);
        return Ok(None);
    }
    let dir = core
        .stores
        .workspaces
        .session_workspace(session)
        .await
        .map_err(|error| format!("could not prepare the session workspace: {error}"))?;
    let tools = Arc::clone(tools);
    let files = prep.files.clone();
    let target = dir.clone();
    let prepared = tokio::task::spawn_blocking(move || tools.prepare_workspace(&target, &files)).await;
    match prepared {
        Ok(Ok(())) => {
            prep.ready.store(true, Ordering::SeqCst);
            Ok(Some(dir))
        }
        Ok(Err(error)) => Err(format!("could not prepare the session workspace: {error}")),
        Err(error) => Err(format!("could not prepare the session workspace: the task failed: {error}")),
    }
}
