//! Property tests of the conversation fold: a restarted host and a live actor must send the
//! model the same conversation whatever order concurrent writers put events in the log, and
//! however the log was read (one pass, or caught up in overlapping pieces).
//!
//! A generated session is a serial script of user messages and turns (steps with streamed or
//! completed text, tool calls, some answered in any order, some never). Its serial log is each
//! item's events back to back; an interleaved log keeps each item's own order and the order in
//! which items start, but lets a turn's later events land after later items began (a message
//! coalesced mid-turn, a turn still writing when the next one opened).

use bdk_protocol::SessionId;
use bdk_protocol::event::{
    ActionResult, ActionsRequested, ConversationCompacted, MessageReceived, StepStarted, TextCompleted, TextDelta,
    TurnStarted,
};
use proptest::prelude::*;
use serde_json::json;

use super::*;

#[derive(Debug, Clone)]
struct GenStep {
    deltas: Vec<String>,
    completed: bool,
    /// (answered, is_error) per call.
    calls: Vec<(bool, bool)>,
    /// A rotation of the answered results' order.
    results_rotation: usize,
}

#[derive(Debug, Clone)]
enum Item {
    User(String),
    Turn(Vec<GenStep>),
}

fn step() -> impl Strategy<Value = GenStep> {
    (
        prop::collection::vec("[a-z ]{0,6}", 0..4),
        any::<bool>(),
        prop::collection::vec((any::<bool>(), any::<bool>()), 0..4),
        0usize..4,
    )
        .prop_map(|(deltas, completed, calls, results_rotation)| GenStep {
            deltas,
            completed,
            calls,
            results_rotation,
        })
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof!["[a-z]{1,8}".prop_map(Item::User), prop::collection::vec(step(), 1..4).prop_map(Item::Turn),]
}

/// One item's events, in the order its writer records them (indices are set later).
fn item_events(item: &Item, session: &SessionId) -> Vec<Event> {
    let event = |turn: Option<&TurnId>, data: EventData| Event {
        index: 0,
        session_id: session.clone(),
        turn_id: turn.cloned(),
        at: bdk_protocol::event::timestamp_now(),
        data,
    };
    match item {
        Item::User(text) => {
            vec![event(None, EventData::MessageReceived(MessageReceived { text: text.clone(), principal: None }))]
        }
        Item::Turn(steps) => {
            let turn = TurnId::generate();
            let mut out = vec![event(Some(&turn), EventData::TurnStarted(TurnStarted::default()))];
            for (n, step) in steps.iter().enumerate() {
                out.push(event(Some(&turn), EventData::StepStarted(StepStarted { step: n as u32 })));
                for delta in &step.deltas {
                    out.push(event(Some(&turn), EventData::MessageAppended(TextDelta { delta: delta.clone() })));
                }
                if step.completed {
                    let text = step.deltas.concat();
                    out.push(event(Some(&turn), EventData::MessageCompleted(TextCompleted { text })));
                }
                let calls: Vec<ActionCall> = (0..step.calls.len())
                    .map(|i| ActionCall {
                        call_id: CallId::generate("t"),
                        tool_name: "t".into(),
                        input: json!({"i": i}),
                    })
                    .collect();
                if calls.is_empty() {
                    continue;
                }
                out.push(event(
                    Some(&turn),
                    EventData::ActionsRequested(ActionsRequested { calls: calls.clone(), direct: None }),
                ));
                let mut answered: Vec<(ActionCall, bool)> = calls
                    .iter()
                    .zip(&step.calls)
                    .filter(|(_, (answered, _))| *answered)
                    .map(|(call, (_, is_error))| (call.clone(), *is_error))
                    .collect();
                if !answered.is_empty() {
                    let k = step.results_rotation % answered.len();
                    answered.rotate_left(k);
                }
                for (call, is_error) in answered {
                    out.push(event(
                        Some(&turn),
                        EventData::ActionResult(ActionResult {
                            call_id: call.call_id.clone(),
                            tool_name: call.tool_name.clone(),
                            is_error,
                            result: json!({"for": call.input}),
                            duration_ms: 1,
                            stubbed: None,
                            direct: None,
                        }),
                    ));
                }
            }
            out
        }
    }
}

/// Numbers `events` densely in log order.
fn numbered(mut events: Vec<Event>) -> Vec<Event> {
    for (i, event) in events.iter_mut().enumerate() {
        event.index = i as u64;
    }
    events
}

