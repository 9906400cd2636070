//! Long conversations through the fake model server: a conversation that crosses a small
//! configured context window is compacted exactly once (a separate summary call), the next
//! request carries the summary and not the replaced turns, and an engine reopened on the same
//! state sends the same conversation; with compaction off nothing is compacted; a failed
//! summary call fails the turn with `compaction_failed`; a provider's `context_length_exceeded`
//! gets one compaction and a retry, and a second refusal fails the turn with `context_length`.

use bdk_engine::{Admission, Engine};
use bdk_protocol::event::FailureCode;
use bdk_protocol::{Event, EventData, SessionId};
use bdk_test_support::Reply;
use serde_json::Value;

use super::folder::*;
use super::support::*;

/// ~4000 tokens (16 KB): the replies below report that many output tokens for it.
fn long_answer(marker: &str) -> String {
    format!("{marker} {}", "lorem ipsum ".repeat(1333))
}

/// 0.8 × 8750 = 7000 tokens: a conversation with one long answer stays under it, one with two
/// goes over.
const SMALL_WINDOW: &str = "context_window = 8750\n\n[compaction]\nkeep_turns = 1\n";

fn refused() -> Reply {
    Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#,
    )
}

/// The non-system messages of a recorded request.
fn messages_of(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().iter().filter(|m| m["role"] != "system").cloned().collect()
}

