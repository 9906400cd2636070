//! The reply text is stored once: `message.completed`, `reasoning.completed`,
//! `turn.completed.result` and `session.completed.result` are written as references to the
//! deltas (docs/formats.md) and expanded on every read, so live and replayed clients see the
//! same JSON as before, and logs written before still read.

use std::sync::Arc;

use bdk_model::{ModelError, ScriptStep, ScriptedProvider};
use bdk_protocol::event::{SessionMode, TextCompleted, TextDelta, TurnCompleted, Usage};
use bdk_protocol::{Event, EventData};
use bdk_store::{NewEvent, SessionRecord};
use serde_json::json;

use super::support::*;

fn lines(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| serde_json::to_string(e).unwrap()).collect()
}

/// The bytes the store holds for the log: its file, or on PostgreSQL the stored events' JSON.
async fn log_bytes(fx: &Fixture, id: &bdk_protocol::SessionId) -> u64 {
    if on_postgres() {
        return lines(&raw(fx, id).await).iter().map(|l| l.len() as u64 + 1).sum();
    }
    let path = fx.dir.path().join("test/sessions").join(id.to_string()).join("events.ndjson");
    std::fs::metadata(path).unwrap().len()
}

/// The raw log, as the store holds it (no expansion).
async fn raw(fx: &Fixture, id: &bdk_protocol::SessionId) -> Vec<Event> {
    within(fx.backend.stores().events.read(id, 0, None)).await.unwrap()
}

