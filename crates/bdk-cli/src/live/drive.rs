//! Follows one turn of a session to its end: renders each event as it lands, answers parked
//! approvals from a policy (`--approve` / `--deny`) or by asking the person (chat), and takes
//! `/stop` and ctrl-c while the turn runs. Ends at the session-level event that closes the turn
//! (`session.waiting`, `session.completed`, `session.failed`), or early when a call needs a
//! decision nobody can give.

use std::io::Write;

use anyhow::Context as _;
use bdk_protocol::event::{ApprovalDecision, ApprovalRequested};
use bdk_protocol::{Event, EventData, SessionId};
use tokio::sync::mpsc;

use super::backend::Backend;
use super::render::Render;

/// The word that makes a policy cover every tool.
pub const ALL: &str = "all";

/// Standing decisions for parked calls: `--approve TOOL|all`, `--deny TOOL|all`. A decision
/// naming the tool wins over `all`; between the two lists at the same level, deny wins.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub approve: Vec<String>,
    pub deny: Vec<String>,
}

impl Policy {
    pub fn decide(&self, tool: &str) -> Option<ApprovalDecision> {
        let names = |list: &[String], name: &str| list.iter().any(|t| t == name);
        if names(&self.deny, tool) {
            Some(ApprovalDecision::Deny)
        } else if names(&self.approve, tool) {
            Some(ApprovalDecision::Approve)
        } else if names(&self.deny, ALL) {
            Some(ApprovalDecision::Deny)
        } else if names(&self.approve, ALL) {
            Some(ApprovalDecision::Approve)
        } else {
            None
        }
    }
}

/// How the followed turn ended.
#[derive(Debug)]
pub enum Ended {
    /// The session-level event after the turn.
    Settled,
    /// A call needs approval, no policy covers it and nobody can be asked.
    NeedsApproval(ApprovalRequested),
    /// The event log closed before the turn did.
    Closed,
}

/// What the person typed while a turn ran (chat), one line at a time; `None` at end of input.
pub type Lines = mpsc::UnboundedReceiver<String>;

/// Follows `id` from event `from` until the turn closes. `input` is the person's line source
/// (chat) or `None` (run: undecided approvals end the follow with [`Ended::NeedsApproval`]).
/// Returns the events seen and how it ended.
pub async fn follow_turn<B: Backend>(
    backend: &B,
    id: &SessionId,
    from: u64,
    policy: &Policy,
    mut input: Option<&mut Lines>,
    render: &mut Render,
    out: &mut dyn Write,
) -> anyhow::Result<(Vec<Event>, Ended)> {
    let mut events = backend.follow(id, from).await?;
    let mut seen = Vec::new();
    let mut asking: Vec<ApprovalRequested> = Vec::new();
    let mut input_open = input.is_some();
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return Ok((seen, Ended::Closed)) };
                let event = event.context("reading the session's events")?;
                render.event(out, &event)?;
                let settles = matches!(
                    event.data,
                    EventData::SessionWaiting(_) | EventData::SessionCompleted(_) | EventData::SessionFailed(_)
                );
                if let EventData::ApprovalRequested(request) = &event.data {
                    match policy.decide(&request.tool_name) {
                        Some(decision) => decide(backend, id, request, decision).await?,
                        None if input_open => {
                            asking.push(request.clone());
                            if asking.len() == 1 {
                                ask(render, out, request)?;
                            }
                        }
                        None => {
                            let request = request.clone();
                            seen.push(event);
                            return Ok((seen, Ended::NeedsApproval(request)));
                        }
                    }
                }
                if let EventData::ApprovalResolved(resolved) = &event.data {
                    asking.retain(|a| a.call_id != resolved.call_id);
                }
                seen.push(event);
                if settles {
                    return Ok((seen, Ended::Settled));
                }
            }
            line = next_line(&mut input), if input_open => {
                let Some(line) = line else {
                    // End of input: undecided calls cannot be answered any more.
                    input_open = false;
                    if let Some(request) = asking.first().cloned() {
                        return Ok((seen, Ended::NeedsApproval(request)));
                    }
                    continue;
                };
                let line = line.trim();
                if line == "/stop" {
                    backend.stop(id).await?;
                } else if let Some(request) = asking.first().cloned() {
                    match yes_no(line) {
                        Some(decision) => {
                            asking.remove(0);
                            decide(backend, id, &request, decision).await?;
                            if let Some(next) = asking.first() {
                                ask(render, out, next)?;
                            }
                        }
                        None => ask(render, out, &request)?,
                    }
                } else if !line.is_empty() {
                    render.line(out, "(a turn is running: wait for it, or /stop it)")?;
                }
            }
            _ = tokio::signal::ctrl_c(), if input_open => {
                render.line(out, "(stopping the turn)")?;
                backend.stop(id).await?;
            }
        }
    }
}

async fn next_line(input: &mut Option<&mut Lines>) -> Option<String> {
    match input {
        Some(lines) => lines.recv().await,
        None => std::future::pending().await,
    }
}

fn ask(render: &mut Render, out: &mut dyn Write, request: &ApprovalRequested) -> anyhow::Result<()> {
    render.prompt(out, &format!("approve {}? [y/n] ", request.tool_name))?;
    Ok(())
}

/// `y`/`yes` approves, `n`/`no` denies; anything else asks again.
pub fn yes_no(line: &str) -> Option<ApprovalDecision> {
    match line.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(ApprovalDecision::Approve),
        "n" | "no" => Some(ApprovalDecision::Deny),
        _ => None,
    }
}

async fn decide<B: Backend>(
    backend: &B,
    id: &SessionId,
    request: &ApprovalRequested,
    decision: ApprovalDecision,
) -> anyhow::Result<()> {
    backend
        .resolve(id, &request.call_id, decision)
        .await
        .with_context(|| format!("deciding on the {} call", request.tool_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_tool_wins_over_all_and_deny_wins_a_tie() {
        let policy = Policy { approve: vec!["all".into()], deny: vec!["rm".into()] };
        assert_eq!(policy.decide("rm"), Some(ApprovalDecision::Deny));
        assert_eq!(policy.decide("ls"), Some(ApprovalDecision::Approve));
        let policy = Policy { approve: vec!["ls".into()], deny: vec!["all".into()] };
        assert_eq!(policy.decide("ls"), Some(ApprovalDecision::Approve));
        assert_eq!(policy.decide("rm"), Some(ApprovalDecision::Deny));
        assert_eq!(Policy::default().decide("rm"), None);
        let both = Policy { approve: vec!["rm".into()], deny: vec!["rm".into()] };
        assert_eq!(both.decide("rm"), Some(ApprovalDecision::Deny));
    }

    #[test]
    fn yes_and_no_in_any_case() {
        assert_eq!(yes_no("Y"), Some(ApprovalDecision::Approve));
        assert_eq!(yes_no("no"), Some(ApprovalDecision::Deny));
        assert_eq!(yes_no("maybe"), None);
    }
}
