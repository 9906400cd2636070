//! Slack channels against a fake Slack API on 127.0.0.1 speaking the Web API and Socket Mode
//! wire formats: a mention (a recorded `app_mention` payload) posts a status message in the
//! thread, then one complete reply in the thread, then removes the status; the Events API
//! checks the signing secret and the replay window and answers `url_verification`; over Socket
//! Mode every envelope is acknowledged and handled the same way.

use bdk_model::ScriptStep;
use bdk_server::channels::ChannelEnv;
use bdk_server::channels::signature::slack_signature;
use serde_json::{Value, json};

use super::fakes::{self, SlackFake};
use super::support::{Host, host, reply, within};

const SECRET: &str = "slack-signing-secret";

fn mention() -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/slack/app_mention.json", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

async fn start(fake: &SlackFake, socket: bool) -> Host {
    let channel = format!(
        "kind = \"slack\"\n[slack]\nenv_prefix = \"OPS\"\napi_url = \"{}\"\nsocket_mode = {socket}\n",
        fake.api
    );
    let mut env = vec![
        ("OPS_SLACK_BOT_TOKEN".to_owned(), "xoxb-test".to_owned()),
        ("OPS_SLACK_SIGNING_SECRET".to_owned(), SECRET.to_owned()),
    ];
    if socket {
        env.push(("OPS_SLACK_APP_TOKEN".to_owned(), "xapp-test".to_owned()));
    }
    host()
        .script(vec![ScriptStep::text("checkout-api is degraded: 5xx at 4%.")])
        .file("bot/channels/ops.toml", &channel)
        .options(|o| o.channel_env = ChannelEnv::table(env))
        .start()
        .await
}

async fn post_event(host: &Host, body: &[u8], timestamp: i64, secret: &str) -> super::support::Reply {
    let ts = timestamp.to_string();
    let request = host
        .client
        .post(host.url("/v1/channels/ops/events"))
        .header("x-slack-request-timestamp", &ts)
        .header("x-slack-signature", slack_signature(secret.as_bytes(), &ts, body))
        .header("content-type", "application/json")
        .body(body.to_vec());
    reply(request.send().await.unwrap()).await
}

/// Waits for the status, the reply and the status's removal, in that order.
async fn assert_thread_reply(fake: &SlackFake) {
    let deleted = fake.record.wait_for("chat.delete").await;
    let calls = fake.record.calls();
    let posts: Vec<&Value> = calls.iter().filter(|c| c.path == "chat.postMessage").map(|c| &c.body).collect();
    assert_eq!(posts.len(), 2, "{calls:#?}");
    assert_eq!(posts[0]["text"], bdk_server::channels::slack::WORKING);
    assert_eq!(posts[1]["text"], "checkout-api is degraded: 5xx at 4%.");
    for post in &posts {
        assert_eq!((&post["channel"], &post["thread_ts"]), (&json!("C0LAN2Q65"), &json!("1715000000.000100")));
    }
    assert_eq!(deleted.body["ts"], "1715000100.000001", "the status message is the one removed");
    assert!(calls.iter().all(|c| c.token.as_deref() == Some("xoxb-test") || c.path == "apps.connections.open"));
}

#[tokio::test]
async fn a_mention_over_the_events_api_gets_a_status_then_one_reply_in_the_thread() {
    let fake = fakes::slack().await;
    let host = start(&fake, false).await;
    let now = chrono::Utc::now().timestamp();
    let accepted = post_event(&host, &mention(), now, SECRET).await;
    assert_eq!(accepted.status.as_u16(), 200, "{}", accepted.text);
    assert_thread_reply(&fake).await;
    let sessions = host.state.agents[0].engine.list(bdk_engine::ListScope::All).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].continuation_token.as_deref(), Some("ops:C0LAN2Q65:1715000000.000100"));
    // Slack retries a delivery it thinks failed: the same event id is handled once.
    let retry = post_event(&host, &mention(), now, SECRET).await;
    assert!(retry.body["ignored"].as_str().unwrap().contains("already handled"), "{}", retry.text);
}

#[tokio::test]
async fn the_events_api_checks_signatures_and_the_replay_window() {
    let fake = fakes::slack().await;
    let host = start(&fake, false).await;
    let now = chrono::Utc::now().timestamp();
    post_event(&host, &mention(), now, "wrong-secret").await.assert_error(401, "invalid_signature");
    post_event(&host, &mention(), now - 10 * 60, SECRET).await.assert_error(401, "stale_request");
    let challenge = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let answered = post_event(&host, challenge, now, SECRET).await;
    assert_eq!(answered.body, json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}));
    post_event(&host, b"not json", now, SECRET).await.assert_error(400, "invalid_request");
    assert!(fake.record.calls().is_empty());
    assert!(host.state.agents[0].engine.list(bdk_engine::ListScope::All).await.unwrap().is_empty());
}

