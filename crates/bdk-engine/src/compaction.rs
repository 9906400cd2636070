//! Long conversations: before a model step whose request would not fit the model's context
//! window, the older items of the conversation (user messages and whole turns) are replaced by
//! a summary the model writes in a separate call, recorded as `conversation.compacted` so the
//! fold (`conversation.rs`) rebuilds the same conversation after a restart.
//!
//! Policy (`agent.toml` `[compaction]`, `[model] context_window`):
//! - The window is `[model] context_window`, else the built-in table's for the turn's model
//!   (`bdk_model::context_window_for`); with neither, only a provider's refusal triggers.
//! - A request is estimated from the provider's last report plus a quarter of the bytes added
//!   since: within a turn, the previous step's input tokens; at a turn's start, the input plus
//!   output tokens of the last completed step in the log (`Conversation::reported_tokens`).
//!   With no report that applies (none yet, after a compaction), a quarter of the request's
//!   JSON bytes. Above `threshold` × window, the conversation is compacted.
//! - The current turn, the messages that asked for it and the `keep_turns` turns before them
//!   (with their own messages) are kept verbatim; whole items only, so a tool call is never
//!   separated from its result. With nothing older than that (an earlier summary aside), the
//!   request goes out as it is.
//! - A provider that still answers `context_length_exceeded` gets one compaction (keeping
//!   fewer turns when it has to) and one retry; then the turn fails with `context_length`.
//! - A summary call that fails (or says nothing) fails the turn with `compaction_failed`; the
//!   events written so far stay.
//!
//! It depends on the core (`turn.rs` calls it before each step); nothing depends on it.

use bdk_model::{Message, ModelEvent, ModelProvider, ModelRequest, Usage as ModelUsage};
use bdk_protocol::EventData;
use bdk_protocol::TurnId;
use bdk_protocol::event::ConversationCompacted;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::capabilities::CompactionSpec;
use crate::conversation::Conversation;
use crate::cost;

/// The system prompt of the summary call.
pub(crate) const SUMMARY_PROMPT: &str = "You compact a conversation between a user and an AI agent so that it \
fits the agent's context window. Write a faithful, compact summary of the transcript you are given: the user's \
goals and requests, decisions made, facts learned (names, numbers, paths, identifiers), tool calls that matter \
and what they returned, and anything still open. Write it for the agent, who will continue the conversation \
from your summary alone. Do not add anything that is not in the transcript. Answer with the summary only.";

/// Bytes per token when nothing better is known.
pub(crate) const BYTES_PER_TOKEN: usize = 4;
/// The most bytes one message contributes to the summary call's transcript.
const MAX_TRANSCRIPT_MESSAGE: usize = 8 * 1024;

/// `reason` of a compaction the estimate triggered.
pub(crate) const THRESHOLD: &str = "threshold";
/// `reason` of a compaction a provider's refusal triggered.
pub(crate) const REFUSED: &str = "context_length_exceeded";

/// What one turn knows about its requests' sizes.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// `(input tokens the provider reported, JSON bytes of that request)` of the last step.
    last: Option<(u64, usize)>,
}

impl Budget {
    /// The estimated tokens of `request` and its JSON bytes.
    pub fn estimate(&self, request: &ModelRequest) -> (u64, usize) {
        let bytes = json_len(request);
        let tokens = match self.last {
            Some((tokens, before)) => tokens + (bytes.saturating_sub(before) / BYTES_PER_TOKEN) as u64,
            None => (bytes / BYTES_PER_TOKEN) as u64,
        };
        (tokens, bytes)
    }

    /// The provider's report on the request of `bytes` bytes just sent.
    pub fn reported(&mut self, usage: &ModelUsage, bytes: usize) {
        if usage.input_tokens > 0 {
            self.last = Some((usage.input_tokens, bytes));
        }
    }

    /// A turn's start: `tokens` (the conversation's last report, see
    /// `Conversation::reported_tokens`) describes `request`, when known.
    pub fn seed(&mut self, tokens: Option<u64>, request: &ModelRequest) {
        self.last = tokens.map(|tokens| (tokens, json_len(request)));
    }

    /// After a compaction the last report no longer describes the requests.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

/// The bytes `request` serializes to, counted as they are written (not collected).
fn json_len(request: &ModelRequest) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, request) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// The window a turn on `model` is measured against.
pub(crate) fn window(spec: &CompactionSpec, model: &str) -> Option<u64> {
    spec.context_window.or_else(|| bdk_model::context_window_for(model))
}

/// Whether a request estimated at `tokens` should be compacted first.
pub(crate) fn over(spec: &CompactionSpec, tokens: u64, window: u64) -> bool {
    tokens as f64 > spec.threshold * window as f64
}

/// Why a compaction did not happen.
#[derive(Debug)]
pub(crate) enum Failure {
    Cancelled,
    /// The summary call failed; the message says how.
    Summary(String),
}

/// A compaction the turn records and applies.
#[derive(Debug)]
pub(crate) struct Compacted {
    pub event: EventData,
    pub usage: ModelUsage,
    /// The conversation with the compaction applied.
    pub view: Conversation,
}

/// What the compaction is measured against and why it runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measure {
    pub estimated_tokens: u64,
    pub window: u64,
    pub reason: &'static str,
}