fn compactions(events: &[Event]) -> Vec<&bdk_protocol::event::ConversationCompacted> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ConversationCompacted(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// Runs turns one after another on `engine`: the first message starts the session.
struct Talk {
    id: SessionId,
    token: String,
    turns: usize,
}

impl Talk {
    async fn start(folder: &Folder, message: &str) -> Self {
        let started = folder.start(message).await;
        settled(&folder.engine, &started.session_id, 1).await;
        Talk { id: started.session_id, token: started.continuation_token, turns: 1 }
    }

    async fn say(&mut self, engine: &Engine, message: &str) -> Vec<Event> {
        let accepted =
            within(engine.follow_up(&self.id, follow(message, &self.token, Admission::Preempt))).await.unwrap();
        self.token = accepted.continuation_token;
        self.turns += 1;
        settled(engine, &self.id, self.turns).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_the_window_compacts_once_and_a_restart_sends_the_same_conversation() {
    let folder = Folder::with_agent_toml(SMALL_WINDOW, &[]).await;
    // Reported usage as a real provider would: each turn's first request is estimated from the
    // previous step's input plus output tokens (8600 before the third turn: over 7000).
    folder.model.push(text(&long_answer("ANSWER-ONE"), (600, 4000)));
    folder.model.push(text(&long_answer("ANSWER-TWO"), (4600, 4000)));
    folder.model.push(text("SUMMARY: the user asked QUESTION-ONE; the agent answered at length.", (300, 20)));
    folder.model.push(text("Three.", (4700, 5)));

    let mut talk = Talk::start(&folder, "QUESTION-ONE").await;
    talk.say(&folder.engine, "QUESTION-TWO").await;
    let events = talk.say(&folder.engine, "QUESTION-THREE").await;

    let compacted = compactions(&events);
    assert_eq!(compacted.len(), 1, "{:?}", types(&events));
    let compacted = compacted[0];
    assert_eq!(compacted.replaced_items, 2, "QUESTION-ONE and its turn");
    assert_eq!(compacted.reason, "threshold");
    assert_eq!(compacted.context_window, 8750);
    assert!((8600..8700).contains(&compacted.estimated_tokens), "from the report: {}", compacted.estimated_tokens);
    assert!(compacted.summary.starts_with("SUMMARY:"));
    // Recorded in the third turn, before its step, and the summary's tokens count in it.
    let at = events.iter().position(|e| matches!(e.data, EventData::ConversationCompacted(_))).unwrap();
    let third_turn = events[at].turn_id.clone().unwrap();
    let completed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnCompleted(done) if e.turn_id.as_ref() == Some(&third_turn) => Some(done),
            _ => None,
        })
        .unwrap();
    assert_eq!(completed.usage.input_tokens, 5000, "the summary call's usage is the turn's too");

    let requests = folder.model.requests();
    assert_eq!(requests.len(), 4, "two turns, the summary call, the third turn");
    let summary_call = &requests[2].body;
    assert!(system_of(summary_call).contains("summary"), "{}", system_of(summary_call));
    let transcript = summary_call.to_string();
    assert!(transcript.contains("QUESTION-ONE") && transcript.contains("ANSWER-ONE"));
    assert!(!transcript.contains("QUESTION-TWO"), "kept turns are not summarized");
    assert!(tools_of(summary_call).is_empty());

    let third = messages_of(&requests[3].body);
    let sent = Value::Array(third.clone()).to_string();
    assert!(sent.contains("SUMMARY: the user asked"), "{sent:.400}");
    assert!(!sent.contains("ANSWER-ONE") && !sent.contains("\"QUESTION-ONE\""), "replaced turns were sent");
    assert!(sent.contains("QUESTION-TWO") && sent.contains("ANSWER-TWO") && sent.contains("QUESTION-THREE"));
    assert_eq!(third.len(), 4, "summary, QUESTION-TWO, its answer, QUESTION-THREE: {sent:.400}");

    // An engine reopened on the same state folds the compaction from the log.
    let reopened = folder.reopen();
    folder.model.push(text("Four.", (4720, 5)));
    let events = talk.say(&reopened, "QUESTION-FOUR").await;
    assert_eq!(compactions(&events).len(), 1, "no second compaction: {:?}", types(&events));
    let requests = folder.model.requests();
    assert_eq!(requests.len(), 5);
    let fourth = messages_of(&requests[4].body);
    assert_eq!(fourth[..third.len()], third[..], "the restarted engine sends the same conversation");
    assert_eq!(fourth.len(), third.len() + 2);
    assert_eq!(fourth[third.len()]["content"], "Three.");
    assert_eq!(fourth[third.len() + 1]["content"], "QUESTION-FOUR");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_compaction_off_nothing_is_compacted() {
    let folder =
        Folder::with_agent_toml("context_window = 8750\n\n[compaction]\nenabled = false\nkeep_turns = 1\n", &[]).await;
    folder.model.push(text(&long_answer("ANSWER-ONE"), (10, 5)));
    folder.model.push(text(&long_answer("ANSWER-TWO"), (10, 5)));
    folder.model.push(text("Three.", (10, 5)));
    let mut talk = Talk::start(&folder, "QUESTION-ONE").await;
    talk.say(&folder.engine, "QUESTION-TWO").await;
    let events = talk.say(&folder.engine, "QUESTION-THREE").await;
    assert!(compactions(&events).is_empty(), "{:?}", types(&events));
    let requests = folder.model.requests();
    assert_eq!(requests.len(), 3, "no summary call");
    assert!(requests[2].body.to_string().contains("ANSWER-ONE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_summary_call_fails_the_turn_with_compaction_failed() {
    let folder = Folder::with_agent_toml(SMALL_WINDOW, &[]).await;
    folder.model.push(text(&long_answer("ANSWER-ONE"), (600, 4000)));
    folder.model.push(text(&long_answer("ANSWER-TWO"), (4600, 4000)));
    folder.model.push(Reply::status(400, r#"{"error":{"message":"no summaries today"}}"#));
    let mut talk = Talk::start(&folder, "QUESTION-ONE").await;
    talk.say(&folder.engine, "QUESTION-TWO").await;
    let events = talk.say(&folder.engine, "QUESTION-THREE").await;

    assert!(compactions(&events).is_empty());
    let failed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(failed) => Some(failed),
            _ => None,
        })
        .expect("the turn failed");
    assert_eq!(failed.error, Some(FailureCode::CompactionFailed));
    assert!(failed.message.contains("no summaries today"), "{}", failed.message);
    assert_eq!(count(&events, "turn.completed"), 2, "earlier turns and their events stay");
    assert_eq!(count(&events, "message.received"), 3);
    assert_eq!(folder.model.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_compacted_and_retried_once() {
    // No window known: only the provider's refusal triggers.
    let folder = Folder::with_agent_toml("\n[compaction]\nkeep_turns = 1\n", &[]).await;
    folder.model.push(text(&long_answer("ANSWER-ONE"), (10, 5)));
    folder.model.push(text(&long_answer("ANSWER-TWO"), (10, 5)));
    folder.model.push(refused());
    folder.model.push(text("SUMMARY of the first exchange.", (50, 10)));
    folder.model.push(text("Three.", (10, 5)));
    let mut talk = Talk::start(&folder, "QUESTION-ONE").await;
    talk.say(&folder.engine, "QUESTION-TWO").await;
    let events = talk.say(&folder.engine, "QUESTION-THREE").await;

    let compacted = compactions(&events);
    assert_eq!(compacted.len(), 1, "{:?}", types(&events));
    assert_eq!(compacted[0].reason, "context_length_exceeded");
    assert_eq!(count(&events, "turn.completed"), 3, "{:?}", types(&events));
    let requests = folder.model.requests();
    assert_eq!(requests.len(), 5);
    let retried = requests[4].body.to_string();
    assert!(retried.contains("SUMMARY of the first exchange.") && !retried.contains("ANSWER-ONE"));

    // Refused again after compacting: the turn fails with `context_length`.
    folder.model.push(refused());
    folder.model.push(text("SUMMARY again.", (50, 10)));
    folder.model.push(refused());
    let events = talk.say(&folder.engine, "QUESTION-FOUR").await;
    let failed = events
        .iter()
        .rev()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(failed) => Some(failed),
            _ => None,
        })
        .expect("the turn failed");
    assert_eq!(failed.error, Some(FailureCode::ContextLength));
    assert!(failed.message.contains("even after compacting"), "{}", failed.message);
    assert_eq!(folder.model.requests().len(), 8);
}
