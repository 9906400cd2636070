//! `GET /v1/abs` on a real socket: an agent with an A/B experiment answers each session's
//! assignment and per-arm totals (sessions, turns, failures, tokens, cost) folded from the
//! logs, scoped to the caller's own sessions; it needs a caller like every other route.

use bdk_model::{ModelError, ScriptStep, Usage};
use bdk_server::{AuthPolicy, BearerToken};
use serde_json::{Value, json};

use super::support::host;

const TONE: &str = "description = \"Pirate tone.\"\n\n[[arms]]\nid = \"pirate\"\nweight = 1\n\
                    instructions = \"Speak like a pirate.\"\n\n[[arms]]\nid = \"plain\"\nweight = 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abs_answers_assignments_and_totals_for_the_callers_sessions() {
    let tokens = vec![BearerToken::named("alice", "a-secret"), BearerToken::named("bob", "b-secret")];
    let usage = Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() };
    let refused = ModelError::InvalidRequest { status: 400, message: "refused".into() };
    let host = host()
        .file("bot/ab/tone.toml", TONE)
        .options(|o| o.auth = AuthPolicy::from_flags(tokens, false))
        .token("a-secret")
        .script(vec![ScriptStep::text("Aye.").with_usage(usage), ScriptStep::error(refused)])
        .start()
        .await;
    let first = host.start_session("ahoy").await.session_id.to_string();
    host.wait_for(&first, "session.waiting", None).await;
    let second = host.start_session("ahoy again").await.session_id.to_string();
    host.wait_for(&second, "turn.failed", None).await;

    let abs = host.get("/v1/abs").await;
    assert_eq!(abs.status.as_u16(), 200, "{}", abs.text);
    let experiments = abs.body["experiments"].as_array().unwrap();
    assert_eq!(experiments.len(), 1, "{}", abs.text);
    let tone = &experiments[0];
    assert_eq!((&tone["id"], &tone["enabled"]), (&json!("tone"), &json!(true)));
    // Each session is in one arm (which one is a hash of its id); the totals add up per arm.
    let assignments = tone["assignments"].as_array().unwrap();
    let sessions: Vec<&str> = assignments.iter().map(|a| a["sessionId"].as_str().unwrap()).collect();
    assert_eq!(sessions, [first.as_str(), second.as_str()], "oldest first");
    let arms = tone["arms"].as_array().unwrap();
    assert_eq!(arms.iter().map(|a| a["id"].as_str().unwrap()).collect::<Vec<_>>(), ["pirate", "plain"]);
    for arm in arms {
        let enrolled = assignments.iter().filter(|a| a["arm"] == arm["id"]).count();
        assert_eq!(arm["sessions"], json!(enrolled), "{arm}");
        assert_eq!(arm["turns"], json!(enrolled), "one turn per session: {arm}");
        assert!(arm["costUsd"].is_number(), "{arm}");
    }
    let sum = |key: &str| arms.iter().map(|a| a[key].as_u64().unwrap()).sum::<u64>();
    let totals: Vec<u64> =
        ["sessions", "turns", "failures", "inputTokens", "outputTokens"].iter().map(|k| sum(k)).collect();
    assert_eq!(totals, [2, 2, 1, 10, 2], "{arms:?}");
    let failed_arm = &assignments[1]["arm"];
    let failing = arms.iter().find(|a| a["id"] == *failed_arm).unwrap();
    assert!(failing["failures"].as_u64().unwrap() >= 1, "the second session's turn failed: {failing}");

    // Another principal sees the experiment but none of alice's sessions.
    let bob = host.as_token(Some("b-secret")).get("/v1/abs").await;
    assert_eq!(bob.status.as_u16(), 200, "{}", bob.text);
    assert_eq!(bob.body["experiments"][0]["assignments"], json!([]));
    let bobs: Vec<&Value> =
        bob.body["experiments"][0]["arms"].as_array().unwrap().iter().map(|a| &a["sessions"]).collect();
    assert_eq!(bobs, [&json!(0), &json!(0)]);
    host.as_token(None).get("/v1/abs").await.assert_error(401, "unauthorized");
    host.shutdown().await;
}
