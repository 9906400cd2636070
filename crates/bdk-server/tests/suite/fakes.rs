//! Fake GitHub and Slack APIs on `127.0.0.1:0` that answer in the real wire format and record
//! every call (method path, bearer token, JSON body), so a test can wait for the call it expects.
//! The Slack fake also serves Socket Mode: `apps.connections.open` hands out a websocket URL on
//! which the test pushes envelopes and reads the acknowledgements.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;

use super::support::within;

/// One recorded API call.
#[derive(Debug, Clone)]
pub struct Call {
    pub path: String,
    pub token: Option<String>,
    pub body: Value,
}

#[derive(Default)]
pub struct Record {
    calls: Mutex<Vec<Call>>,
    changed: Notify,
}

impl Record {
    fn push(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
        self.changed.notify_waiters();
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// Waits until a call to `path` has been recorded, and returns it.
    pub async fn wait_for(&self, path: &str) -> Call {
        within(&format!("a call to {path}"), async {
            loop {
                let notified = self.changed.notified();
                if let Some(call) = self.calls().into_iter().find(|c| c.path == path) {
                    return call;
                }
                notified.await;
            }
        })
        .await
    }
}

fn token(headers: &HeaderMap) -> Option<String> {
    headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ").map(str::to_owned)
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// A GitHub REST API: every POST is recorded and answered `201` with an id and URL.
pub async fn github() -> (String, Arc<Record>) {
    let record = Arc::new(Record::default());
    async fn any_post(
        State(record): State<Arc<Record>>,
        Path(path): Path<String>,
        headers: HeaderMap,
        body: String,
    ) -> (axum::http::StatusCode, axum::Json<Value>) {
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        record.push(Call { path: format!("/{path}"), token: token(&headers), body });
        (
            axum::http::StatusCode::CREATED,
            axum::Json(json!({"id": 1, "html_url": "https://github.com/acme/checkout/pull/42#x"})),
        )
    }
    let router = Router::new().route("/{*path}", post(any_post)).with_state(record.clone());
    (serve(router).await, record)
}

/// A Slack Web API under `<url>/api`, plus Socket Mode.
pub struct SlackFake {
    pub api: String,
    pub record: Arc<Record>,
    /// Envelopes to push to the connected socket.
    pub push: mpsc::UnboundedSender<Value>,
    /// Acknowledgements read from the socket.
    pub acks: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>>,
}

pub async fn slack() -> SlackFake {
    let record = Arc::new(Record::default());
    let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_url = format!("ws://{}/socket", ws.local_addr().unwrap());
    let (push, mut pushed) = mpsc::unbounded_channel::<Value>();
    let (ack_tx, acks) = mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let Ok((stream, _)) = ws.accept().await else { return };
        let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
        socket.send(Message::Text(json!({"type": "hello", "num_connections": 1}).to_string().into())).await.unwrap();
        loop {
            tokio::select! {
                envelope = pushed.recv() => {
                    let Some(envelope) = envelope else { return };
                    socket.send(Message::Text(envelope.to_string().into())).await.unwrap();
                }
                message = socket.next() => {
                    match message {
                        Some(Ok(Message::Text(text))) => { let _ = ack_tx.send(serde_json::from_str(&text).unwrap_or(Value::Null)); }
                        Some(Ok(_)) => {}
                        _ => return,
                    }
                }
            }
        }
    });
    #[derive(Clone)]
    struct S {
        record: Arc<Record>,
        ws_url: String,
        next_ts: Arc<Mutex<u64>>,
    }
    async fn method(
        State(s): State<S>,
        Path(method): Path<String>,
        headers: HeaderMap,
        body: String,
    ) -> axum::Json<Value> {
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        s.record.push(Call { path: method.clone(), token: token(&headers), body: body.clone() });
        let answer = match method.as_str() {
            "apps.connections.open" => json!({"ok": true, "url": s.ws_url}),
            "chat.postMessage" => {
                let mut ts = s.next_ts.lock().unwrap();
                *ts += 1;
                json!({"ok": true, "channel": body["channel"], "ts": format!("1715000100.{:06}", *ts), "message": {"text": body["text"]}})
            }
            "chat.update" | "chat.delete" => json!({"ok": true, "channel": body["channel"], "ts": body["ts"]}),
            _ => json!({"ok": false, "error": "unknown_method"}),
        };
        axum::Json(answer)
    }
    let state = S { record: record.clone(), ws_url, next_ts: Arc::new(Mutex::new(0)) };
    let router = Router::new().route("/api/{method}", post(method)).with_state(state);
    let base = serve(router).await;
    SlackFake { api: format!("{base}/api"), record, push, acks: Arc::new(tokio::sync::Mutex::new(acks)) }
}
