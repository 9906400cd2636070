//! The conversation a turn sends the model, rebuilt from the session's event log: the log is
//! the only record of what was said, so a restarted host continues exactly where it stopped.
//!
//! Each `message.received` is a user message, placed where it was recorded. Each turn becomes,
//! at the place of its first event, one assistant message per step (its text and the tool calls
//! that got a result) followed by those results. Events are grouped by `turnId`, so a message
//! coalesced while a turn ran lands after that turn's output, never between a tool call and its
//! result. Partial output of an interrupted turn is kept; calls without a result are dropped.
//! Reasoning is not sent back across turns (providers ignore or reject it there).
//!
//! A `conversation.compacted` event replaces the first `replacedItems` items (user messages and
//! turns, in the order above) by one summary item, sent as a user message; `compaction.rs`
//! decides when and what, and this fold applies it where the log recorded it, so a restarted
//! host sends what the live one sent.

use std::collections::{HashMap, HashSet};

use bdk_model::{Message, Messages, ToolCall};
use bdk_protocol::event::ActionCall;
use bdk_protocol::{CallId, Event, EventData, TurnId};
use bdk_store::SharedEvent;
use serde_json::Value;

use crate::dispatch::result_text;

/// The id a tool call carries in model messages: the random suffix of its [`CallId`], short
/// enough for every provider's id limits and stable across rebuilds.
pub(crate) fn model_call_id(call_id: &CallId) -> String {
    let id = call_id.as_str();
    id.rsplit_once('_').map_or(id, |(_, suffix)| suffix).to_owned()
}

/// The arguments text of a recorded call (raw text when the model's JSON was broken).
pub(crate) fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) if serde_json::from_str::<Value>(raw).is_err() => raw.clone(),
        other => other.to_string(),
    }
}

#[derive(Debug, Default, Clone)]
struct Step {
    text: String,
    /// `message.completed` was seen: `text` is final, later deltas are ignored.
    text_final: bool,
    calls: Vec<ActionCall>,
    results: HashMap<CallId, (String, bool)>,
    /// A user message said inside the turn after the steps before it.
    feedback: Option<String>,
}

#[derive(Debug, Clone)]
enum Block {
    User(String),
    Turn(Vec<Step>),
    /// What a compaction left of the items before it.
    Summary(String),
}

/// How a summary item reads to the model.
pub(crate) fn summary_message(summary: &str) -> String {
    format!("[Summary of the earlier conversation, written when it grew too long for the context window]\n\n{summary}")
}

/// The fold of a session's log into conversation blocks. It can be caught up with new events
/// (`fold` from `next_index` on), so a live session's actor keeps one between turns instead of
/// re-reading its whole log; a fresh one (after a restart or an idle period) folds from 0.
#[derive(Debug, Default, Clone)]
pub(crate) struct Conversation {
    blocks: Vec<Block>,
    /// The log index of the last event folded into each block (same length as `blocks`).
    ends: Vec<u64>,
    turns: HashMap<TurnId, usize>,
    /// Turns a compaction replaced: their late events (there should be none) are ignored.
    compacted: HashSet<TurnId>,
    /// The index of the next event to fold.
    next_index: u64,
    /// Set by [`Conversation::fold_own`] when what its owner wrote continued the fold densely:
    /// the fold is as current as the log was at that write, so a turn started now need not
    /// read the log first. Taken by that turn ([`Conversation::take_current`]).
    current: bool,
    /// `(experiment, arm)` of each `ab.assigned`.
    assigned: Vec<(String, String)>,
    /// The input plus output tokens the provider reported for the last completed step, and the
    /// bytes of user messages and tool results folded since; `None` when unknown (no report
    /// yet, a step begun since that never completed, a compaction since).
    reported: Option<(u64, usize)>,
    /// The model messages of the first `starts.len()` blocks, kept between turns so that a
    /// turn builds only the messages of the blocks added since, and shares the rest with the
    /// turns before (`messages`). A fold that changes a kept block cuts the cache back to it.
    cache: Messages,
    /// Where each kept block's messages start in `cache`.
    starts: Vec<usize>,
}

impl Conversation {
    /// The A/B arms the session was enrolled in.
    pub fn assigned(&self) -> &[(String, String)] {
        &self.assigned
    }

    /// The estimated tokens of the conversation so far, from the provider's last report (see
    /// `reported`): its tokens plus a quarter of the bytes said since.
    pub fn reported_tokens(&self) -> Option<u64> {
        self.reported.map(|(tokens, after)| tokens + (after / crate::compaction::BYTES_PER_TOKEN) as u64)
    }

