//! Guards the durability contract: once `append` returns, the event is in the file, and a store
//! opened afterwards (a restart) replays exactly what was acknowledged.

use bdk_protocol::event::{TurnStarted, Usage};
use bdk_protocol::{EventData, TurnId};
use bdk_store::{EventLog, FsStoreOptions, NewEvent};

use super::support::{Fixture, delta, text_of, within};

#[tokio::test]
async fn acknowledged_appends_survive_a_restart() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let turn = TurnId::generate();
    let mut acked = Vec::new();
    acked.extend(
        within(
            fx.store.append(&id, vec![NewEvent::in_turn(turn.clone(), EventData::TurnStarted(TurnStarted::default()))]),
        )
        .await
        .unwrap(),
    );
    for i in 0..9 {
        acked.extend(within(fx.store.append(&id, vec![delta(format!("part {i}"))])).await.unwrap());
    }
    assert_eq!(acked.len(), 10);
    assert_eq!(acked[0].turn_id.as_ref(), Some(&turn));

    // The bytes are in the file as soon as the ack returns.
    let text = std::fs::read_to_string(fx.store.layout().events_path(&id)).unwrap();
    assert_eq!(text.lines().count(), 10);
    assert!(text.ends_with('\n'));

    let reopened = fx.reopen();
    let replayed = within(reopened.read(&id, 0, None)).await.unwrap();
    let acked: Vec<_> = acked.iter().map(|e| (**e).clone()).collect();
    assert_eq!(replayed, acked);
    assert_eq!(within(reopened.len(&id)).await.unwrap(), 10);
}

#[tokio::test]
async fn each_line_is_the_event_json() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let usage = Usage { input_tokens: 5, output_tokens: 7, ..Usage::default() };
    let done = EventData::TurnCompleted(bdk_protocol::event::TurnCompleted {
        usage,
        estimated_cost_usd: Some(0.5),
        model: None,
        result: Some("ok".into()),
        duration_ms: None,
    });
    // The session's first commit also carries its record (`records.rs`); the lines after it
    // are the events alone.
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    let first = std::fs::read_to_string(fx.store.layout().events_path(&id)).unwrap();
    let acked = within(fx.store.append(&id, vec![NewEvent::new(done)])).await.unwrap();
    let text = std::fs::read_to_string(fx.store.layout().events_path(&id)).unwrap();
    let text = &text[first.len()..];
    assert_eq!(text, format!("{}\n", serde_json::to_string(&*acked[0]).unwrap()));
    assert!(text.starts_with(&format!("{{\"type\":\"turn.completed\",\"index\":1,\"sessionId\":\"{id}\",\"at\":\"")));
}

#[tokio::test]
async fn appending_to_an_unknown_session_fails() {
    let fx = Fixture::new();
    let id = bdk_protocol::SessionId::generate();
    let err = within(fx.store.append(&id, vec![delta("x")])).await.unwrap_err();
    assert!(matches!(err, bdk_store::Error::SessionNotFound(_)), "{err}");
    assert!(!fx.store.layout().session_dir(&id).exists(), "no folder is created for it");
}

/// A burst of live sessions holds no more log files open than the store's budget (a file
/// descriptor each would run the process out of them): past it, a log closes its file after
/// each commit and opens it again at the next, and every session stays writable and readable.
#[tokio::test]
async fn live_sessions_hold_no_more_log_files_than_the_budget() {
    let fx = Fixture::with(FsStoreOptions { max_open_logs: 3, ..FsStoreOptions::default() });
    let mut ids = Vec::new();
    for i in 0..10 {
        let id = fx.session().await;
        within(fx.store.append(&id, vec![delta(format!("{i}a")), delta(format!("{i}b"))])).await.unwrap();
        assert!(fx.store.open_log_files() <= 3, "{} log files open", fx.store.open_log_files());
        ids.push(id);
    }
    assert_eq!(fx.store.open_logs(), 10, "the logs themselves stay open");
    for (i, id) in ids.iter().enumerate() {
        let written = within(fx.store.append(id, vec![delta(format!("{i}c"))])).await.unwrap();
        assert_eq!(written[0].index, 2);
        assert!(fx.store.open_log_files() <= 3);
    }
    let reopened = fx.reopen();
    for (i, id) in ids.iter().enumerate() {
        let texts: Vec<String> =
            reopened.read(id, 0, None).await.unwrap().iter().map(|e| text_of(&e.data).to_owned()).collect();
        assert_eq!(texts, [format!("{i}a"), format!("{i}b"), format!("{i}c")]);
    }
    for id in &ids {
        fx.store.close_log(id);
    }
    assert_eq!(fx.store.open_log_files(), 0);
}
