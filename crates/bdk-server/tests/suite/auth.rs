//! The auth chain over a real socket: bearer tokens (401 without one), loopback-only default
//! (401 with any proxy header, or from a remote peer), ownership (403 for another principal on
//! follow-up, stream, events, stop and cost), owner-scoped listings, and the routes that run no
//! auth.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::Request;
use bdk_server::{AuthPolicy, BearerToken, auth::PROXY_HEADERS};
use serde_json::json;
use tower::ServiceExt as _;

use super::support::host;

fn bearer(anonymous: bool) -> AuthPolicy {
    AuthPolicy::from_flags(
        vec![BearerToken::parse("alice=alice-secret").unwrap(), BearerToken::parse("bob=bob-secret").unwrap()],
        anonymous,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_mode_refuses_requests_without_a_valid_token() {
    let host = host().options(|o| o.auth = bearer(false)).token("alice-secret").start().await;
    let nobody = host.as_token(None);
    for (method, path) in [("POST", "/v1/session"), ("GET", "/v1/sessions"), ("GET", "/v1/info"), ("GET", "/v1/logs")] {
        let reply =
            if method == "POST" { nobody.post(path, &json!({"message": "hi"})).await } else { nobody.get(path).await };
        reply.assert_error(401, "unauthorized");
        assert_eq!(reply.headers["www-authenticate"], "Bearer", "{path}");
    }
    host.as_token(Some("wrong")).post("/v1/session", &json!({"message": "hi"})).await.assert_error(401, "unauthorized");
    assert_eq!(host.post("/v1/session", &json!({"message": "hi"})).await.status, 200);

    // No auth on health and meta, nor on the host routes.
    assert_eq!(nobody.get("/v1/health").await.status, 200);
    let meta = nobody.get("/v1/meta").await;
    assert_eq!(meta.status, 200);
    assert_eq!(meta.body["auth"], json!("bearer"));
    for path in ["/", "/v1/agents", "/v1/health"] {
        let response = host.client.get(format!("{}{path}", host.origin)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_session_is_403_everywhere() {
    let host = host().options(|o| o.auth = bearer(false)).token("alice-secret").start().await;
    let started = host.start_session("alice's").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;

    let bob = host.as_token(Some("bob-secret"));
    bob.follow_up(&id, &started.continuation_token, "hijack").await.assert_error(403, "forbidden");
    bob.get(&format!("/v1/session/{id}/stream")).await.assert_error(403, "forbidden");
    bob.get(&format!("/v1/session/{id}/events")).await.assert_error(403, "forbidden");
    bob.get(&format!("/v1/session/{id}/cost")).await.assert_error(403, "forbidden");
    bob.post(&format!("/v1/session/{id}/stop"), &json!({})).await.assert_error(403, "forbidden");

    // Listings are owner-scoped under bearer auth.
    let theirs = bob.get("/v1/sessions").await;
    assert_eq!(theirs.body["sessions"], json!([]));
    let mine = host.get("/v1/sessions").await;
    assert_eq!(mine.body["sessions"].as_array().unwrap().len(), 1);

    // The owner still can.
    assert_eq!(host.get(&format!("/v1/session/{id}/cost")).await.status, 200);
    assert_eq!(host.follow_up(&id, &started.continuation_token, "mine").await.status, 200);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_access_lists_every_principal() {
    let host = host().options(|o| o.auth = bearer(true)).token("alice-secret").start().await;
    host.start_session("alice's").await;
    let anonymous = host.as_token(None);
    anonymous.start_session("anonymous").await;
    let list = anonymous.get("/v1/sessions").await;
    let principals: Vec<_> =
        list.body["sessions"].as_array().unwrap().iter().map(|s| s["principal"].as_str().unwrap().to_owned()).collect();
    assert_eq!(principals.len(), 2, "{principals:?}");
    assert!(principals.contains(&"alice".to_owned()) && principals.contains(&"anonymous".to_owned()));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_auth_refuses_every_proxy_header() {
    let host = host().start().await;
    assert_eq!(host.get("/v1/sessions").await.status, 200);
    for name in PROXY_HEADERS {
        let response =
            host.request(reqwest::Method::GET, "/v1/sessions").header(name, "203.0.113.9").send().await.unwrap();
        let reply = super::support::reply(response).await;
        reply.assert_error(401, "unauthorized");
        assert!(reply.body["message"].as_str().unwrap().contains("proxy"), "{}", reply.text);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_auth_refuses_remote_peers() {
    let host = host().start().await;
    let remote: SocketAddr = "192.0.2.10:4000".parse().unwrap();
    let app = bdk_server::app(host.state.clone()).layer(MockConnectInfo(remote));
    let response = app.clone().oneshot(Request::get("/hello/v1/sessions").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), 401);
    // Health runs no auth, whoever calls.
    let health = app.oneshot(Request::get("/hello/v1/health").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(health.status(), 200);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_on_loopback_lists_every_principal() {
    let host = host()
        .options(|o| {
            o.auth = bearer(false);
            o.dev = true;
        })
        .token("alice-secret")
        .start()
        .await;
    host.start_session("alice's").await;
    host.as_token(Some("bob-secret")).start_session("bob's").await;
    let list = host.get("/v1/sessions").await;
    assert_eq!(list.body["sessions"].as_array().unwrap().len(), 2, "{}", list.text);
    host.shutdown().await;
}