#[tokio::test]
async fn socket_mode_acknowledges_envelopes_and_replies_in_the_thread() {
    let fake = fakes::slack().await;
    let _host = start(&fake, true).await;
    let opened = fake.record.wait_for("apps.connections.open").await;
    assert_eq!(opened.token.as_deref(), Some("xapp-test"));
    let payload: Value = serde_json::from_slice(&mention()).unwrap();
    let envelope = json!({
        "envelope_id": "57d6a792-4d35-4d0b-b6aa-3361493e1caf",
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": 0,
        "retry_reason": ""
    });
    fake.push.send(envelope).unwrap();
    let ack = within("the envelope's acknowledgement", async { fake.acks.lock().await.recv().await }).await;
    let ack = ack.expect("the socket stays open");
    assert_eq!(ack, json!({"envelope_id": "57d6a792-4d35-4d0b-b6aa-3361493e1caf"}));
    assert_thread_reply(&fake).await;
}

#[tokio::test]
async fn stop_in_a_thread_interrupts_its_turn() {
    let fake = fakes::slack().await;
    let channel =
        format!("kind = \"slack\"\n[slack]\nenv_prefix = \"OPS\"\napi_url = \"{}\"\nsocket_mode = false\n", fake.api);
    let env = vec![
        ("OPS_SLACK_BOT_TOKEN".to_owned(), "xoxb-test".to_owned()),
        ("OPS_SLACK_SIGNING_SECRET".to_owned(), SECRET.to_owned()),
    ];
    // The first answer streams slowly, so the turn is still running when `stop` arrives.
    let host = host()
        .script(vec![super::support::slow_text(400, std::time::Duration::from_millis(50))])
        .file("bot/channels/ops.toml", &channel)
        .options(|o| o.channel_env = ChannelEnv::table(env))
        .start()
        .await;
    let now = chrono::Utc::now().timestamp();
    assert_eq!(post_event(&host, &mention(), now, SECRET).await.status.as_u16(), 200);
    fake.record.wait_for("chat.postMessage").await;
    let session = within("the thread's session", async {
        loop {
            let found = host.state.agents[0].engine.find_by_token("ops:C0LAN2Q65:1715000000.000100").await.unwrap();
            if let Some(found) = found {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let engine = host.state.agents[0].engine.clone();
    let slack = bdk_engine::Principal::new("slack");
    let has = |kind: &'static str| {
        let (engine, slack, session) = (engine.clone(), slack.clone(), session.clone());
        async move {
            within(kind, async {
                loop {
                    let events = engine.events(&session, &slack, 0).await.unwrap();
                    if let Some(event) = events.into_iter().find(|e| e.event_type() == kind) {
                        return event;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            })
            .await
        }
    };
    has("turn.started").await;
    let mut stop: Value = serde_json::from_slice(&mention()).unwrap();
    stop["event_id"] = json!("Ev0STOP");
    stop["event"]["text"] = json!("<@U0LAN0Z89> stop");
    stop["event"]["ts"] = json!("1715000050.000200");
    stop["event"]["thread_ts"] = json!("1715000000.000100");
    let stop = serde_json::to_vec(&stop).unwrap();
    assert_eq!(post_event(&host, &stop, now, SECRET).await.status.as_u16(), 200);
    let failed = has("turn.failed").await;
    assert!(format!("{failed:?}").contains("interrupted"), "{failed:?}");
    fake.record.wait_for("chat.delete").await;
    // "Stopped." goes out when `stop` returns, which may come after the delivery side deleted
    // its progress note (the closing events reach followers first): wait for it, not an order.
    within("the Stopped. reply", async {
        while !fake.record.calls().iter().any(|c| c.path == "chat.postMessage" && c.body["text"] == "Stopped.") {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let texts: Vec<String> = fake
        .record
        .calls()
        .iter()
        .filter(|c| c.path == "chat.postMessage")
        .map(|c| c.body["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts.iter().filter(|t| *t == "Stopped.").count(), 1, "{texts:?}");
    assert!(!texts.iter().any(|t| t.starts_with("w0 w1")), "no reply for the stopped turn: {texts:?}");
}
