//! GitHub channels end to end: real delivery payloads (kept as fixtures) signed with
//! `X-Hub-Signature-256`; a pull request opened becomes a session keyed `pr:owner/repo#N` whose
//! answer is posted as a review to a fake GitHub API on 127.0.0.1, with a progress reaction;
//! unsigned, mis-signed and replayed deliveries, drafts and the bot's own comments start
//! nothing; the loopback-only fan-out route reaches every GitHub channel.

use bdk_engine::ListScope;
use bdk_model::ScriptStep;
use bdk_server::channels::ChannelEnv;
use bdk_server::channels::signature::github_signature;
use serde_json::{Value, json};

use super::fakes;
use super::support::{Host, host, reply};

const SECRET: &str = "hook-secret";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/github/{name}.json", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

async fn start(api: &str) -> Host {
    let channel = format!(
        "kind = \"github\"\n[github]\nbot_name = \"review-bot\"\nrepos = [\"acme/checkout\"]\n\
         webhook_secret_env = \"GH_HOOK_SECRET\"\ntoken_env = \"GH_TOKEN\"\napi_url = \"{api}\"\n\
         reactions = true\nreply = \"review\"\n"
    );
    host()
        .script(vec![ScriptStep::text("The retry keeps the idempotency key. Looks good.")])
        .file("bot/channels/reviews.toml", &channel)
        .options(|o| {
            o.channel_env = ChannelEnv::table([
                ("GH_HOOK_SECRET".to_owned(), SECRET.to_owned()),
                ("GH_TOKEN".to_owned(), "gh-token".to_owned()),
            ])
        })
        .start()
        .await
}

async fn deliver(
    host: &Host,
    url: &str,
    event: &str,
    id: &str,
    body: &[u8],
    signature: Option<String>,
) -> super::support::Reply {
    let mut request = host
        .client
        .post(url)
        .header("x-github-event", event)
        .header("x-github-delivery", id)
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    reply(request.send().await.unwrap()).await
}

async fn sessions(host: &Host) -> usize {
    host.state.agents[0].engine.list(ListScope::All).await.unwrap().len()
}

#[tokio::test]
async fn a_signed_pull_request_opened_delivery_gets_a_review_posted() {
    let (api, github) = fakes::github().await;
    let host = start(&api).await;
    let url = host.url("/v1/channels/reviews/webhook");
    let body = fixture("pull_request.opened");
    let accepted =
        deliver(&host, &url, "pull_request", "d-1", &body, Some(github_signature(SECRET.as_bytes(), &body))).await;
    assert_eq!(accepted.status.as_u16(), 202, "{}", accepted.text);
    assert_eq!(accepted.body["continuationToken"], "reviews:pr:acme/checkout#42");

    let reaction = github.wait_for("/repos/acme/checkout/issues/42/reactions").await;
    assert_eq!(reaction.body, json!({"content": "eyes"}));
    let review = github.wait_for("/repos/acme/checkout/pulls/42/reviews").await;
    assert_eq!(review.token.as_deref(), Some("gh-token"));
    assert_eq!(review.body, json!({"body": "The retry keeps the idempotency key. Looks good.", "event": "COMMENT"}));

    // The model saw the pull request.
    let listed = host.state.agents[0].engine.list(ListScope::All).await.unwrap();
    assert_eq!((listed[0].channel.as_str(), listed[0].principal.as_str()), ("reviews", "github"));
    let request = host.provider.requests();
    let first = format!("{:?}", request[0]);
    assert!(first.contains("acme/checkout#42") && first.contains("Retry card authorization"), "{first}");
}

#[tokio::test]
async fn unsigned_mis_signed_replayed_and_filtered_deliveries_start_nothing() {
    let (api, github) = fakes::github().await;
    let host = start(&api).await;
    let url = host.url("/v1/channels/reviews/webhook");
    let body = fixture("pull_request.opened");
    deliver(&host, &url, "pull_request", "d-1", &body, None).await.assert_error(401, "invalid_signature");
    let wrong = github_signature(b"not-the-secret", &body);
    deliver(&host, &url, "pull_request", "d-2", &body, Some(wrong)).await.assert_error(401, "invalid_signature");
    let mut tampered = body.clone();
    tampered.extend_from_slice(b" ");
    let signed_original = github_signature(SECRET.as_bytes(), &body);
    deliver(&host, &url, "pull_request", "d-3", &tampered, Some(signed_original))
        .await
        .assert_error(401, "invalid_signature");

    let sign = |b: &[u8]| Some(github_signature(SECRET.as_bytes(), b));
    let not_json = b"{\"action\":";
    deliver(&host, &url, "pull_request", "d-4", not_json, sign(not_json)).await.assert_error(400, "invalid_request");

    // A draft waits; the bot's own comment and unknown events are ignored (200, said why).
    let mut draft: Value = serde_json::from_slice(&body).unwrap();
    draft["pull_request"]["draft"] = json!(true);
    let draft = serde_json::to_vec(&draft).unwrap();
    let ignored = deliver(&host, &url, "pull_request", "d-5", &draft, sign(&draft)).await;
    assert!(ignored.body["ignored"].as_str().unwrap().contains("draft"), "{}", ignored.text);
    let mut own: Value = serde_json::from_slice(&fixture("issue_comment.created")).unwrap();
    own["comment"]["user"]["login"] = json!("review-bot[bot]");
    let own = serde_json::to_vec(&own).unwrap();
    let ignored = deliver(&host, &url, "issue_comment", "d-6", &own, sign(&own)).await;
    assert!(ignored.body["ignored"].as_str().unwrap().contains("bot's own"), "{}", ignored.text);
    let unknown = deliver(&host, &url, "deployment_status", "d-7", &body, sign(&body)).await;
    assert_eq!(unknown.status.as_u16(), 200);
    assert!(unknown.body["ignored"].as_str().unwrap().contains("deployment_status"), "{}", unknown.text);
    assert_eq!(sessions(&host).await, 0);
    assert!(github.calls().is_empty(), "nothing was posted for refused deliveries");

    // A delivery is handled once.
    let first = deliver(&host, &url, "pull_request", "d-8", &body, sign(&body)).await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    deliver(&host, &url, "pull_request", "d-8", &body, sign(&body)).await.assert_error(409, "duplicate_delivery");
    // A comment by someone else continues the same pull request's session.
    let comment = fixture("issue_comment.created");
    let next = deliver(&host, &url, "issue_comment", "d-9", &comment, sign(&comment)).await;
    assert_eq!((next.status.as_u16(), &next.body["sessionId"]), (202, &first.body["sessionId"]), "{}", next.text);
    assert_eq!(sessions(&host).await, 1);
}

