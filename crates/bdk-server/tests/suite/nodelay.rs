//! `TCP_NODELAY` on accepted connections: on a kept-alive connection (what browsers, SDKs and
//! load balancers use), reading a session's stream right after its POST must not wait for the
//! client's delayed ACK. With Nagle's algorithm on, every small NDJSON write after the first
//! waits ~40 ms for that ACK; with it off the whole turn arrives in a few milliseconds.
//!
//! The client is a plain socket speaking HTTP/1.1, so the connection is reused exactly as a
//! keep-alive client would reuse it. The bound (20 ms) is half the delayed-ACK floor, and the
//! fastest of several tries is compared with it, so a loaded machine does not make it flaky.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use bdk_model::ScriptStep;

use super::support::{filesystem_only, host, within};

/// Far below the ~40 ms a delayed ACK costs.
const BOUND: Duration = Duration::from_millis(20);
const TRIES: usize = 5;
/// The model takes a moment, so the turn's events reach the stream live, after the replay.
const MODEL_DELAY: Duration = Duration::from_millis(3);

/// One HTTP/1.1 connection, kept alive across requests.
struct Connection {
    socket: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(addr: std::net::SocketAddr) -> Connection {
        let socket = within("a connection", TcpStream::connect(addr)).await.unwrap();
        // The client side sends no small writes after the first, but keep it out of the picture.
        socket.set_nodelay(true).unwrap();
        Connection { socket, buffer: Vec::new() }
    }

    async fn send(&mut self, method: &str, path: &str, body: &str) {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        within("a request to be sent", self.socket.write_all(request.as_bytes())).await.unwrap();
    }

    /// Reads until `needle` has arrived; returns everything read so far and clears it.
    async fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        within("bytes from the server", async {
            loop {
                if let Some(at) = find(&self.buffer, needle) {
                    return self.buffer.drain(..at + needle.len()).collect();
                }
                let mut chunk = [0u8; 8192];
                let n = self.socket.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the server closed the connection: {}", String::from_utf8_lossy(&self.buffer));
                self.buffer.extend_from_slice(&chunk[..n]);
            }
        })
        .await
    }

    /// Reads one response with a `Content-Length` body; returns the body.
    async fn response(&mut self) -> String {
        let head = self.read_until(b"\r\n\r\n").await;
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("no content-length in {head}"));
        within("a response body", async {
            while self.buffer.len() < length {
                let mut chunk = [0u8; 8192];
                let n = self.socket.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the server closed the connection");
                self.buffer.extend_from_slice(&chunk[..n]);
            }
        })
        .await;
        String::from_utf8(self.buffer.drain(..length).collect()).unwrap()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_read_after_a_post_on_a_kept_alive_connection_is_not_delayed() {
    // The bound is a socket's; on PostgreSQL it would time the turn's durable commits instead.
    if filesystem_only(
        "a_stream_read_after_a_post_on_a_kept_alive_connection_is_not_delayed",
        "a 20 ms bound on a whole turn",
    ) {
        return;
    }
    let steps = (0..TRIES).map(|_| ScriptStep::text("hi").with_delay(MODEL_DELAY)).collect();
    let host = host().script(steps).start().await;
    let base = host.base.trim_start_matches(&host.origin).to_owned();
    let mut fastest = Duration::MAX;
    let mut all = Vec::new();
    for _ in 0..TRIES {
        let mut conn = Connection::open(host.addr).await;
        // A few exchanges first: the connection is now a kept-alive one, past the quick-ACK
        // phase a fresh connection starts in.
        for _ in 0..3 {
            conn.send("GET", &format!("{base}/v1/health"), "").await;
            conn.response().await;
        }
        conn.send("POST", &format!("{base}/v1/session"), r#"{"message":"hello"}"#).await;
        let created: serde_json::Value = serde_json::from_str(&conn.response().await).unwrap();
        let id = created["sessionId"].as_str().unwrap().to_owned();

        let started = Instant::now();
        conn.send("GET", &format!("{base}/v1/session/{id}/stream?startIndex=0"), "").await;
        let read = conn.read_until(br#""type":"session.waiting""#).await;
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&read);
        assert!(text.contains(r#""type":"turn.completed""#), "{text}");
        all.push(took);
        fastest = fastest.min(took);
    }
    assert!(fastest < BOUND, "reading the stream took at least {fastest:?} every time ({all:?}); TCP_NODELAY off?");
    host.shutdown().await;
}