fn completed_text(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageCompleted(done) => Some(done.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_large_answer_is_stored_about_once() {
    // 512 KiB of words: under the default output cap, streamed as many deltas.
    let answer = "lorem ipsum dolor sit amet ".repeat(512 * 1024 / 27);
    let fx = Fixture::new(vec![say(&answer)]).await;
    let started = within(fx.engine.start_session(start("go", SessionMode::Task))).await.unwrap();
    let id = started.session_id;
    let live = settled(&fx.engine, &id, 1).await;
    // Everyone above the store sees the text in full, three times, as before.
    assert_eq!(completed_text(&live), vec![answer.clone()]);
    let Some(EventData::TurnCompleted(done)) =
        live.iter().map(|e| &e.data).find(|d| d.event_type() == "turn.completed")
    else {
        panic!("no turn.completed: {:?}", types(&live));
    };
    assert_eq!(done.result.as_deref(), Some(answer.as_str()));
    let Some(EventData::SessionCompleted(session)) = live.last().map(|e| &e.data) else { panic!("{:?}", types(&live)) };
    assert_eq!(session.result.as_deref(), Some(answer.as_str()));

    // On disk the text is there once: the deltas, and references.
    let stored = log_bytes(&fx, &id).await;
    let inline: usize = lines(&live).iter().map(|l| l.len() + 1).sum();
    eprintln!("answer {} bytes: log {stored} bytes stored, {inline} bytes inline", answer.len());
    assert!(stored < answer.len() as u64 * 6 / 5, "the log holds {stored} bytes for {} bytes of text", answer.len());
    assert!(inline > answer.len() * 3, "the events as read repeat it: {inline}");
    let raw = raw(&fx, &id).await;
    let stored_types: Vec<&str> = types(&raw).into_iter().filter(|t| t.starts_with("stored.")).collect();
    assert_eq!(stored_types, ["stored.message.completed", "stored.turn.completed", "stored.session.completed"]);
}

#[tokio::test]
async fn replayed_events_are_byte_identical_to_live_ones() {
    let steps = vec![
        ScriptStep::text("let me add those").with_reasoning("the user wants a sum").with_tool_call(
            "c0",
            "add",
            json!({"a": 1, "b": 2}),
        ),
        say("the sum is 3").with_reasoning("adding done"),
    ];
    let fx = Fixture::new(steps).await;
    let started = within(fx.engine.start_session(start("add 1 and 2", SessionMode::Task))).await.unwrap();
    let id = started.session_id;
    let live = settled(&fx.engine, &id, 1).await;
    assert_eq!(completed_text(&live), ["let me add those", "the sum is 3"]);
    let reasoning: Vec<&str> = live
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ReasoningCompleted(done) => Some(done.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, ["the user wants a sum", "adding done"]);

    // Read back through the engine, from the start and from every index.
    let replayed = within(fx.engine.events(&id, &alice(), 0)).await.unwrap();
    assert_eq!(lines(&replayed), lines(&live));
    for from in 0..live.len() as u64 {
        let tail = within(fx.engine.events(&id, &alice(), from)).await.unwrap();
        assert_eq!(lines(&tail), lines(&live[from as usize..]), "read from {from}");
    }

    // A restarted engine (nothing cached) follows from the middle of the turn.
    let engine = fx.restart(Arc::new(ScriptedProvider::echo()));
    let middle = live.iter().position(|e| e.event_type() == "message.completed").unwrap() as u64;
    let mut stream = within(engine.follow(&id, &alice(), middle)).await.unwrap();
    let mut followed = Vec::new();
    while followed.len() < live.len() - middle as usize {
        followed.push((*within(stream.next()).await.unwrap().unwrap()).clone());
    }
    assert_eq!(lines(&followed), lines(&live[middle as usize..]));

    // The stored form uses references for every repeated text.
    let raw = raw(&fx, &id).await;
    let stored = types(&raw).into_iter().filter(|t| t.starts_with("stored.")).count();
    assert_eq!(stored, 2 + 2 + 2, "{:?}", types(&raw));
}

#[tokio::test]
async fn a_log_written_with_inline_text_still_reads() {
    let fx = Fixture::new(vec![say("a follow-up answer")]).await;
    let id = bdk_protocol::SessionId::generate();
    let turn = bdk_protocol::TurnId::generate();
    let store = fx.backend.stores();
    store.sessions.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    let data = [
        EventData::MessageAppended(TextDelta { delta: "an old ".into() }),
        EventData::MessageAppended(TextDelta { delta: "answer".into() }),
        EventData::MessageCompleted(TextCompleted { text: "an old answer".into() }),
        EventData::TurnCompleted(TurnCompleted {
            usage: Usage::default(),
            estimated_cost_usd: None,
            model: Some("m".into()),
            result: Some("an old answer".into()),
            duration_ms: Some(3),
        }),
    ];
    let events: Vec<NewEvent> = data.iter().cloned().map(|d| NewEvent::in_turn(turn.clone(), d)).collect();
    let written = within(store.events.append(&id, events)).await.unwrap();
    let read = within(fx.engine.events(&id, &alice(), 0)).await.unwrap();
    let expected: Vec<Event> = written.iter().map(|e| (**e).clone()).collect();
    assert_eq!(lines(&read), lines(&expected));
}

#[tokio::test]
async fn a_turn_that_fails_mid_text_keeps_its_deltas_and_replays_the_same() {
    let broken = ScriptStep {
        text: Some("half an answer then".into()),
        error: Some(ModelError::Authentication { message: "revoked mid-stream".into() }),
        ..Default::default()
    };
    let fx = Fixture::new(vec![broken, say("the second try")]).await;
    let started = fx.start("go").await;
    let id = started.session_id;
    let live = settled(&fx.engine, &id, 1).await;
    assert_eq!(count(&live, "turn.failed"), 1, "{:?}", types(&live));
    assert_eq!(count(&live, "message.completed"), 0, "{:?}", types(&live));
    let replayed = within(fx.engine.events(&id, &alice(), 0)).await.unwrap();
    assert_eq!(lines(&replayed), lines(&live));

    // The next turn's text is stored once and reads back whole.
    let token = started.continuation_token.clone();
    within(fx.engine.follow_up(&id, follow("again", &token, bdk_engine::Admission::Preempt))).await.unwrap();
    let live = settled(&fx.engine, &id, 2).await;
    assert_eq!(completed_text(&live), ["the second try"]);
    let replayed = within(fx.engine.events(&id, &alice(), 0)).await.unwrap();
    assert_eq!(lines(&replayed), lines(&live));
    let raw = raw(&fx, &id).await;
    assert!(types(&raw).contains(&"stored.message.completed"), "{:?}", types(&raw));
}

#[test]
fn a_saved_log_file_expands_without_the_store() {
    let session = bdk_protocol::SessionId::generate();
    let turn = bdk_protocol::TurnId::generate();
    let event = |index: u64, data: EventData| Event {
        index,
        session_id: session.clone(),
        turn_id: Some(turn.clone()),
        at: bdk_protocol::event::timestamp_now(),
        data,
    };
    let other = |event_type: &str, data: serde_json::Value| EventData::Other { event_type: event_type.into(), data };
    let events = vec![
        event(0, EventData::MessageAppended(TextDelta { delta: "hello ".into() })),
        event(1, EventData::MessageAppended(TextDelta { delta: "world".into() })),
        event(2, other("stored.message.completed", json!({"back": 2}))),
        event(3, other("stored.turn.completed", json!({"usage": {}, "resultAt": 2}))),
    ];
    let expanded = bdk_engine::stored_text::expand_log(events);
    assert_eq!(completed_text(&expanded), ["hello world"]);
    let EventData::TurnCompleted(done) = &expanded[3].data else { panic!("{:?}", expanded[3]) };
    assert_eq!(done.result.as_deref(), Some("hello world"));
}
