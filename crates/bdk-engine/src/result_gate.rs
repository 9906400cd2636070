//! The result gate (`result.toml`): before a turn completes, its final text goes to a command
//! that accepts it or rejects it with a message. A rejection goes back to the model as a user
//! message (recorded in the turn as `message.received` with principal [`PRINCIPAL`], so a
//! rebuilt conversation holds it at the same place) and the model revises, at most
//! `max_revisions` times; then the turn fails. A command that fails or prints no verdict, and a
//! turn with no text, fail the turn with a reason that says so.
//!
//! The command reads `{"input": {"text": ...}, "context": {...}}` on stdin (the tool envelope,
//! with the session's context) and prints `{"accept": true}`, nothing (accept), or
//! `{"accept": false, "message": "..."}`. Any exit other than 0 is a failed command.
//!
//! It depends on the core (`turn.rs` is its one caller) and on the tool command runner.

use std::sync::Arc;

use bdk_protocol::{CallId, SessionId, TurnId};
use bdk_tools::ToolOutcome;
use bdk_tools::command::{CallContext, CommandSpec, Limits, StdinShape};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::capabilities::ResultGateSpec;
use crate::engine::Core;
use crate::host::HostScope;

/// The principal of a rejection's `message.received`.
pub const PRINCIPAL: &str = "result";
/// The call-id name of a gate run.
const NAME: &str = "result";

/// What the gate made of a turn's final text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    /// Rejected: the message tells the model what to change.
    Reject(String),
    /// The gate could not decide; the turn fails with this reason.
    Fail(String),
}

/// The user message a rejection becomes.
pub(crate) fn feedback(message: &str) -> String {
    format!("The result was rejected: {message}\nRevise your answer and reply again.")
}

/// Runs the gate on `text`.
pub(crate) async fn judge(
    core: &Arc<Core>,
    gate: &ResultGateSpec,
    session: &SessionId,
    turn: &TurnId,
    text: Option<&str>,
    cancel: &CancellationToken,
) -> Verdict {
    let Some(text) = text else {
        return Verdict::Fail("the result gate got no text: the turn ended without a final answer".into());
    };
    let call_id = CallId::generate(NAME);
    let scope = HostScope::session(session.clone(), call_id.clone());
    let authority = core.host.authority.clone();
    let access = authority.as_ref().and_then(|a| a.grant(&scope));
    let context = CallContext {
        call_id: call_id.to_string(),
        session_id: Some(session.to_string()),
        turn_id: Some(turn.to_string()),
        host: access.clone(),
        state_root: core.defs().capabilities.state_root.clone(),
        ..CallContext::default()
    };
    let spec = CommandSpec {
        sandbox: None,
        name: "result.toml".into(),
        argv: gate.command.clone(),
        cwd: gate.cwd.clone(),
        timeout: gate.timeout,
        limits: Limits::default(),
        stdin: StdinShape::Envelope,
    };
    let outcome = bdk_tools::command::run(&spec, &context, &json!({ "text": text }), cancel.child_token()).await;
    if let (Some(authority), Some(access)) = (&authority, &access) {
        authority.revoke(access);
    }
    verdict(&outcome)
}

/// Reads a verdict from the command's outcome.
fn verdict(outcome: &ToolOutcome) -> Verdict {
    if outcome.is_error {
        let detail = match &outcome.result {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        return Verdict::Fail(format!("the result command failed: {}", clip(detail.trim())));
    }
    match &outcome.result {
        Value::Null => Verdict::Accept,
        Value::String(text) if text.trim().is_empty() => Verdict::Accept,
        Value::Object(map) => match map.get("accept") {
            Some(Value::Bool(true)) => Verdict::Accept,
            Some(Value::Bool(false)) => {
                let message = map.get("message").and_then(Value::as_str).map(str::trim).unwrap_or_default();
                Verdict::Reject(if message.is_empty() { "no reason was given".into() } else { message.to_owned() })
            }
            _ => no_verdict(&outcome.result),
        },
        other => no_verdict(other),
    }
}

fn no_verdict(printed: &Value) -> Verdict {
    let shown = match printed {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Verdict::Fail(format!(
        "the result command printed no verdict (expected {{\"accept\": true}} or {{\"accept\": false, \"message\": \"...\"}}): {}",
        clip(shown.trim())
    ))
}

fn clip(text: &str) -> String {
    const MAX: usize = 400;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_stdout() {
        assert_eq!(verdict(&ToolOutcome::ok(json!({"accept": true}))), Verdict::Accept);
        assert_eq!(verdict(&ToolOutcome::ok(Value::String(String::new()))), Verdict::Accept);
        assert_eq!(
            verdict(&ToolOutcome::ok(json!({"accept": false, "message": "cite a source"}))),
            Verdict::Reject("cite a source".into())
        );
        assert!(matches!(verdict(&ToolOutcome::ok(json!("garbage"))), Verdict::Fail(m) if m.contains("no verdict")));
        assert!(matches!(verdict(&ToolOutcome::ok(json!({"accept": "yes"}))), Verdict::Fail(_)));
        assert!(matches!(verdict(&ToolOutcome::error("boom")), Verdict::Fail(m) if m.contains("failed: boom")));
    }
}
