//! Error answers: every one is `{ok:false, error, message}` with the reference's status: 404
//! for unknown sessions and routes, 409 for a stale token, 400 for malformed JSON, bad shapes and
//! bad queries, 413 for oversized bodies, 405 for a wrong method.

use serde_json::json;

use super::support::{host, reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_are_404_on_every_session_route() {
    let host = host().start().await;
    let unknown = bdk_protocol::SessionId::generate().to_string();
    for id in [unknown.as_str(), "not-a-session-id", "ses_..%2F..%2Fetc"] {
        host.follow_up(id, "http:whatever", "hi").await.assert_error(404, "session_not_found");
        host.get(&format!("/v1/session/{id}/stream")).await.assert_error(404, "session_not_found");
        host.get(&format!("/v1/session/{id}/events")).await.assert_error(404, "session_not_found");
        host.get(&format!("/v1/session/{id}/cost")).await.assert_error(404, "session_not_found");
        host.post(&format!("/v1/session/{id}/stop"), &json!({})).await.assert_error(404, "session_not_found");
    }
    host.get("/v1/nothing-here").await.assert_error(404, "not_found");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_400_with_a_clear_message() {
    let host = host().start().await;
    let send = |body: &'static str| {
        host.request(reqwest::Method::POST, "/v1/session").header("content-type", "application/json").body(body).send()
    };
    let broken = reply(send("{\"message\": \"hi\"").await.unwrap()).await;
    broken.assert_error(400, "invalid_request");
    assert!(broken.body["message"].as_str().unwrap().contains("not valid JSON"), "{}", broken.text);

    let wrong_shape = reply(send("{\"mesage\": \"hi\"}").await.unwrap()).await;
    wrong_shape.assert_error(400, "invalid_request");
    assert!(wrong_shape.body["message"].as_str().unwrap().contains("message"), "{}", wrong_shape.text);

    reply(send("").await.unwrap()).await.assert_error(400, "invalid_request");
    reply(send("[1, 2]").await.unwrap()).await.assert_error(400, "invalid_request");
    host.post("/v1/session", &json!({"message": "   "})).await.assert_error(400, "invalid_request");

    // No content type at all still parses: `curl -d` works as typed.
    let bare = host.request(reqwest::Method::POST, "/v1/session").body("{\"message\":\"hi\"}").send().await.unwrap();
    assert_eq!(bare.status(), 200);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_bodies_and_queries_are_checked() {
    let host = host().start().await;
    let started = host.start_session("hi").await;
    let id = started.session_id.to_string();
    host.wait_for(&id, "session.waiting", None).await;
    host.post(&format!("/v1/session/{id}"), &json!({"message": "no token"})).await.assert_error(400, "invalid_request");
    host.post(&format!("/v1/session/{id}"), &json!({"continuationToken": "", "message": "x"}))
        .await
        .assert_error(400, "invalid_request");
    host.post(
        &format!("/v1/session/{id}"),
        &json!({"continuationToken": started.continuation_token, "message": "x", "admission": "later"}),
    )
    .await
    .assert_error(400, "invalid_request");
    host.follow_up(&id, "http:not-the-token", "x").await.assert_error(409, "stale_continuation_token");
    host.get(&format!("/v1/session/{id}/stream?startIndex=minus-one")).await.assert_error(400, "invalid_request");
    host.get(&format!("/v1/session/{id}/events?startIndex=-1")).await.assert_error(400, "invalid_request");
    host.get("/v1/logs?after=x").await.assert_error(400, "invalid_request");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413() {
    let host = host().options(|o| o.body_limit = 16 * 1024).start().await;
    let big = json!({"message": "x".repeat(20 * 1024)});
    let reply = host.post("/v1/session", &big).await;
    reply.assert_error(413, "payload_too_large");
    assert!(reply.body["message"].as_str().unwrap().contains("16384"), "{}", reply.text);
    // Just under the limit is fine.
    let fits = json!({"message": "x".repeat(15 * 1024)});
    assert_eq!(host.post("/v1/session", &fits).await.status, 200);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_are_405_in_the_error_shape() {
    let host = host().start().await;
    let response = host.request(reqwest::Method::GET, "/v1/session").send().await.unwrap();
    reply(response).await.assert_error(405, "method_not_allowed");
    let response = host.request(reqwest::Method::DELETE, "/v1/info").send().await.unwrap();
    reply(response).await.assert_error(405, "method_not_allowed");
    host.shutdown().await;
}