    /// The index to read the log from to catch up.
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Folds events in log order; events already folded are skipped.
    pub fn fold<E: std::borrow::Borrow<Event>>(&mut self, events: &[E]) {
        for event in events {
            let event = event.borrow();
            if event.index < self.next_index {
                continue;
            }
            self.next_index = event.index + 1;
            self.fold_one(event);
        }
    }

    /// Folds events its owner has just written (a turn's own events, an accepted message, a
    /// turn's closing events), when they continue the fold with nothing between them: from
    /// `next_index` on, dense (events already folded are skipped). Then the fold is current as
    /// of that write, and the next turn may start without reading the log: an event someone
    /// else appends later is one that landed after such a read. Otherwise the fold is left
    /// alone, and not current: the next turn reads what it misses.
    pub fn fold_own(&mut self, written: &[SharedEvent]) {
        let new = written.iter().position(|e| e.index >= self.next_index).map_or(&[][..], |at| &written[at..]);
        let dense = new.first().is_some_and(|e| e.index == self.next_index)
            && new.windows(2).all(|pair| pair[1].index == pair[0].index + 1);
        if dense {
            self.fold(new);
        }
        self.current = dense;
    }

    /// Whether the fold was current at its owner's last write (see
    /// [`Conversation::fold_own`]); clears it.
    pub fn take_current(&mut self) -> bool {
        std::mem::take(&mut self.current)
    }

    /// Whether the fold was current at its owner's last write, leaving it so.
    pub fn is_current(&self) -> bool {
        self.current
    }

    fn fold_one(&mut self, event: &Event) {
        // Direct tool calls are recorded on the stream but were never the model's.
        if crate::status::is_direct(event) {
            return;
        }
        if let EventData::AbAssigned(assigned) = &event.data {
            self.assigned.push((assigned.experiment.clone(), assigned.arm.clone()));
            return;
        }
        if let EventData::ConversationCompacted(compacted) = &event.data {
            self.compact(compacted.replaced_items as usize, &compacted.summary, compacted.through_index);
            return;
        }
        if let EventData::MessageReceived(received) = &event.data {
            if let Some((_, after)) = &mut self.reported {
                *after += received.text.len();
            }
            // A message recorded inside a running turn (the result gate's rejection) belongs
            // where it was said: after that turn's steps so far.
            if let Some(at) = event.turn_id.as_ref().and_then(|turn| self.turns.get(turn)).copied()
                && let Some(Block::Turn(steps)) = self.blocks.get_mut(at)
            {
                steps.push(Step { feedback: Some(received.text.clone()), ..Step::default() });
                self.ends[at] = event.index;
                self.changed(at);
                return;
            }
            self.blocks.push(Block::User(received.text.clone()));
            self.ends.push(event.index);
            return;
        }
        let Some(turn_id) = &event.turn_id else { return };
        if self.compacted.contains(turn_id) {
            return;
        }
        let blocks = &mut self.blocks;
        let ends = &mut self.ends;
        let at = *self.turns.entry(turn_id.clone()).or_insert_with(|| {
            blocks.push(Block::Turn(Vec::new()));
            ends.push(event.index);
            blocks.len() - 1
        });
        ends[at] = event.index;
        if at < self.starts.len() {
            self.changed(at);
        }
        let Some(Block::Turn(steps)) = self.blocks.get_mut(at) else { return };
        match &event.data {
            EventData::StepStarted(_) => {
                steps.push(Step::default());
                self.reported = None;
            }
            EventData::StepCompleted(completed) => {
                if let Some(usage) = completed.usage.filter(|u| u.input_tokens > 0) {
                    self.reported = Some((usage.input_tokens + usage.output_tokens, 0));
                }
            }
            EventData::MessageAppended(delta) => {
                let step = current(steps);
                if !step.text_final {
                    step.text.push_str(&delta.delta);
                }
            }
            EventData::MessageCompleted(done) => {
                let step = current(steps);
                step.text = done.text.clone();
                step.text_final = true;
            }
            EventData::ActionsRequested(requested) => current(steps).calls.extend(requested.calls.iter().cloned()),
            EventData::ActionResult(result) => {
                if let Some((_, after)) = &mut self.reported {
                    *after += result_text(&result.result).len();
                }
                if let Some(step) = steps.iter_mut().rev().find(|s| s.calls.iter().any(|c| c.call_id == result.call_id))
                {
                    step.results.insert(result.call_id.clone(), (result_text(&result.result), result.is_error));
                }
            }
            _ => {}
        }
    }

    /// The model messages so far, oldest first. Builds only the messages of blocks added or
    /// changed since the last call; the rest are shared with what that call returned.
    pub fn messages(&mut self) -> Messages {
        for block in &self.blocks[self.starts.len()..] {
            self.starts.push(self.cache.len());
            push_block(&mut self.cache, block);
        }
        self.cache.clone()
    }

