//! Guards crash recovery on open: a torn final line is cut off (and the file truncated to the
//! last complete line); damage followed by valid events is refused, not silently repaired.

use std::io::Write;

use bdk_store::{Error, EventLog};

use super::support::{Fixture, delta, text_of, within};

#[tokio::test]
async fn a_torn_final_line_is_dropped_on_open() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("a"), delta("b"), delta("c")])).await.unwrap();
    let path = fx.store.layout().events_path(&id);
    let intact = std::fs::read(&path).unwrap();

    // A crash in the middle of writing the fourth event.
    let torn = br#"{"type":"message.appended","index":3,"sessionId":"ses_"#;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();

    let store = fx.reopen();
    let info = within(store.log_info(&id)).await.unwrap();
    assert_eq!(info.events, 3);
    assert_eq!(info.dropped_bytes_on_open, torn.len() as u64);
    assert_eq!(std::fs::read(&path).unwrap(), intact, "truncated to the last complete line");

    let next = within(store.append(&id, vec![delta("d")])).await.unwrap();
    assert_eq!(next[0].index, 3);
    let all = within(store.read(&id, 0, None)).await.unwrap();
    let texts: Vec<_> = all.iter().map(|e| text_of(&e.data)).collect();
    assert_eq!(texts, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn an_intact_log_reports_nothing_dropped() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("a")])).await.unwrap();
    let info = within(fx.reopen().log_info(&id)).await.unwrap();
    assert_eq!((info.events, info.dropped_bytes_on_open), (1, 0));
}

#[tokio::test]
async fn damage_in_the_middle_is_reported_not_repaired() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("a"), delta("b")])).await.unwrap();
    fx.store.close_log(&id);
    let path = fx.store.layout().events_path(&id);
    let text = std::fs::read_to_string(&path).unwrap();
    let damaged = text.replacen("\"index\":0", "\"index\":0,,", 1);
    std::fs::write(&path, &damaged).unwrap();

    let err = within(fx.reopen().read(&id, 0, None)).await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { offset: 0, .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged, "the file is left for a person to inspect");
}
