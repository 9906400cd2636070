//! Running the command of timed work (a schedule's `run`, a named reminder handler) the way a
//! tool command runs: the agent folder as cwd, one JSON object on stdin, a timeout that kills
//! the process group, host services granted for exactly as long as it runs, and an extension's
//! `config` when an extension contributed it. It also waits for a task session to end. Shared
//! by `schedules/` and `reminders/` (and the server's channel handlers); decides nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bdk_protocol::{CallId, EventData, SessionId};
use bdk_tools::ToolOutcome;
use bdk_tools::command::{CallContext, CommandSpec, Limits, StdinShape};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::engine::Core;
use crate::host::HostScope;
use crate::types::Principal;

/// One command to run for timed work.
#[derive(Debug, Clone)]
pub struct TimedCommand {
    /// For messages and the call id (`schedule-<id>`, `reminder-<name>`).
    pub name: String,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// The session the command acts in (a reminder's), if any.
    pub session_id: Option<SessionId>,
    /// Who host `send` and `callTool` act as.
    pub principal: Principal,
    /// The namespace of the extension that contributed the command (see
    /// `bdk_project::formats::namespace_of`): it gets that mount's `config` like the
    /// extension's tools do (`BDK_EXTENSION`, `BDK_EXTENSION_CONFIG`, `context.extension`).
    /// `None` for the project's own.
    pub extension: Option<String>,
}

/// Runs `command` with `input`; a timeout or failure is an `is_error` outcome.
pub(crate) async fn run(core: &Arc<Core>, command: &TimedCommand, input: &Value) -> ToolOutcome {
    let call_id = CallId::generate(&command.name);
    let scope = HostScope {
        session_id: command.session_id.clone(),
        call_id: call_id.clone(),
        principal: Some(command.principal.clone()),
    };
    let authority = core.host.authority.clone();
    let access = authority.as_ref().and_then(|a| a.grant(&scope));
    let context = CallContext {
        call_id: call_id.to_string(),
        session_id: command.session_id.as_ref().map(ToString::to_string),
        host: access.clone(),
        extension: command.extension.as_ref().and_then(|namespace| {
            core.defs().capabilities.extensions.iter().find(|e| &e.namespace == namespace).cloned()
        }),
        ..CallContext::default()
    };
    let spec = CommandSpec {
        sandbox: None,
        name: command.name.clone(),
        argv: command.argv.clone(),
        cwd: command.cwd.clone(),
        timeout: command.timeout,
        limits: Limits::default(),
        stdin: StdinShape::Envelope,
    };
    let outcome = bdk_tools::command::run(&spec, &context, input, core.root.child_token()).await;
    if let (Some(authority), Some(access)) = (&authority, &access) {
        authority.revoke(access);
    }
    outcome
}

/// How a task session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionEnd {
    Completed,
    Failed(String),
}

/// Follows `session` until it ends. `None` when the stream stops first (the host is shutting
/// down): the firing stays open and the next start picks it up.
pub(crate) async fn session_end(
    core: &Arc<Core>,
    session: &SessionId,
    principal: &Principal,
    cancel: &CancellationToken,
) -> Option<SessionEnd> {
    core.owned_record(session, principal).await.ok()?;
    let stream = core.stores.events.follow(session, 0).await.ok()?;
    let mut stream = crate::engine::Following::wrap(stream, core, session);
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return None,
            next = stream.next() => next,
        };
        match next? {
            Ok(event) => match &event.data {
                EventData::SessionCompleted(_) => return Some(SessionEnd::Completed),
                EventData::SessionFailed(failed) => return Some(SessionEnd::Failed(failed.message.clone())),
                _ => {}
            },
            Err(_) => return None,
        }
    }
}
