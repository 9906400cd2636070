//! What a plain text turn costs the disk, counted through the store's own sync counters (not
//! timed): a new session and a follow-up each make a fixed, small number of durable syncs,
//! and a session whose turns call no tool never gets a workspace folder.

use bdk_engine::Admission;
use bdk_model::ScriptStep;
use bdk_protocol::EventData;
use bdk_store::{SessionStore, SyncStats};
use serde_json::json;

use super::support::{Fixture, alice, filesystem_only, follow, settled, within};

#[tokio::test]
async fn a_new_session_text_turn_makes_two_file_syncs_and_two_directory_syncs() {
    if filesystem_only(
        "a_new_session_text_turn_makes_two_file_syncs_and_two_directory_syncs",
        "the store's fsync counters",
    ) {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there"), ScriptStep::text("again")]).await;
    let before = fx.fs.syncs();
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    // Two group commits of the log: the POST's `session.started` + `message.received`, which
    // also carries the session's first record (`session.json` is replaced without a sync), and
    // the whole turn with `session.waiting`. Directories: the session folder's entries and
    // `sessions/` for the new folder. The open-session marker is not synced.
    assert_eq!(fx.fs.syncs().since(before), SyncStats { file_syncs: 2, dir_syncs: 2 });

    let before = fx.fs.syncs();
    let reply = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    assert!(reply.turn_id.is_some());
    settled(&fx.engine, &started.session_id, 2).await;
    // `message.received` with the rotated token's record in the same commit, then the turn.
    // No directory: `session.json` and the marker the waiting session gets back are not synced.
    assert_eq!(fx.fs.syncs().since(before), SyncStats { file_syncs: 2, dir_syncs: 0 });
}

/// A text turn's store work runs on the store's writer threads: a follow-up hands nothing to
/// tokio's blocking pool (its message, its turn, and the settled status that rides in the
/// turn's closing commit), and a new session only the creation of its folder.
#[tokio::test]
async fn a_text_turn_makes_no_blocking_pool_hop() {
    if filesystem_only("a_text_turn_makes_no_blocking_pool_hop", "the filesystem store's hop counter") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there"), ScriptStep::text("again")]).await;
    let before = fx.fs.blocking_hops();
    let started = fx.start("hi").await;
    let first = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(fx.fs.blocking_hops() - before, 1, "creating the session's folder");

    // A client that keeps its stream open (a stream opened afresh from index 0 reads the log
    // from disk, once the events no follower waits for have left memory).
    let next = first.last().map_or(0, |e| e.index + 1);
    let mut stream = within(fx.engine.follow(&started.session_id, &alice(), next)).await.unwrap();
    let before = fx.fs.blocking_hops();
    let reply = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    loop {
        let event = within(stream.next()).await.unwrap().unwrap();
        if matches!(event.data, EventData::SessionWaiting(_)) {
            break;
        }
    }
    assert_eq!(fx.fs.blocking_hops() - before, 0);
    let record = within(fx.fs.get(&started.session_id)).await.unwrap().unwrap();
    assert_eq!(record.status, Some(bdk_store::SessionStatus::Waiting));
    assert_eq!(record.continuation_token, Some(reply.continuation_token));
}

#[tokio::test]
async fn a_session_that_calls_no_tool_creates_no_workspace_folder() {
    if filesystem_only("a_session_that_calls_no_tool_creates_no_workspace_folder", "the filesystem layout's folders") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("just words")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let session_dir = fx.fs.layout().session_dir(&started.session_id);
    assert!(session_dir.join("session.json").is_file());
    assert!(!fx.fs.layout().workspace_dir(&started.session_id).exists());
}

#[tokio::test]
async fn the_workspace_folder_appears_with_the_first_tool_call() {
    if filesystem_only("the_workspace_folder_appears_with_the_first_tool_call", "the filesystem layout's folders") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::tool_call("c1", "add", json!({"a": 1, "b": 2})), ScriptStep::text("three")])
        .await;
    let started = fx.start("add").await;
    settled(&fx.engine, &started.session_id, 1).await;
    assert!(fx.fs.layout().workspace_dir(&started.session_id).is_dir());
    let calls = fx.tools.calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].workspace.as_deref(), Some(fx.fs.layout().workspace_dir(&started.session_id).as_path()));
}

/// The owner check of a stream (or a read) on a session whose actor is live answers from the
/// actor's record: it reads no `session.json`, shown here by removing the file.
#[tokio::test]
async fn a_stream_of_a_live_session_reads_no_session_record() {
    if filesystem_only("a_stream_of_a_live_session_reads_no_session_record", "the filesystem layout's files") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let id = &started.session_id;
    std::fs::remove_file(fx.fs.layout().session_dir(id).join("session.json")).unwrap();
    let mut stream = within(fx.engine.follow(id, &alice(), 0)).await.unwrap();
    assert!(within(stream.next()).await.is_some_and(|e| e.is_ok()));
    let events = within(fx.engine.events(id, &alice(), 0)).await.unwrap();
    assert!(!events.is_empty());
    let bob = bdk_engine::Principal::new("bob");
    let refused = within(fx.engine.follow(id, &bob, 0)).await.map(drop);
    assert!(matches!(refused, Err(bdk_engine::EngineError::Forbidden(_))), "{refused:?}");
}
