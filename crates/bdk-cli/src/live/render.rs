//! A session's events as a person reads them while they happen: reply text as it streams,
//! reasoning dimmed (on a colour terminal; hidden otherwise unless asked for), one line per
//! tool call and result, approvals, and a turn's failure. Colour only when asked for (a
//! terminal without `NO_COLOR`); the same text without escapes otherwise.

use std::io::{self, Write};

use bdk_protocol::event::ApprovalDecision;
use bdk_protocol::{Event, EventData};
use serde_json::Value;

const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

/// Whether a stream should carry colour: it is a terminal and `NO_COLOR` is unset or empty.
pub fn colour_for(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Renders events incrementally; keeps track of whether the cursor sits at a line start.
#[derive(Debug)]
pub struct Render {
    colour: bool,
    reasoning: bool,
    line_start: bool,
    in_reasoning: bool,
}

impl Render {
    /// `reasoning`: print reasoning text (dimmed when `colour`).
    pub fn new(colour: bool, reasoning: bool) -> Self {
        Self { colour, reasoning, line_start: true, in_reasoning: false }
    }

    fn paint(&self, style: &str, text: &str) -> String {
        if self.colour { format!("{style}{text}{RESET}") } else { text.to_string() }
    }

    /// Ends a partial line so the next thing starts on its own.
    pub fn break_line(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if self.in_reasoning && self.colour {
            out.write_all(RESET.as_bytes())?;
        }
        self.in_reasoning = false;
        if !self.line_start {
            out.write_all(b"\n")?;
            self.line_start = true;
        }
        Ok(())
    }

    /// A whole line (a newline is added).
    pub fn line(&mut self, out: &mut dyn Write, text: &str) -> io::Result<()> {
        self.break_line(out)?;
        writeln!(out, "{text}")?;
        self.line_start = true;
        Ok(())
    }

    fn text(&mut self, out: &mut dyn Write, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        out.write_all(text.as_bytes())?;
        self.line_start = text.ends_with('\n');
        Ok(())
    }

    /// Renders one event and flushes.
    pub fn event(&mut self, out: &mut dyn Write, event: &Event) -> io::Result<()> {
        match &event.data {
            EventData::ReasoningAppended(delta) if self.reasoning => {
                if !self.in_reasoning {
                    self.break_line(out)?;
                    self.in_reasoning = true;
                    if self.colour {
                        out.write_all(DIM.as_bytes())?;
                    }
                }
                self.text(out, &delta.delta)?;
            }
            EventData::MessageAppended(delta) => {
                if self.in_reasoning {
                    self.break_line(out)?;
                }
                self.text(out, &delta.delta)?;
            }
            EventData::ActionsRequested(requested) if requested.direct != Some(true) => {
                for call in &requested.calls {
                    let line = format!("→ {} {}", call.tool_name, one_line(&call.input));
                    self.line(out, &self.paint(DIM, &line))?;
                }
            }
            EventData::ActionResult(result) if result.direct != Some(true) => {
                let text = if result.is_error {
                    self.paint(RED, &format!("← {} error: {}", result.tool_name, one_line(&result.result)))
                } else {
                    let stubbed = if result.stubbed == Some(true) { " (dry run)" } else { "" };
                    self.paint(DIM, &format!("← {}{stubbed} {}", result.tool_name, one_line(&result.result)))
                };
                self.line(out, &text)?;
            }
            EventData::ApprovalRequested(request) => {
                let line = format!("? {} {} needs approval", request.tool_name, one_line(&request.input));
                self.line(out, &self.paint(YELLOW, &line))?;
            }
            EventData::ApprovalResolved(resolved) => {
                let decision = match resolved.decision {
                    ApprovalDecision::Approve => "approved",
                    ApprovalDecision::Deny => "denied",
                    ApprovalDecision::Expired => "expired",
                };
                let line = format!("  {} {decision}", resolved.tool_name);
                self.line(out, &self.paint(DIM, &line))?;
            }
            EventData::TurnFailed(failed) => {
                let line = format!("turn {}: {}", status_word(&failed.status), failed.message);
                self.line(out, &self.paint(RED, &line))?;
            }
            EventData::TurnCompleted(_) => self.break_line(out)?,
            EventData::SubagentCalled(called) => {
                let line = format!("→ subagent {}", called.subagent);
                self.line(out, &self.paint(DIM, &line))?;
            }
            EventData::ConversationCompacted(compacted) => {
                let line = format!(
                    "(conversation compacted: {} earlier item(s) summarized to fit the context window)",
                    compacted.replaced_items
                );
                self.line(out, &self.paint(DIM, &line))?;
            }
            _ => {}
        }
        out.flush()
    }

    /// A bold prompt with no newline (the cursor waits after it).
    pub fn prompt(&mut self, out: &mut dyn Write, text: &str) -> io::Result<()> {
        self.break_line(out)?;
        out.write_all(self.paint(BOLD, text).as_bytes())?;
        out.flush()?;
        // The person's Enter ends the line.
        self.line_start = true;
        Ok(())
    }
}

fn status_word(status: &bdk_protocol::event::TurnFailStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_else(|| "failed".into())
}

/// A JSON value on one line, strings unquoted, cut at 200 characters.
pub fn one_line(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.replace('\n', " "),
        other => other.to_string(),
    };
    if text.chars().count() > 200 { format!("{}...", text.chars().take(200).collect::<String>()) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_cuts_long_values() {
        let long = Value::String("x".repeat(300));
        assert_eq!(one_line(&long).chars().count(), 203);
        assert_eq!(one_line(&Value::String("a\nb".into())), "a b");
    }

    #[test]
    fn a_compaction_is_one_line() {
        let mut render = Render::new(false, false);
        let mut out = Vec::new();
        let event = Event {
            index: 7,
            session_id: bdk_protocol::SessionId::generate(),
            turn_id: None,
            at: bdk_protocol::event::timestamp_now(),
            data: EventData::ConversationCompacted(bdk_protocol::event::ConversationCompacted {
                summary: "s".into(),
                replaced_items: 4,
                through_index: 5,
                estimated_tokens: 900,
                context_window: 1000,
                reason: "threshold".into(),
                usage: None,
            }),
        };
        render.event(&mut out, &event).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "(conversation compacted: 4 earlier item(s) summarized to fit the context window)\n"
        );
    }

    #[test]
    fn lines_start_on_their_own_after_partial_text() {
        let mut render = Render::new(false, false);
        let mut out = Vec::new();
        render.text(&mut out, "partial").unwrap();
        render.line(&mut out, "next").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "partial\nnext\n");
    }
}
