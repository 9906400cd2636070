//! The result gate end to end through the fake model server: a `result.toml` command rejects
//! the first answer with a message, the model reads it and revises, the revision is accepted
//! and the turn completes with it; the rejection is recorded in the turn so the next turn's
//! rebuilt conversation holds it at the same place. A gate that never accepts, one that prints
//! garbage and a turn with no text each fail the turn with a reason that says so.

use bdk_engine::Admission;
use bdk_protocol::EventData;
use bdk_protocol::event::FailureCode;
use serde_json::Value;

use super::folder::*;
use super::support::*;

/// Accepts an answer that cites a source; rejects anything else.
const GATE_PY: &str = r#"import json, sys
text = json.load(sys.stdin)["input"]["text"]
if "source:" in text:
    json.dump({"accept": True}, sys.stdout)
else:
    json.dump({"accept": False, "message": "cite a source"}, sys.stdout)
"#;

fn contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_answer_is_revised_then_accepted() {
    let folder = Folder::new(&[
        ("result.toml", "command = [\"python3\", \"lib/gate.py\"]\ntimeout = \"20s\"\n"),
        ("lib/gate.py", GATE_PY),
    ])
    .await;
    folder.model.push(text("It is 42.", (10, 2)));
    folder.model.push(text("It is 42 (source: the guide).", (20, 4)));
    folder.model.push(text("You're welcome.", (30, 2)));

    let started = folder.start("What is the answer?").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    let completed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnCompleted(done) => Some(done.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn.completed: {:?}", types(&events)));
    assert_eq!(completed.result.as_deref(), Some("It is 42 (source: the guide)."));
    assert_eq!(completed.usage.input_tokens, 30, "both model calls count");
    let feedback: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageReceived(m) if e.turn_id.is_some() => Some(m.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(feedback.len(), 1);
    assert_eq!(feedback[0].principal.as_deref(), Some("result"));
    assert!(feedback[0].text.contains("cite a source"));

    let requests = folder.model.requests();
    let second = contents(&requests[1].body);
    assert_eq!(second[1], ("assistant".to_owned(), "It is 42.".to_owned()));
    assert_eq!(second[2].0, "user");
    assert!(second[2].1.contains("cite a source"), "{second:?}");

    // The next turn's conversation is rebuilt from the log and holds the rejection in place.
    let token = started.continuation_token.clone();
    within(folder.engine.follow_up(&started.session_id, follow("Thanks", &token, Admission::Preempt))).await.unwrap();
    settled(&folder.engine, &started.session_id, 2).await;
    let requests = folder.model.requests();
    let third = contents(&requests[2].body);
    assert_eq!(&third[..3], &second[..3], "the rebuilt conversation differs");
    assert_eq!(third[3], ("assistant".to_owned(), "It is 42 (source: the guide).".to_owned()));
    assert_eq!(third[4], ("user".to_owned(), "Thanks".to_owned()));
}

async fn failed_reason(files: &[(&str, &str)], replies: &[&str]) -> (String, Option<FailureCode>, usize) {
    let folder = Folder::new(files).await;
    for reply in replies {
        folder.model.push(text(reply, (5, 1)));
    }
    let started = folder.start("Answer.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    let failed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(failed) => Some(failed.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn.failed: {:?}", types(&events)));
    (failed.message, failed.error, folder.model.requests().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_that_never_accepts_or_prints_garbage_fails_the_turn() {
    let gate = ("lib/gate.py", GATE_PY);
    let strict = ("result.toml", "command = [\"python3\", \"lib/gate.py\"]\nmax_revisions = 1\n");
    let (message, code, calls) = failed_reason(&[strict, gate], &["One.", "Two."]).await;
    assert!(message.contains("rejected the answer after 1 revision(s): cite a source"), "{message}");
    assert_eq!((code, calls), (Some(FailureCode::Internal), 2));

    let garbage = ("result.toml", "command = [\"sh\", \"-c\", \"echo not-a-verdict\"]\n");
    let (message, _, _) = failed_reason(&[garbage], &["Hello."]).await;
    assert!(message.contains("printed no verdict"), "{message}");

    let crash = ("result.toml", "command = [\"sh\", \"-c\", \"echo broken >&2; exit 3\"]\n");
    let (message, _, _) = failed_reason(&[crash], &["Hello."]).await;
    assert!(message.contains("the result command failed") && message.contains("broken"), "{message}");

    let accept = ("result.toml", "command = [\"sh\", \"-c\", \"true\"]\n");
    let (message, _, _) = failed_reason(&[accept], &[""]).await;
    assert!(message.contains("no text"), "{message}");
}
