//! The NDJSON stream as a client reads it: a follower attached before a turn sees every event
//! of it once and in order; a reconnect with `startIndex` resumes without duplicates or gaps;
//! `/events` is the same content as a one-shot dump.

use std::time::Duration;

use bdk_model::ScriptStep;

use super::support::{appended_text, assert_dense, host, slow_text, slow_text_body, types, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_attached_before_the_turn_sees_every_event_once_in_order() {
    let host =
        host().script(vec![ScriptStep::text("first answer"), slow_text(30, Duration::from_millis(5))]).start().await;
    let started = host.start_session("first").await;
    let id = started.session_id.to_string();
    let first_turn = host.stream(&id, 0).await.until("session.waiting").await;
    assert_dense(&first_turn, 0);
    let next = first_turn.last().unwrap().index + 1;

    // Attach live, before the second turn exists.
    let mut live = host.stream(&id, next).await;
    let reply = host.follow_up(&id, &started.continuation_token, "second").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let second_turn = live.until("session.waiting").await;
    assert_dense(&second_turn, next);
    let seen = types(&second_turn);
    assert_eq!(seen.first().map(String::as_str), Some("message.received"));
    assert_eq!(seen.iter().filter(|t| *t == "turn.started").count(), 1);
    assert_eq!(seen.iter().filter(|t| *t == "turn.completed").count(), 1);
    assert!(seen.iter().filter(|t| *t == "message.appended").count() > 1, "{seen:?}");
    assert_eq!(appended_text(&second_turn), slow_text_body(30));

    // The live view equals the recorded log.
    let recorded = host.events(&id).await;
    assert_eq!(&recorded[next as usize..], &second_turn[..]);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_attached_while_the_turn_starts_misses_nothing() {
    let host = host().script(vec![slow_text(40, Duration::from_millis(3))]).start().await;
    let started = host.start_session("go").await;
    let id = started.session_id.to_string();
    let events = host.stream(&id, 0).await.until("session.waiting").await;
    assert_dense(&events, 0);
    assert_eq!(appended_text(&events), slow_text_body(40));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_with_start_index_resumes_without_duplicates() {
    let host = host().script(vec![slow_text(60, Duration::from_millis(10))]).start().await;
    let started = host.start_session("go").await;
    let id = started.session_id.to_string();

    // Reconnect after every few events until the turn is over.
    let mut collected: Vec<bdk_protocol::Event> = Vec::new();
    let mut connections = 0;
    while collected.last().is_none_or(|e| e.event_type() != "session.waiting") {
        let next = collected.last().map_or(0, |e| e.index + 1);
        let mut stream = host.stream(&id, next).await;
        connections += 1;
        for _ in 0..4 {
            let event = stream.next().await.expect("the stream ended early");
            let done = event.event_type() == "session.waiting";
            collected.push(event);
            if done {
                break;
            }
        }
    }
    assert!(connections > 2, "only {connections} connections");
    assert_dense(&collected, 0);
    assert_eq!(collected, host.events(&id).await);

    // A start index past the end waits for new events rather than failing.
    let end = collected.len() as u64;
    let mut tail = host.stream(&id, end).await;
    let reply = host.follow_up(&id, &started.continuation_token, "more").await;
    assert_eq!(reply.status, 200);
    let more = tail.next().await.unwrap();
    assert_eq!(more.index, end);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_is_a_one_shot_dump_from_start_index() {
    let host = host().start().await;
    let started = host.start_session("dump me").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    let all = host.events(&id).await;
    assert_dense(&all, 0);
    let reply = host.get(&format!("/v1/session/{id}/events?startIndex=2")).await;
    assert_eq!(reply.headers["content-type"], "application/x-ndjson");
    let tail = super::support::parse_lines(&reply.text);
    assert_eq!(&all[2..], &tail[..]);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_leaves_its_idle_session_no_channel_and_no_tail() {
    //! Guards what an idle session holds between its turn and its actor's retirement: once its
    //! client has closed the stream, the server drops the follower, and the session's open log
    //! keeps no live channel (a ring of 1,024 slots) and no events in memory.
    let host = host().start().await;
    let Some(store) = host.fs_store.clone() else { return }; // the PostgreSQL backend has no tails
    let sessions = 5;
    for n in 0..sessions {
        let started = host.start_session(&format!("hello {n}")).await;
        let mut lines = host.stream(started.session_id.as_ref(), 0).await;
        lines.until("session.waiting").await;
        drop(lines);
    }
    within("every closed stream's follower to end", async {
        loop {
            let memory = store.log_memory();
            if memory.live_channels == 0 && memory.tail_events == 0 {
                break memory;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // The sessions' actors are still live (30 s idle timeout), so their logs are still open.
    assert_eq!(store.log_memory().open_logs, sessions);
}