#[tokio::test]
async fn the_fan_out_route_reaches_every_github_channel_from_loopback_only() {
    let (api, github) = fakes::github().await;
    let host = start(&api).await;
    let body = fixture("pull_request.opened");
    let url = format!("{}/v1/webhooks/github", host.origin);
    let signature = Some(github_signature(SECRET.as_bytes(), &body));
    let fanned = deliver(&host, &url, "pull_request", "f-1", &body, signature.clone()).await;
    assert_eq!(fanned.status.as_u16(), 202, "{}", fanned.text);
    let deliveries = fanned.body["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!((&deliveries[0]["channel"], &deliveries[0]["status"]), (&json!("reviews"), &json!(202)));
    github.wait_for("/repos/acme/checkout/pulls/42/reviews").await;
    let proxied = reply(
        host.client
            .post(&url)
            .header("x-forwarded-for", "203.0.113.9")
            .header("x-github-event", "pull_request")
            .body(body.clone())
            .send()
            .await
            .unwrap(),
    )
    .await;
    proxied.assert_error(403, "forbidden");
}

const POST_REVIEW_PY: &str = r#"
import json, os, sys, urllib.request
args = json.load(sys.stdin)["input"]
req = urllib.request.Request(os.environ["BDK_HOST_URL"] + "/github/review",
    data=json.dumps({"body": args["body"], "event": args["event"]}).encode(),
    headers={"authorization": "Bearer " + os.environ["BDK_HOST_TOKEN"], "content-type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(req))))
"#;

#[tokio::test]
async fn a_tool_posts_a_review_on_its_sessions_pull_request_through_host_services() {
    let (api, github) = fakes::github().await;
    let channel = format!(
        "kind = \"github\"\n[github]\nwebhook_secret_env = \"GH_HOOK_SECRET\"\ntoken_env = \"GH_TOKEN\"\n\
         api_url = \"{api}\"\nreply = \"none\"\n"
    );
    let tool = "description = \"Post a review on this pull request.\"\ncommand = [\"python3\", \"lib/post_review.py\"]\n\
                [input_schema]\ntype = \"object\"\nrequired = [\"body\", \"event\"]\n\
                properties = { body = { type = \"string\" }, event = { type = \"string\" } }\n";
    let host = host()
        .script(vec![
            ScriptStep::tool_call(
                "c1",
                "post_review",
                json!({"body": "Approved: retries are idempotent.", "event": "APPROVE"}),
            ),
            ScriptStep::text("Review posted."),
        ])
        .file("bot/channels/reviews.toml", &channel)
        .file("bot/tools/post_review.toml", tool)
        .file("bot/lib/post_review.py", POST_REVIEW_PY)
        .options(|o| {
            o.channel_env = ChannelEnv::table([
                ("GH_HOOK_SECRET".to_owned(), SECRET.to_owned()),
                ("GH_TOKEN".to_owned(), "gh-token".to_owned()),
            ])
        })
        .start()
        .await;
    let body = fixture("pull_request.opened");
    let url = host.url("/v1/channels/reviews/webhook");
    let accepted =
        deliver(&host, &url, "pull_request", "t-1", &body, Some(github_signature(SECRET.as_bytes(), &body))).await;
    assert_eq!(accepted.status.as_u16(), 202, "{}", accepted.text);
    let review = github.wait_for("/repos/acme/checkout/pulls/42/reviews").await;
    assert_eq!(review.body, json!({"body": "Approved: retries are idempotent.", "event": "APPROVE"}));
    assert_eq!(review.token.as_deref(), Some("gh-token"));
    // `reply = "none"`: the final answer is not posted as well.
    assert!(github.calls().iter().all(|c| !c.path.ends_with("/comments")), "{:?}", github.calls());
}
