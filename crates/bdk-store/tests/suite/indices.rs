//! Guards index assignment: dense from 0, unique and gap-free under 50 concurrent appenders,
//! contiguous within one multi-event append, and equal to the line number in the file.

use std::collections::HashMap;

use bdk_store::EventLog;

use super::support::{Fixture, delta, text_of, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_appenders_get_dense_indices() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let mut tasks = Vec::new();
    for writer in 0..50 {
        let (store, id) = (fx.store.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            let mut indices = Vec::new();
            for n in 0..10 {
                // Every third append carries two events, which must stay adjacent.
                let events = if n % 3 == 0 {
                    vec![delta(format!("{writer}:{n}a")), delta(format!("{writer}:{n}b"))]
                } else {
                    vec![delta(format!("{writer}:{n}"))]
                };
                let acked = store.append(&id, events).await.unwrap();
                if acked.len() == 2 {
                    assert_eq!(acked[1].index, acked[0].index + 1, "one append is contiguous");
                }
                indices.extend(acked.iter().map(|e| e.index));
            }
            indices
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let indices = within(task).await.unwrap();
        assert!(indices.windows(2).all(|w| w[0] < w[1]), "one appender's events stay in its order");
        all.extend(indices);
    }
    all.sort_unstable();
    let expected: Vec<u64> = (0..all.len() as u64).collect();
    assert_eq!(all, expected, "dense, unique, from 0");
    assert_eq!(all.len(), 50 * 14);

    // Group commit: 500 appends did not take 500 fsyncs.
    let info = within(fx.store.log_info(&id)).await.unwrap();
    assert_eq!(info.events, 50 * 14);
    assert!(info.commits < 500, "{} commits for 500 concurrent appends", info.commits);

    // The file agrees: line i holds index i, and every text appears once.
    let events = within(fx.reopen().read(&id, 0, None)).await.unwrap();
    let mut seen = HashMap::new();
    for (line, event) in events.iter().enumerate() {
        assert_eq!(event.index, line as u64);
        *seen.entry(text_of(&event.data).to_owned()).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 50 * 14);
    assert!(seen.values().all(|&n| n == 1));
}

#[tokio::test]
async fn indices_continue_across_restarts_and_sessions_are_independent() {
    let fx = Fixture::new();
    let (a, b) = (fx.session().await, fx.session().await);
    within(fx.store.append(&a, vec![delta("1"), delta("2")])).await.unwrap();
    within(fx.store.append(&b, vec![delta("1")])).await.unwrap();
    let store = fx.reopen();
    assert_eq!(within(store.append(&a, vec![delta("3")])).await.unwrap()[0].index, 2);
    assert_eq!(within(store.append(&b, vec![delta("2")])).await.unwrap()[0].index, 1);
    assert!(within(store.append(&a, Vec::new())).await.unwrap().is_empty());
}
