//! Custom channels on a real listener: the declarative form (templates → send → 202 with the
//! session), schema violations (400 with the failing JSON path, before anything runs), each
//! auth failure, a handler command that answers, continues a session by key and reaches host
//! services, and handlers that crash, hang or print garbage (502/504, no session). Channel
//! sessions are listed with their channel and token, and the token works on the session routes.
//! An extension's channel handler gets the extension's `config`; the root's gets none.

use bdk_engine::ListScope;
use bdk_model::ScriptStep;
use bdk_server::channels::ChannelEnv;
use bdk_server::{AuthPolicy, BearerToken};
use reqwest::Method;
use serde_json::{Value, json};

use super::support::{Host, host, reply};

const TICKETS: &str = r#"
auth = [
  { kind = "bearer", token_env = "TICKETS_TOKEN", principal = "portal" },
  { kind = "local_dev_strict" },
]

[[routes]]
method = "POST"
path = "/ticket/{id}"
send = { message = "Ticket {{params.id}}: {{body.summary}}", continuation_key = "ticket:{{params.id}}", title = "Ticket {{params.id}}" }

[routes.body_schema]
type = "object"
required = ["summary"]
properties = { summary = { type = "string", minLength = 1 }, priority = { type = "integer", minimum = 1 } }
"#;

const ORDERS: &str = r#"
[[routes]]
method = "POST"
path = "/order"
headers = ["X-Request-Id"]
handler = ["python3", "lib/order.py"]

# Only the hang test comes here: the short timeout must not also bound interpreter start-up on
# a loaded machine for the routes that are expected to answer.
[[routes]]
method = "POST"
path = "/hang"
handler = ["python3", "lib/order.py"]
timeout = "2s"

[[routes]]
method = "GET"
path = "/status"
handler = ["python3", "lib/order.py"]
query_schema = { type = "object", properties = { n = { type = "integer", maximum = 10 } } }
"#;

const ORDER_PY: &str = r#"
import json, os, sys, time, urllib.request
request = json.load(sys.stdin)["input"]
body = request.get("body") or {}
if request["method"] == "GET":
    print(json.dumps({"body": {"n": request["query"].get("n")}}))
elif body.get("crash"):
    print("it broke", file=sys.stderr); sys.exit(3)
elif body.get("hang"):
    time.sleep(30)
elif body.get("garbage"):
    print("<html>not json</html>")
elif body.get("via_host"):
    req = urllib.request.Request(os.environ["BDK_HOST_URL"] + "/send",
        data=json.dumps({"channel": "orders", "message": "from the host", "continuationKey": "host:1"}).encode(),
        headers={"authorization": "Bearer " + os.environ["BDK_HOST_TOKEN"], "content-type": "application/json"})
    sent = json.load(urllib.request.urlopen(req))
    print(json.dumps({"status": 201, "body": {"forwarded": sent["sessionId"]}}))
else:
    print(json.dumps({
        "status": 202,
        "headers": {"x-handled": "yes"},
        "seenRequestId": request["headers"].get("x-request-id"),
        "send": {"message": "Order " + str(body.get("id")), "continuation_key": "order:" + str(body.get("id")), "title": "Order"},
    }))
"#;

async fn start() -> Host {
    host()
        .script((0..8).map(|i| ScriptStep::text(format!("ack {i}"))).collect())
        .file("bot/channels/tickets.toml", TICKETS)
        .file("bot/channels/orders.toml", ORDERS)
        .file("bot/lib/order.py", ORDER_PY)
        .options(|o| {
            o.channel_env = ChannelEnv::table([("TICKETS_TOKEN".to_owned(), "portal-secret".to_owned())]);
            // The session API knows the portal too, and lets anyone else in as `anonymous`.
            o.auth = AuthPolicy::from_flags(vec![BearerToken::named("portal", "portal-secret")], true);
        })
        .start()
        .await
}

/// The index of the last `message.received` of `id`.
async fn follow_index(host: &Host, id: &str) -> u64 {
    host.events(id).await.iter().rev().find(|e| e.event_type() == "message.received").map(|e| e.index).unwrap()
}

async fn session_count(host: &Host) -> usize {
    host.state.agents[0].engine.list(ListScope::All).await.unwrap().len()
}