    /// The model messages of the first `n` items.
    pub fn messages_of(&self, n: usize) -> Vec<Message> {
        let mut messages = Vec::new();
        for block in self.blocks.iter().take(n) {
            push_block(&mut messages, block);
        }
        messages
    }

    /// Block `at` changed: the cached messages from it on are stale.
    fn changed(&mut self, at: usize) {
        if let Some(&start) = self.starts.get(at) {
            self.cache.truncate(start);
            self.starts.truncate(at);
        }
    }

    /// Replaces the first `n` items by one summary item (what `conversation.compacted` says).
    pub fn compact(&mut self, n: usize, summary: &str, through_index: u64) {
        let n = n.min(self.blocks.len());
        if n == 0 {
            return;
        }
        self.blocks.splice(..n, [Block::Summary(summary.to_owned())]);
        self.reported = None;
        self.changed(0);
        self.ends.splice(..n, [through_index]);
        let compacted = &mut self.compacted;
        self.turns.retain(|turn, at| {
            if *at < n {
                compacted.insert(turn.clone());
                false
            } else {
                *at = *at + 1 - n;
                true
            }
        });
    }

    /// Which items a compaction before a step of `current` may replace, keeping the current
    /// turn, the user messages that asked for it, and the `keep_turns` turns before them (with
    /// their own user messages) verbatim: `(items, through_index)`, or `None` when that leaves
    /// nothing but an earlier summary to replace. Whole items only, so a tool call is never
    /// separated from its result.
    pub fn compactable(&self, current: &TurnId, keep_turns: usize) -> Option<(usize, u64)> {
        let mut cut = self.turns.get(current).copied().unwrap_or(self.blocks.len());
        let skip_users = |mut at: usize| {
            while at > 0 && matches!(self.blocks[at - 1], Block::User(_)) {
                at -= 1;
            }
            at
        };
        cut = skip_users(cut);
        for _ in 0..keep_turns {
            match self.blocks[..cut].iter().rposition(|b| matches!(b, Block::Turn(_))) {
                Some(at) => cut = skip_users(at),
                None => return None,
            }
        }
        let replaces_something = self.blocks[..cut].iter().any(|b| !matches!(b, Block::Summary(_)));
        replaces_something.then(|| (cut, self.ends[cut - 1]))
    }
}

/// The model messages of a whole log, oldest first.
#[cfg(test)]
pub(crate) fn rebuild(events: &[Event]) -> Vec<Message> {
    let mut conversation = Conversation::default();
    conversation.fold(events);
    conversation.messages().to_vec()
}

fn current(steps: &mut Vec<Step>) -> &mut Step {
    if steps.is_empty() {
        steps.push(Step::default());
    }
    let last = steps.len() - 1;
    &mut steps[last]
}

fn push_block(messages: &mut impl Extend<Message>, block: &Block) {
    match block {
        Block::User(text) => messages.extend([Message::user(text.clone())]),
        Block::Summary(text) => messages.extend([Message::user(summary_message(text))]),
        Block::Turn(steps) => {
            for step in steps {
                push_step(messages, step);
            }
        }
    }
}

fn push_step(messages: &mut impl Extend<Message>, step: &Step) {
    if let Some(feedback) = &step.feedback {
        messages.extend([Message::user(feedback.clone())]);
        return;
    }
    let answered: Vec<&ActionCall> = step.calls.iter().filter(|c| step.results.contains_key(&c.call_id)).collect();
    if step.text.is_empty() && answered.is_empty() {
        return;
    }
    let tool_calls = answered
        .iter()
        .map(|c| ToolCall {
            id: model_call_id(&c.call_id),
            name: c.tool_name.clone(),
            arguments: arguments_text(&c.input),
        })
        .collect();
    messages.extend([Message::Assistant { content: step.text.clone(), reasoning: None, tool_calls }]);
    for call in answered {
        if let Some((content, is_error)) = step.results.get(&call.call_id) {
            messages.extend([Message::tool_result(model_call_id(&call.call_id), content.clone(), *is_error)]);
        }
    }
}