/// Merges the items' event lists: each list keeps its order, list `i` starts only after list
/// `i - 1` started, and `choices` decide which started list writes next.
fn interleave(lists: Vec<Vec<Event>>, choices: &[usize]) -> Vec<Event> {
    let mut queues: Vec<std::collections::VecDeque<Event>> = lists.into_iter().map(Into::into).collect();
    let mut out = Vec::new();
    let mut started = 0usize;
    let mut choice = choices.iter().cycle();
    while queues.iter().any(|q| !q.is_empty()) {
        // Candidates: every started list with events left, plus the next list to start.
        let mut candidates: Vec<usize> = (0..started).filter(|&i| !queues[i].is_empty()).collect();
        if started < queues.len() {
            candidates.push(started);
        }
        let pick = candidates[choice.next().copied().unwrap_or(0) % candidates.len()];
        if pick == started {
            started += 1;
        }
        if let Some(event) = queues[pick].pop_front() {
            out.push(event);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any interleaving that keeps each writer's order and the order items began rebuilds the
    /// conversation of the serial log.
    #[test]
    fn any_interleaving_rebuilds_the_serial_conversation(
        items in prop::collection::vec(item(), 1..7),
        choices in prop::collection::vec(0usize..8, 1..64),
    ) {
        let session = SessionId::generate();
        let lists: Vec<Vec<Event>> = items.iter().map(|item| item_events(item, &session)).collect();
        let serial = numbered(lists.concat());
        let interleaved = numbered(interleave(lists, &choices));
        prop_assert_eq!(rebuild(&interleaved), rebuild(&serial));
    }

    /// Folding caught up in overlapping pieces (re-reading from any earlier index) equals one
    /// fold of the whole log.
    #[test]
    fn overlapping_catch_ups_equal_one_fold(
        items in prop::collection::vec(item(), 1..7),
        cuts in prop::collection::vec((0usize..64, 0usize..8), 0..12),
    ) {
        let session = SessionId::generate();
        let log = numbered(items.iter().flat_map(|item| item_events(item, &session)).collect());
        let mut pieces = Conversation::default();
        for (end, back) in cuts {
            let end = end.min(log.len());
            let start = (pieces.next_index() as usize).saturating_sub(back).min(end);
            pieces.fold(&log[start..end]);
            // The messages built between pieces (kept, and cut back when a later piece changes
            // a kept block) are those of the log so far.
            let so_far = rebuild(&log[..pieces.next_index() as usize]);
            prop_assert_eq!(pieces.messages().to_vec(), so_far);
        }
        pieces.fold(&log[pieces.next_index() as usize..]);
        prop_assert_eq!(pieces.next_index(), log.len() as u64);
        prop_assert_eq!(pieces.messages().to_vec(), rebuild(&log));
    }

    /// A compaction planned on the live fold before a new turn, recorded and folded again from
    /// the log (a restart) gives the conversation the live turn sent; it starts with the summary,
    /// keeps the current turn's prompt, and never leaves a tool result without its call.
    #[test]
    fn a_recorded_compaction_rebuilds_what_the_live_turn_sent(
        items in prop::collection::vec(item(), 1..9),
        keep in 0usize..3,
        current in prop::collection::vec(step(), 1..3),
    ) {
        let session = SessionId::generate();
        let mut log: Vec<Event> = items.iter().flat_map(|item| item_events(item, &session)).collect();
        log.extend(item_events(&Item::User("now".into()), &session));
        let turn_events = item_events(&Item::Turn(current), &session);
        let turn = turn_events[0].turn_id.clone().unwrap();
        // The live fold: everything before the turn, plus its `turn.started`.
        log.push(turn_events[0].clone());
        let log = numbered(log);
        let mut live = Conversation::default();
        live.fold(&log);
        // Built before the compaction is folded, so the fold must drop what it kept.
        let before = live.messages();
        let Some((n, through)) = live.compactable(&turn, keep) else { return Ok(()) };
        prop_assert!(through < log.len() as u64);
        let mut view = live.clone();
        view.compact(n, "SUMMARY", through);
        let sent = view.messages().to_vec();
        prop_assert_eq!(&sent[0], &Message::user(crate::conversation::summary_message("SUMMARY")));
        prop_assert_eq!(sent.last(), Some(&Message::user("now")));

        let mut full = log.clone();
        full.push(Event {
            index: 0,
            session_id: session.clone(),
            turn_id: Some(turn.clone()),
            at: bdk_protocol::event::timestamp_now(),
            data: EventData::ConversationCompacted(ConversationCompacted {
                summary: "SUMMARY".into(),
                replaced_items: n as u32,
                through_index: through,
                estimated_tokens: 1,
                context_window: 1,
                reason: "threshold".into(),
                usage: None,
            }),
        });
        let at_compaction = numbered(full.clone());
        prop_assert_eq!(rebuild(&at_compaction), sent.clone());
        full.extend(turn_events[1..].iter().cloned());
        let full = numbered(full);
        // The live actor catches up with the rest of the log; a restart folds it all at once.
        live.fold(&full);
        let rebuilt = rebuild(&full);
        prop_assert_eq!(before.to_vec(), rebuild(&log), "an earlier list is never changed by later folds");
        prop_assert_eq!(live.messages().to_vec(), rebuilt.clone());
        prop_assert_eq!(&rebuilt[..sent.len()], &sent[..]);
        let mut calls = std::collections::HashSet::new();
        for message in &rebuilt {
            match message {
                Message::Assistant { tool_calls, .. } => calls.extend(tool_calls.iter().map(|c| c.id.clone())),
                Message::Tool { call_id, .. } => prop_assert!(calls.contains(call_id), "a result without its call"),
                Message::User { .. } => {}
            }
        }
    }
}
