//! Fifty follow-ups racing on one continuation token: exactly one is accepted, the other
//! forty-nine get 409, and only one turn runs for them.

use bdk_model::ScriptStep;
use futures_util::future::join_all;
use serde_json::json;

use super::support::{host, reply, types};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_follow_ups_with_one_token_admit_exactly_one() {
    let mut script = vec![ScriptStep::text("first")];
    script.extend((0..60).map(|i| ScriptStep::text(format!("reply {i}"))));
    let host = host().script(script).start().await;
    let started = host.start_session("first").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;

    let url = host.url(&format!("/v1/session/{id}"));
    let requests = (0..50).map(|i| {
        let request = host
            .client
            .post(&url)
            .json(&json!({"continuationToken": started.continuation_token, "message": format!("racer {i}")}));
        async move { reply(request.send().await.unwrap()).await }
    });
    let replies = join_all(requests).await;
    let accepted: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(accepted.len(), 1, "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    for rejected in replies.iter().filter(|r| r.status != 200) {
        assert_eq!(rejected.status, 409, "{}", rejected.text);
        let code = rejected.body["error"].as_str().unwrap();
        assert!(["stale_continuation_token", "session_busy"].contains(&code), "{code}");
    }

    let last = host.wait_for(&id, "session.waiting", Some(started_waiting_index(&host, &id).await)).await;
    let events = host.events(&id).await;
    let seen = types(&events[..=last.index as usize]);
    assert_eq!(seen.iter().filter(|t| *t == "turn.started").count(), 2, "{seen:?}");
    assert_eq!(seen.iter().filter(|t| *t == "message.received").count(), 2, "{seen:?}");
    assert_eq!(host.provider.requests().len(), 2, "the model was called once per turn");
    host.shutdown().await;
}

/// The index of the first `session.waiting` (the end of the first turn).
async fn started_waiting_index(host: &super::support::Host, id: &str) -> u64 {
    host.wait_for(id, "session.waiting", None).await.index
}