/// Plans and runs one compaction of `conversation` before a step of `turn`: `Ok(None)` when
/// there is nothing to replace (see [`Conversation::compactable`]). `keep_turns` is tried
/// first; `fallback` allows keeping fewer when that leaves nothing to replace.
pub(crate) async fn compact(
    provider: &dyn ModelProvider,
    conversation: &Conversation,
    turn: &TurnId,
    keep_turns: u32,
    fallback: bool,
    measure: Measure,
    cancel: &CancellationToken,
) -> Result<Option<Compacted>, Failure> {
    let mut plan = conversation.compactable(turn, keep_turns as usize);
    if fallback {
        let mut keep = keep_turns;
        while plan.is_none() && keep > 0 {
            keep -= 1;
            plan = conversation.compactable(turn, keep as usize);
        }
    }
    let Some((items, through_index)) = plan else { return Ok(None) };
    let transcript = transcript(&conversation.messages_of(items));
    let request = ModelRequest {
        system: Some(SUMMARY_PROMPT.into()),
        messages: vec![Message::user(transcript)].into(),
        tools: Default::default(),
        params: Default::default(),
    };
    let (summary, usage) = summarize(provider, request, cancel).await?;
    let mut view = conversation.clone();
    view.compact(items, &summary, through_index);
    let event = EventData::ConversationCompacted(ConversationCompacted {
        summary,
        replaced_items: u32::try_from(items).unwrap_or(u32::MAX),
        through_index,
        estimated_tokens: measure.estimated_tokens,
        context_window: measure.window,
        reason: measure.reason.to_owned(),
        usage: (usage != ModelUsage::default()).then(|| cost::protocol_usage(&usage)),
    });
    Ok(Some(Compacted { event, usage, view }))
}

/// The summary call: its whole text and usage.
async fn summarize(
    provider: &dyn ModelProvider,
    request: ModelRequest,
    cancel: &CancellationToken,
) -> Result<(String, ModelUsage), Failure> {
    let mut stream = provider.stream(request, cancel.child_token());
    let mut text = String::new();
    let mut usage = ModelUsage::default();
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Failure::Cancelled),
            next = stream.next() => next,
        };
        match next {
            None => break,
            Some(Ok(ModelEvent::TextDelta { text: delta })) => text.push_str(&delta),
            Some(Ok(ModelEvent::Usage { usage: reported })) => usage.add(&reported),
            Some(Ok(ModelEvent::Finish { .. })) => break,
            Some(Ok(_)) => {}
            Some(Err(bdk_model::ModelError::Cancelled)) => return Err(Failure::Cancelled),
            Some(Err(error)) => return Err(Failure::Summary(format!("the summary call failed: {error}"))),
        }
    }
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(Failure::Summary("the summary call returned no text".into()));
    }
    Ok((text, usage))
}

/// The items to summarize as one plain-text transcript (each message cut at 8 KiB).
fn transcript(messages: &[Message]) -> String {
    let mut out = String::from("Summarize this conversation transcript:\n");
    for message in messages {
        let (who, text) = match message {
            Message::User { content } => ("User", content.clone()),
            Message::Assistant { content, tool_calls, .. } => {
                let mut text = content.clone();
                for call in tool_calls {
                    text.push_str(&format!("\n[calls tool `{}` with {}]", call.name, call.arguments));
                }
                ("Assistant", text)
            }
            Message::Tool { content, is_error, .. } => {
                (if *is_error { "Tool error" } else { "Tool result" }, content.clone())
            }
        };
        out.push_str(&format!("\n{who}: {}\n", cut(&text, MAX_TRANSCRIPT_MESSAGE)));
    }
    out
}

/// `text`, cut at a character boundary at most `max` bytes in, with a note when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} [… {} more bytes]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcripts_name_who_said_what_and_cut_long_messages() {
        let long = "é".repeat(MAX_TRANSCRIPT_MESSAGE);
        let text = transcript(&[
            Message::user("hello"),
            Message::Assistant {
                content: "looking".into(),
                reasoning: None,
                tool_calls: vec![bdk_model::ToolCall { id: "1".into(), name: "grep".into(), arguments: "{}".into() }],
            },
            Message::tool_result("1", long.clone(), false),
        ]);
        assert!(text.contains("User: hello"), "{text}");
        assert!(text.contains("[calls tool `grep` with {}]"), "{text}");
        assert!(text.contains("more bytes]"), "long results are cut");
        assert!(text.len() < long.len() + 500);
    }

    #[test]
    fn estimates_use_the_last_report_plus_a_quarter_of_the_new_bytes() {
        let mut budget = Budget::default();
        let request = ModelRequest { messages: vec![Message::user("x".repeat(4000))].into(), ..Default::default() };
        let (tokens, bytes) = budget.estimate(&request);
        assert_eq!(tokens, (bytes / 4) as u64);
        budget.reported(&ModelUsage { input_tokens: 100, ..Default::default() }, bytes);
        let bigger = ModelRequest {
            messages: vec![Message::user("x".repeat(4000)), Message::user("y".repeat(400))].into(),
            ..Default::default()
        };
        let (tokens, more) = budget.estimate(&bigger);
        assert_eq!(tokens, 100 + ((more - bytes) / 4) as u64);
        budget.reset();
        assert_eq!(budget.estimate(&bigger).0, (more / 4) as u64);
    }
}
