//! Guards replay from any index: `read` and `follow` return exactly the events from N on,
//! across checkpoint boundaries, with limits, and empty past the end.

use bdk_store::{EventLog, FsStore};

use super::support::{Fixture, delta, text_of, within};

const TOTAL: u64 = 700;

async fn filled() -> (Fixture, bdk_protocol::SessionId) {
    let fx = Fixture::new();
    let id = fx.session().await;
    let events = (0..TOTAL).map(|i| delta(i.to_string())).collect();
    within(fx.store.append(&id, events)).await.unwrap();
    (fx, id)
}

#[tokio::test]
async fn read_from_any_index() {
    let (fx, id) = filled().await;
    // A fresh store has no in-memory state: offsets come from the recovery scan.
    for store in [fx.store.clone(), fx.reopen()] {
        for from in [0, 1, 127, 128, 129, 255, 256, 500, TOTAL - 1, TOTAL, TOTAL + 50] {
            let events = within(store.read(&id, from, None)).await.unwrap();
            let indices: Vec<u64> = events.iter().map(|e| e.index).collect();
            assert_eq!(indices, (from..TOTAL).collect::<Vec<_>>(), "from {from}");
            for e in &events {
                assert_eq!(text_of(&e.data), e.index.to_string());
            }
        }
    }
}

#[tokio::test]
async fn read_respects_the_limit() {
    let (fx, id) = filled().await;
    let events = within(fx.store.read(&id, 300, Some(5))).await.unwrap();
    assert_eq!(events.iter().map(|e| e.index).collect::<Vec<_>>(), [300, 301, 302, 303, 304]);
    assert!(within(fx.store.read(&id, 0, Some(0))).await.unwrap().is_empty());
}

#[tokio::test]
async fn follow_replays_from_n_then_continues_live() {
    let (fx, id) = filled().await;
    let store: FsStore = fx.reopen();
    let mut stream = within(store.follow(&id, 650)).await.unwrap();
    for want in 650..TOTAL {
        assert_eq!(within(stream.next()).await.unwrap().unwrap().index, want);
    }
    within(store.append(&id, vec![delta("live")])).await.unwrap();
    let live = within(stream.next()).await.unwrap().unwrap();
    assert_eq!((live.index, text_of(&live.data)), (TOTAL, "live"));
}