#[tokio::test]
async fn the_declarative_form_sends_and_answers_202_with_the_session() {
    let host = start().await;
    let portal = host.as_token(Some("portal-secret"));
    let first = portal.post("/v1/channels/tickets/ticket/42", &json!({"summary": "Card declined"})).await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    assert_eq!(first.body["continuationToken"], "tickets:ticket:42");
    assert_eq!(first.body["created"], true);
    let again = portal.post("/v1/channels/tickets/ticket/42", &json!({"summary": "Still declined"})).await;
    assert_eq!((again.status.as_u16(), &again.body["created"]), (202, &json!(false)), "{}", again.text);
    assert_eq!(again.body["sessionId"], first.body["sessionId"]);

    // The session is the portal's, listed with its channel and token.
    let list = portal.get("/v1/sessions").await;
    let sessions = list.body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{}", list.text);
    assert_eq!(
        (&sessions[0]["channel"], &sessions[0]["continuationToken"]),
        (&json!("tickets"), &json!("tickets:ticket:42"))
    );
    assert_eq!(sessions[0]["title"], "Ticket 42");

    // The channel token works on the session routes: by id with the token, and in the path.
    let id = first.body["sessionId"].as_str().unwrap();
    let id_path = format!("/v1/session/{id}/events");
    let events = portal.wait_for(id, "session.waiting", None).await;
    assert!(events.index > 0);
    let follow = portal.follow_up(id, "tickets:ticket:42", "Any update?").await;
    assert_eq!(follow.status.as_u16(), 200, "{}", follow.text);
    assert_eq!(follow.body["continuationToken"], "tickets:ticket:42");
    // (Once the follow-up's turn is over, so both reads see the same log.)
    portal.wait_for(id, "session.waiting", Some(follow_index(&portal, id).await)).await;
    let by_token = portal.get("/v1/session/tickets:ticket:42/events").await;
    assert_eq!(by_token.status.as_u16(), 200, "{}", by_token.text);
    assert_eq!(by_token.text, portal.get(&id_path).await.text);
    // Another caller may not.
    host.get("/v1/session/tickets:ticket:42/events").await.assert_error(403, "forbidden");
}

