//! A/B experiments end to end through the fake model server: each new session gets one
//! `ab.assigned` right after `session.started`; its turns run with the arm's extra instructions
//! or model; sessions of one channel conversation (same continuation key) land in the same arm,
//! also after a restart, and every later turn of a session runs in its arm; `abs()` totals
//! (sessions, turns, tokens) are folded from the logs and come out the same from a restarted
//! engine.

use bdk_engine::{Engine, ListScope, StartSession};
use bdk_protocol::event::SessionMode;
use bdk_protocol::{EventData, SessionId};
use serde_json::json;

use super::folder::*;
use super::support::*;

const TONE: &str = "description = \"Pirate tone or another model.\"\n\n[[arms]]\nid = \"pirate\"\nweight = 1\n\
                    instructions = \"Speak like a pirate.\"\n\n[[arms]]\nid = \"other\"\nweight = 1\nmodel = \"fake-model-b\"\n";

fn channel_start(key: &str) -> StartSession {
    let mut request = start("ahoy", SessionMode::Chat);
    request.channel = "ops".into();
    request.continuation_key = Some(key.into());
    request
}

async fn arm_of(engine: &Engine, id: &SessionId) -> String {
    let events = within(engine.events(id, &alice(), 0)).await.unwrap();
    assert!(matches!(events[0].data, EventData::SessionStarted(_)));
    let assigned: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::AbAssigned(a) => Some(a.arm.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(assigned.len(), 1);
    assert!(matches!(&events[1].data, EventData::AbAssigned(a) if a.experiment == "tone"), "ab.assigned comes second");
    assigned[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arms_apply_stick_to_channel_conversations_and_totals_survive_a_restart() {
    let folder = Folder::new(&[("ab/tone.toml", TONE)]).await;
    let mut sessions = Vec::new();
    // One at a time, so request i is session i's.
    for i in 0..6 {
        folder.model.push(text("Aye.", (10 + i, 1)));
        let started = if i == 0 {
            within(folder.engine.start_session(channel_start("pr-1"))).await.unwrap()
        } else {
            folder.start("hello").await
        };
        settled(&folder.engine, &started.session_id, 1).await;
        sessions.push(started.session_id);
    }
    let requests = folder.model.requests();
    let mut arms = Vec::new();
    for (i, id) in sessions.iter().enumerate() {
        let arm = arm_of(&folder.engine, id).await;
        let body = &requests[i].body;
        match arm.as_str() {
            "pirate" => {
                assert!(system_of(body).contains("Speak like a pirate."), "{}", system_of(body));
                assert_eq!(body["model"], json!("fake-model"));
            }
            "other" => {
                assert!(!system_of(body).contains("pirate"));
                assert_eq!(body["model"], json!("fake-model-b"));
            }
            other => panic!("unknown arm {other}"),
        }
        arms.push(arm);
    }

    let report = within(folder.engine.abs(&ListScope::All)).await.unwrap();
    let tone = &report.experiments[0];
    assert_eq!(tone.id, "tone");
    assert_eq!(tone.assignments.len(), 6);
    let sessions_total: u64 = tone.arms.iter().map(|a| a.sessions).sum();
    let turns: u64 = tone.arms.iter().map(|a| a.turns).sum();
    let input: u64 = tone.arms.iter().map(|a| a.input_tokens).sum();
    assert_eq!((sessions_total, turns, input), (6, 6, (10..16).sum::<u64>()));
    for arm in &tone.arms {
        assert_eq!(arm.sessions, arms.iter().filter(|a| **a == arm.id).count() as u64);
        assert_eq!(arm.failures, 0);
    }
    let owned = within(folder.engine.abs(&ListScope::Owner(bdk_engine::Principal::new("mallory")))).await.unwrap();
    assert!(owned.experiments[0].assignments.is_empty());

    // A restarted engine folds the same totals, and the channel conversation keeps its arm.
    let restarted = folder.reopen();
    assert_eq!(within(restarted.abs(&ListScope::All)).await.unwrap(), report);
    folder.model.push(text("Aye again.", (1, 1)));
    let again = within(restarted.start_session(channel_start("pr-1"))).await.unwrap();
    settled(&restarted, &again.session_id, 1).await;
    assert_eq!(arm_of(&restarted, &again.session_id).await, arms[0]);

    // A later turn of the session runs in its arm too (read back from the log).
    folder.model.push(text("Aye once more.", (1, 1)));
    let token = again.continuation_token.clone();
    within(restarted.follow_up(&again.session_id, follow("more", &token, bdk_engine::Admission::Preempt)))
        .await
        .unwrap();
    settled(&restarted, &again.session_id, 2).await;
    let requests = folder.model.requests();
    let (first, second) = (&requests[requests.len() - 2].body, &requests[requests.len() - 1].body);
    assert_eq!(first["model"], second["model"]);
    assert_eq!(system_of(first), system_of(second));
    assert_eq!(system_of(second).contains("Speak like a pirate."), arms[0] == "pirate");
    assert_eq!(count(&folder.events(&again.session_id).await, "ab.assigned"), 1);
}
