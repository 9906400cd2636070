//! Guards live follow: replay-then-follow while appends run concurrently yields every index
//! exactly once, in order, including for followers that lag past the broadcast buffer and for
//! followers that start ahead of the log. Streams end when the session is deleted.

use std::time::Duration;

use bdk_protocol::SessionId;
use bdk_store::{EventLog, FsStore, FsStoreOptions, SessionStore};

use super::support::{Fixture, delta, within};

const APPENDERS: u64 = 8;
const PER_APPENDER: u64 = 60;
const TOTAL: u64 = APPENDERS * PER_APPENDER;

/// Collects indices from `from` until the last one, sleeping `pause` between reads.
async fn collect(store: FsStore, id: SessionId, from: u64, pause: Duration) -> Vec<u64> {
    let mut stream = store.follow(&id, from).await.unwrap();
    let mut seen = Vec::new();
    while seen.last().is_none_or(|&last| last + 1 < TOTAL) {
        let event = stream.next().await.expect("stream ended early").unwrap();
        seen.push(event.index);
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_see_every_event_once_while_appends_happen() {
    // A tiny broadcast buffer forces the lag-recovery path.
    let fx = Fixture::with(FsStoreOptions { broadcast_capacity: 4, ..FsStoreOptions::default() });
    let id = fx.session().await;
    within(fx.store.append(&id, (0..20).map(|i| delta(i.to_string())).collect())).await.unwrap();

    let mut followers = Vec::new();
    for (from, pause) in
        [(0, Duration::ZERO), (10, Duration::ZERO), (0, Duration::from_millis(1)), (300, Duration::ZERO)]
    {
        let task = tokio::spawn(collect(fx.store.clone(), id.clone(), from, pause));
        followers.push((from, task));
    }
    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        let (store, id) = (fx.store.clone(), id.clone());
        appenders.push(tokio::spawn(async move {
            let per = if a == 0 { PER_APPENDER - 20 } else { PER_APPENDER };
            for n in 0..per {
                store.append(&id, vec![delta(format!("{a}:{n}"))]).await.unwrap();
                if n % 10 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    // A follower that joins halfway through (waiting for the halfway mark, not for a time).
    within(async {
        while fx.store.len(&id).await.unwrap() < TOTAL / 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    followers.push((5, tokio::spawn(collect(fx.store.clone(), id.clone(), 5, Duration::ZERO))));

    for task in appenders {
        within(task).await.unwrap();
    }
    for (from, task) in followers {
        let seen = within(task).await.unwrap();
        assert_eq!(seen, (from..TOTAL).collect::<Vec<_>>(), "follower from {from}");
    }
}

#[tokio::test]
async fn a_follower_of_an_empty_log_waits_for_the_first_event() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let mut stream = within(fx.store.follow(&id, 0)).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
    assert!(waiting.is_err(), "nothing to yield yet");
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    assert_eq!(within(stream.next()).await.unwrap().unwrap().index, 0);
}

#[tokio::test]
async fn deleting_the_session_ends_its_streams() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("a")])).await.unwrap();
    let mut stream = within(fx.store.follow(&id, 0)).await.unwrap();
    assert_eq!(within(stream.next()).await.unwrap().unwrap().index, 0);
    assert!(within(fx.store.delete(&id)).await.unwrap());
    assert!(within(stream.next()).await.is_none());
}