#[tokio::test]
async fn bad_bodies_and_every_auth_failure_are_refused_before_anything_runs() {
    let host = start().await;
    let portal = host.as_token(Some("portal-secret"));
    let path = "/v1/channels/tickets/ticket/7";
    let schema = portal.post(path, &json!({"summary": "", "priority": 0})).await;
    schema.assert_error(400, "invalid_body");
    let errors: Vec<&str> = schema.body["errors"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(errors.iter().any(|e| e.starts_with("/summary")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("/priority")), "{errors:?}");
    portal.post(path, &json!({"priority": 2})).await.assert_error(400, "invalid_body");
    let not_json = reply(portal.request(Method::POST, path).body("{\"summary\":").send().await.unwrap()).await;
    not_json.assert_error(400, "invalid_request");
    let big = "x".repeat(2 * 1024 * 1024);
    let too_big = reply(portal.request(Method::POST, path).body(big).send().await.unwrap()).await;
    assert_eq!(too_big.status.as_u16(), 413, "{}", too_big.text);

    // The chain admits direct loopback callers after the bearer policy, so the failures are
    // seen through a proxy header (the caller is then not direct).
    let proxied = |token: Option<&str>| {
        let mut request =
            host.client.post(host.url(path)).header("x-forwarded-for", "203.0.113.9").json(&json!({"summary": "x"}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request
    };
    let missing = reply(proxied(None).send().await.unwrap()).await;
    missing.assert_error(401, "unauthorized");
    assert_eq!(missing.headers.get("www-authenticate").map(|v| v.to_str().unwrap()), Some("Bearer"));
    reply(proxied(Some("wrong")).send().await.unwrap()).await.assert_error(401, "unauthorized");
    let good = reply(proxied(Some("portal-secret")).send().await.unwrap()).await;
    assert_eq!(good.status.as_u16(), 202, "{}", good.text);

    // Unknown channels, routes and methods.
    portal.post("/v1/channels/nope/x", &json!({})).await.assert_error(404, "channel_not_found");
    portal.post("/v1/channels/tickets/other", &json!({})).await.assert_error(404, "route_not_found");
    portal.get(path).await.assert_error(405, "method_not_allowed");
    assert_eq!(session_count(&host).await, 1, "only the admitted request started a session");
}

#[tokio::test]
async fn a_handler_answers_continues_a_session_and_reaches_host_services() {
    let host = start().await;
    let send = |body: Value| {
        host.client.post(host.url("/v1/channels/orders/order")).header("x-request-id", "req-1").json(&body).send()
    };
    let first = reply(send(json!({"id": 9})).await.unwrap()).await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    assert_eq!(first.headers.get("x-handled").map(|v| v.to_str().unwrap()), Some("yes"));
    assert_eq!(first.body["seenRequestId"], "req-1");
    assert_eq!((&first.body["continuationToken"], &first.body["created"]), (&json!("orders:order:9"), &json!(true)));
    let second = reply(send(json!({"id": 9})).await.unwrap()).await;
    assert_eq!((&second.body["sessionId"], &second.body["created"]), (&first.body["sessionId"], &json!(false)));

    let via_host = reply(send(json!({"via_host": true})).await.unwrap()).await;
    assert_eq!(via_host.status.as_u16(), 201, "{}", via_host.text);
    let forwarded = via_host.body["forwarded"].as_str().unwrap().to_owned();
    let sessions = host.get("/v1/sessions").await.body["sessions"].as_array().unwrap().clone();
    let listed = sessions.iter().find(|s| s["sessionId"] == forwarded.as_str()).unwrap();
    assert_eq!((&listed["channel"], &listed["principal"]), (&json!("orders"), &json!("anonymous")));

    let query = host.get("/v1/channels/orders/status?n=3").await;
    assert_eq!(query.body, json!({"n": 3}), "{}", query.text);
    host.get("/v1/channels/orders/status?n=11").await.assert_error(400, "invalid_query");
    host.get("/v1/channels/orders/status?n=x").await.assert_error(400, "invalid_query");
}

#[tokio::test]
async fn handlers_that_crash_hang_or_print_garbage_start_nothing() {
    let host = start().await;
    let path = "/v1/channels/orders/order";
    let crashed = host.post(path, &json!({"crash": true})).await;
    crashed.assert_error(502, "handler_failed");
    assert!(crashed.body["message"].as_str().unwrap().contains("it broke"), "{}", crashed.text);
    host.post(path, &json!({"garbage": true})).await.assert_error(502, "handler_invalid_output");
    host.post("/v1/channels/orders/hang", &json!({"hang": true})).await.assert_error(504, "handler_timeout");
    assert_eq!(session_count(&host).await, 0);
}

#[tokio::test]
async fn a_webhook_channel_admits_only_bodies_signed_with_its_secret() {
    use bdk_server::channels::signature::{Algorithm, hmac_hex};
    let channel = r#"
kind = "webhook"

[webhook]
secret_env = "HOOK_SECRET"
signature_header = "X-Hook-Signature"
algorithm = "sha512"

[[routes]]
method = "POST"
path = "/"
send = { message = "Build {{body.build}} {{body.status}}", continuation_key = "build:{{body.build}}" }
"#;
    let host = host()
        .script(vec![ScriptStep::text("noted")])
        .file("bot/channels/ci.toml", channel)
        .options(|o| o.channel_env = ChannelEnv::table([("HOOK_SECRET".to_owned(), "hook-secret".to_owned())]))
        .start()
        .await;
    let body = br#"{"build": 77, "status": "failed"}"#.to_vec();
    let post = |signature: Option<String>, body: Vec<u8>| {
        let mut request =
            host.client.post(host.url("/v1/channels/ci")).body(body).header("x-forwarded-for", "203.0.113.9");
        if let Some(signature) = signature {
            request = request.header("x-hook-signature", signature);
        }
        request.send()
    };
    let sign = |secret: &[u8], body: &[u8]| format!("sha512={}", hmac_hex(Algorithm::Sha512, secret, &[body]));
    reply(post(None, body.clone()).await.unwrap()).await.assert_error(401, "invalid_signature");
    reply(post(Some(sign(b"other", &body)), body.clone()).await.unwrap()).await.assert_error(401, "invalid_signature");
    let sha256 = format!("sha256={}", hmac_hex(Algorithm::Sha256, b"hook-secret", &[&body]));
    reply(post(Some(sha256), body.clone()).await.unwrap()).await.assert_error(401, "invalid_signature");
    assert_eq!(session_count(&host).await, 0);
    // Signed, it is admitted even through a proxy: the signature is the credential.
    let accepted = reply(post(Some(sign(b"hook-secret", &body)), body.clone()).await.unwrap()).await;
    assert_eq!(accepted.status.as_u16(), 202, "{}", accepted.text);
    assert_eq!(accepted.body["continuationToken"], "ci:build:77");
    let listed = host.state.agents[0].engine.list(ListScope::All).await.unwrap();
    assert_eq!(listed[0].principal, "webhook:ci");
}

const WHOAMI: &str = r#"
[[routes]]
method = "GET"
path = "/whoami"
handler = ["python3", "lib/whoami.py"]
"#;

const WHOAMI_PY: &str = r#"
import json, os, sys
context = json.load(sys.stdin)["context"]
print(json.dumps({"body": {
    "ns": os.environ.get("BDK_EXTENSION"),
    "env": json.loads(os.environ.get("BDK_EXTENSION_CONFIG", "null")),
    "context": context.get("extension"),
}}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extensions_channel_handler_gets_its_config() {
    let host = host()
        .file("bot/extensions/ci/extension.toml", "[config]\norg = \"acme\"\n")
        .file("bot/extensions/ci/channels/probe.toml", WHOAMI)
        .file("bot/extensions/ci/lib/whoami.py", WHOAMI_PY)
        .file("bot/channels/probe.toml", WHOAMI)
        .file("bot/lib/whoami.py", WHOAMI_PY)
        .options(|o| o.auth = AuthPolicy::from_flags(Vec::new(), true))
        .start()
        .await;
    let config = json!({"org": "acme"});
    let extension = host.get("/v1/channels/ci__probe/whoami").await;
    assert_eq!(extension.status.as_u16(), 200, "{}", extension.text);
    assert_eq!(extension.body, json!({"ns": "ci", "env": config, "context": {"namespace": "ci", "config": config}}));
    let root = host.get("/v1/channels/probe/whoami").await;
    assert_eq!(root.status.as_u16(), 200, "{}", root.text);
    assert_eq!(root.body, json!({"ns": null, "env": null, "context": null}));
}