#[cfg(test)]
#[path = "conversation_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use bdk_protocol::SessionId;
    use bdk_protocol::event::{
        ActionResult, ActionsRequested, MessageReceived, StepStarted, TextCompleted, TextDelta, TurnStarted,
    };
    use serde_json::json;

    use super::*;

    struct Log {
        events: Vec<Event>,
        session: SessionId,
    }

    impl Log {
        fn new() -> Self {
            Log { events: Vec::new(), session: SessionId::generate() }
        }

        fn push(&mut self, turn: Option<&TurnId>, data: EventData) {
            self.events.push(Event {
                index: self.events.len() as u64,
                session_id: self.session.clone(),
                turn_id: turn.cloned(),
                at: bdk_protocol::event::timestamp_now(),
                data,
            });
        }
    }

    fn user(text: &str) -> EventData {
        EventData::MessageReceived(MessageReceived { text: text.into(), principal: None })
    }

    #[test]
    fn turns_group_by_id_and_unanswered_calls_are_dropped() {
        let mut log = Log::new();
        let t1 = TurnId::generate();
        let (a, b) = (CallId::generate("add"), CallId::generate("mul"));
        log.push(None, user("hi"));
        log.push(Some(&t1), EventData::TurnStarted(TurnStarted::default()));
        log.push(Some(&t1), EventData::StepStarted(StepStarted { step: 0 }));
        log.push(Some(&t1), EventData::MessageAppended(TextDelta { delta: "let me ".into() }));
        log.push(Some(&t1), EventData::MessageAppended(TextDelta { delta: "see".into() }));
        log.push(
            Some(&t1),
            EventData::ActionsRequested(ActionsRequested {
                calls: vec![
                    ActionCall { call_id: a.clone(), tool_name: "add".into(), input: json!({"x": 1}) },
                    ActionCall { call_id: b.clone(), tool_name: "mul".into(), input: json!({}) },
                ],
                direct: None,
            }),
        );
        // A coalesced message recorded mid-turn.
        log.push(None, user("also this"));
        log.push(
            Some(&t1),
            EventData::ActionResult(ActionResult {
                call_id: a.clone(),
                tool_name: "add".into(),
                is_error: false,
                result: json!(2),
                duration_ms: 1,
                stubbed: None,
                direct: None,
            }),
        );
        log.push(Some(&t1), EventData::StepStarted(StepStarted { step: 1 }));
        log.push(Some(&t1), EventData::MessageCompleted(TextCompleted { text: "two".into() }));

        let messages = rebuild(&log.events);
        assert_eq!(messages.len(), 5, "{messages:#?}");
        assert_eq!(messages[0], Message::user("hi"));
        let Message::Assistant { content, tool_calls, .. } = &messages[1] else { panic!("{messages:#?}") };
        assert_eq!(content, "let me see");
        assert_eq!(tool_calls.len(), 1);
        assert_eq!(tool_calls[0].id, model_call_id(&a));
        assert_eq!(tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(messages[2], Message::tool_result(model_call_id(&a), "2", false));
        assert_eq!(messages[3], Message::assistant("two"));
        assert_eq!(messages[4], Message::user("also this"));
    }

    #[test]
    fn folding_in_pieces_equals_folding_at_once() {
        let mut log = Log::new();
        let t1 = TurnId::generate();
        log.push(None, user("one"));
        log.push(Some(&t1), EventData::StepStarted(StepStarted { step: 0 }));
        log.push(Some(&t1), EventData::MessageCompleted(TextCompleted { text: "two".into() }));
        log.push(None, user("three"));
        let mut pieces = Conversation::default();
        pieces.fold(&log.events[..2]);
        pieces.fold(&log.events[1..]);
        assert_eq!(pieces.next_index(), 4);
        assert_eq!(pieces.messages(), rebuild(&log.events));
        assert_eq!(pieces.messages().len(), 3);
    }

    #[test]
    fn the_last_report_plus_what_was_said_since_estimates_the_conversation() {
        let mut log = Log::new();
        let t1 = TurnId::generate();
        log.push(None, user("one"));
        log.push(Some(&t1), EventData::StepStarted(StepStarted { step: 0 }));
        let mut conversation = Conversation::default();
        conversation.fold(&log.events);
        assert_eq!(conversation.reported_tokens(), None, "no report yet");
        let usage = bdk_protocol::event::Usage { input_tokens: 100, output_tokens: 20, ..Default::default() };
        log.push(
            Some(&t1),
            EventData::StepCompleted(bdk_protocol::event::StepCompleted {
                step: 0,
                duration_ms: 1,
                finish_reason: None,
                usage: Some(usage),
            }),
        );
        log.push(None, user(&"x".repeat(40)));
        conversation.fold(&log.events);
        assert_eq!(conversation.reported_tokens(), Some(130));
        log.push(Some(&TurnId::generate()), EventData::StepStarted(StepStarted { step: 0 }));
        conversation.fold(&log.events);
        assert_eq!(conversation.reported_tokens(), None, "a step began and has not reported");
    }

    #[test]
    fn model_call_ids_are_short() {
        let id = CallId::generate("a_very_long_tool_name_that_goes_on");
        assert_eq!(model_call_id(&id).len(), 26);
        assert_eq!(arguments_text(&Value::String("{broken".into())), "{broken");
    }
}
