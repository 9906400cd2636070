//! Hooks end to end through the fake model server: a `"*"` file hook sees every event of three
//! concurrent sessions exactly once and in order, each with the hook context, only after it is
//! in the log; a slow command hook (one line a second) does not hold the turns up, measured by
//! the events' own timestamps; the engine's hook status counts what was delivered. An HTTP hook
//! POSTs its events with the configured headers and posts a refused batch again; a hook command
//! that exits is restarted; a command hook reads one JSON line per event, with the channel
//! conversation's continuation in its context.

use std::collections::BTreeMap;
use std::time::Duration;

use bdk_protocol::EventData;
use serde_json::Value;

use super::folder::*;
use super::support::*;

const ALL: &str = "events = [\"*\"]\n\n[sink]\nkind = \"file\"\npath = \"hooks/all.ndjson\"\n";
const SLOW: &str = "events = [\"*\"]\ncommand = [\"sh\", \"-c\", \"while read line; do sleep 1; done\"]\n";
const TURNS: &str = "events = [\"turn.completed\"]\n\n[sink]\nkind = \"file\"\npath = \"hooks/turns.ndjson\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hook_sees_every_event_of_concurrent_sessions_once_in_order() {
    let folder = Folder::new(&[("hooks/all.toml", ALL), ("hooks/slow.toml", SLOW), ("hooks/turns.toml", TURNS)]).await;
    for _ in 0..3 {
        folder.model.push(text("Hello there.", (5, 2)));
    }
    let started = futures_join(&folder).await;
    let mut logs = BTreeMap::new();
    for id in &started {
        let events = settled(&folder.engine, id, 1).await;
        // The slow hook needs a second per event: a turn that waited for it would take at
        // least that long for its own events (bounded by what waiting would cost, not by how
        // fast a loaded machine runs a turn).
        let begin = events.iter().find(|e| matches!(e.data, EventData::TurnStarted(_))).unwrap().at;
        let end = events.iter().find(|e| matches!(e.data, EventData::TurnCompleted(_))).unwrap().at;
        let waiting_would_take = i64::try_from(events.len()).unwrap() * 1_000;
        assert!(events.len() > 5, "the slow hook would need more than 5 s for these");
        assert!((end - begin).num_milliseconds() < waiting_would_take, "a turn took {:?}", end - begin);
        logs.insert(id.to_string(), folder.events(id).await);
    }
    let total: usize = logs.values().map(Vec::len).sum();

    let path = folder.state().join("hooks/all.ndjson");
    let lines = within(async {
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            if lines.len() >= total {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(lines.len(), total, "every event exactly once");
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in &lines {
        let event = line;
        let session = event["sessionId"].as_str().unwrap().to_owned();
        let context = &line["context"];
        assert_eq!(context["sessionId"], event["sessionId"]);
        assert_eq!(context["channel"], "http");
        assert_eq!(context["mode"], "chat");
        assert_eq!(context["principal"], "alice");
        assert_eq!(context["agent"]["name"], "proj");
        assert!(context["purpose"].is_null());
        assert!(context["continuationToken"].is_null(), "an HTTP token is a credential");
        assert_eq!(context["stateRoot"].as_str().unwrap(), folder.state().to_str().unwrap());
        let index = event["index"].as_u64().unwrap();
        let logged = &logs[&session][index as usize];
        assert_eq!(event["type"], logged.event_type(), "the hook saw what the log holds");
        seen.entry(session).or_default().push(index);
    }
    for (session, indices) in &seen {
        let expected: Vec<u64> = (0..logs[session].len() as u64).collect();
        assert_eq!(indices, &expected, "in order, without gaps or repeats");
    }
    assert_eq!(seen.len(), 3);

    let turns = within(async {
        let path = folder.state().join("hooks/turns.ndjson");
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() >= 3 {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(turns.lines().all(|l| l.contains("\"turn.completed\"")), "a filter passes only its events");

    // The sink counts a delivery once its line is written: the count may trail the file.
    let all = within(async {
        loop {
            let all = folder.engine.hooks().into_iter().find(|s| s.name == "all").unwrap();
            if all.delivered >= total as u64 {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(all.delivered, total as u64);
    assert_eq!(all.dropped, 0);
}

async fn futures_join(folder: &Folder) -> Vec<bdk_protocol::SessionId> {
    let (a, b, c) = tokio::join!(folder.start("one"), folder.start("two"), folder.start("three"));
    vec![a.session_id, b.session_id, c.session_id]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_http_hook_posts_batches_and_a_command_that_exits_is_restarted() {
    let sink = bdk_test_support::FakeServer::start_plain().await;
    for _ in 0..64 {
        sink.push(bdk_test_support::Reply::status(200, "{}"));
    }
    let http = format!(
        "events = [\"turn.completed\"]\n\n[sink]\nkind = \"http\"\nurl = \"{}/hook\"\nheaders = {{ X-Test = \"yes\" }}\n",
        sink.url()
    );
    // Reads one line, then exits: every later write finds it gone.
    let quitter = "events = [\"*\"]\ncommand = [\"sh\", \"-c\", \"read line\"]\n";
    let folder = Folder::new(&[("hooks/post.toml", http.as_str()), ("hooks/quitter.toml", quitter)]).await;
    folder.model.push(text("One.", (1, 1)));
    folder.model.push(text("Two.", (1, 1)));
    let started = folder.start("first").await;
    settled(&folder.engine, &started.session_id, 1).await;
    let token = started.continuation_token.clone();
    within(folder.engine.follow_up(&started.session_id, follow("second", &token, bdk_engine::Admission::Preempt)))
        .await
        .unwrap();
    settled(&folder.engine, &started.session_id, 2).await;

    // A batch whose answer was lost (a slow machine past the request timeout) is retried, so
    // it can arrive twice: events are told apart by `(sessionId, index)`, as a receiver would.
    let posted = within(async {
        loop {
            let bodies: Vec<Value> = sink.requests().into_iter().map(|r| r.body).collect();
            let mut events: Vec<Value> =
                bodies.iter().flat_map(|b| b.as_array().cloned().unwrap_or_default()).collect();
            events.sort_by_key(|e| (e["sessionId"].to_string(), e["index"].as_u64()));
            events.dedup_by(|a, b| a["sessionId"] == b["sessionId"] && a["index"] == b["index"]);
            if events.len() >= 2 {
                return (sink.requests(), events);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let (requests, events) = posted;
    assert!(
        requests.iter().all(|r| r.method == "POST" && r.path.ends_with("/hook") && r.header("x-test") == Some("yes"))
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|e| e["type"] == "turn.completed" && e["context"]["principal"] == "alice"));

    // Only a write after the command exited finds it gone: on a loaded machine every event so
    // far may have gone into the pipe before `sh` even started, so later sessions write more.
    let restarts = within(async {
        for round in 0.. {
            let status = folder.engine.hooks();
            let quitter = status.iter().find(|s| s.name == "quitter").unwrap().clone();
            if quitter.restarts >= 1 {
                return quitter.restarts;
            }
            if round % 50 == 49 {
                folder.model.push(text("Again.", (1, 1)));
                folder.start("again").await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        unreachable!()
    })
    .await;
    assert!(restarts >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_hook_posts_a_refused_batch_again() {
    let sink = bdk_test_support::FakeServer::start_plain().await;
    sink.push(bdk_test_support::Reply::status(503, "{}"));
    for _ in 0..8 {
        sink.push(bdk_test_support::Reply::status(200, "{}"));
    }
    let http = format!("events = [\"turn.completed\"]\n\n[sink]\nkind = \"http\"\nurl = \"{}/hook\"\n", sink.url());
    let folder = Folder::new(&[("hooks/post.toml", http.as_str())]).await;
    folder.model.push(text("One.", (1, 1)));
    let started = folder.start("first").await;
    settled(&folder.engine, &started.session_id, 1).await;
    let delivered = within(async {
        loop {
            let status = folder.engine.hooks();
            if status[0].delivered + status[0].dropped >= 1 {
                return status[0].clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!((delivered.delivered, delivered.dropped), (1, 0), "{delivered:?}");
    let requests = sink.requests();
    assert!(requests.len() >= 2, "the refused batch was not posted again: {requests:?}");
    assert_eq!(requests[0].body, requests[1].body, "the retry carries the same batch");
    assert_eq!(requests[0].body[0]["type"], "turn.completed");
    assert_eq!(requests[0].body[0]["sessionId"], started.session_id.to_string());
}

/// Appends what it reads to `hook-lines.ndjson` in the state root, as it reads it.
const LINES: &str =
    "events = [\"*\"]\ncommand = [\"sh\", \"-c\", \"exec cat >> \\\"$BDK_STATE_ROOT/hook-lines.ndjson\\\"\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_reads_one_json_line_per_event_with_the_channel_context() {
    let folder = Folder::new(&[("hooks/lines.toml", LINES)]).await;
    folder.model.push(text("Hello.", (1, 1)));
    let mut request = start("hi", bdk_protocol::event::SessionMode::Chat);
    request.channel = "ops".into();
    request.continuation_key = Some("pr-1".into());
    let started = within(folder.engine.start_session(request)).await.unwrap();
    settled(&folder.engine, &started.session_id, 1).await;
    let logged = folder.events(&started.session_id).await;

    let path = folder.state().join("hook-lines.ndjson");
    let lines: Vec<Value> = within(async {
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            // Only whole lines: the command may be mid-write.
            let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
            if lines.len() >= logged.len() {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(lines.len(), logged.len(), "one line per event");
    for (line, event) in lines.iter().zip(&logged) {
        assert_eq!(line["index"], event.index, "in order");
        assert_eq!(line["type"], event.event_type());
        let context = &line["context"];
        assert_eq!(context["channel"], "ops");
        assert_eq!(context["continuationToken"], started.continuation_token.as_str(), "{context}");
        assert_eq!(context["principal"], "alice");
    }
}
