//! `TCP_NODELAY` on accepted connections: on a kept-alive connection (what browsers, SDKs and
//! load balancers use), reading a session's stream right after its POST must not wait for the
//! client's delayed ACK. With Nagle's algorithm on, every small NDJSON write after the first
//! waits ~40 ms for that ACK; with it off the whole turn arrives in a few milliseconds.
//!
//! Two checks. The server's end of the connection has `TCP_NODELAY` set: the test finds that
//! socket among this process's descriptors (the host runs in-process), takes a duplicate with
//! `pidfd_getfd` and asks the kernel. And the effect: the client is a plain socket speaking
//! HTTP/1.1, so the connection is reused exactly as a keep-alive client would reuse it, and a
//! stream read must come in under the delayed-ACK floor (40 ms) at least once in several tries.
//! A stall always costs at least that floor, so a loaded machine can only make a try slower, never
//! make a stalled one look fast; the tries stop at the first fast one.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use bdk_model::ScriptStep;

use super::support::{filesystem_only, host, within};

/// Linux's shortest delayed ACK (`TCP_DELACK_MIN`): a read that waited for one takes longer.
const BOUND: Duration = Duration::from_millis(40);
const TRIES: usize = 10;
/// The model takes a moment, so the turn's events reach the stream live, after the replay.
const MODEL_DELAY: Duration = Duration::from_millis(3);

/// One HTTP/1.1 connection, kept alive across requests.
struct Connection {
    socket: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(addr: SocketAddr) -> Connection {
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

    /// Whether the server's end of this connection has `TCP_NODELAY` set; `None` where the
    /// kernel refuses to duplicate a descriptor (`pidfd_getfd` blocked by a seccomp profile).
    fn server_nodelay(&self) -> Option<bool> {
        let server = self.socket.peer_addr().unwrap();
        let client = self.socket.local_addr().unwrap();
        let pidfd = match rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(error) => return unavailable(error),
        };
        let mut refused = None;
        for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
            let is_socket = std::fs::read_link(entry.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
            let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else { continue };
            if !is_socket {
                continue;
            }
            // A descriptor may be closed (or reused) meanwhile: the addresses decide.
            let duplicate = match rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty()) {
                Ok(duplicate) => std::net::TcpStream::from(duplicate),
                Err(error) => {
                    refused = Some(error);
                    continue;
                }
            };
            if duplicate.local_addr().ok() == Some(server) && duplicate.peer_addr().ok() == Some(client) {
                return Some(duplicate.nodelay().unwrap());
            }
        }
        match refused {
            Some(error) => unavailable(error),
            None => panic!("no socket in this process is the server's end of {client} -> {server}"),
        }
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

fn unavailable(error: rustix::io::Errno) -> Option<bool> {
    eprintln!("cannot look at the server's socket ({error}); only the timing is checked");
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_read_after_a_post_on_a_kept_alive_connection_is_not_delayed() {
    // The bound is a socket's; on PostgreSQL it would time the turn's durable commits instead.
    if filesystem_only(
        "a_stream_read_after_a_post_on_a_kept_alive_connection_is_not_delayed",
        "a 40 ms bound on a whole turn, which debug-build PostgreSQL commits exceed",
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
        if all.is_empty() {
            assert_ne!(conn.server_nodelay(), Some(false), "TCP_NODELAY is off on the accepted socket");
        }

        let started = Instant::now();
        conn.send("GET", &format!("{base}/v1/session/{id}/stream?startIndex=0"), "").await;
        let read = conn.read_until(br#""type":"session.waiting""#).await;
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&read);
        assert!(text.contains(r#""type":"turn.completed""#), "{text}");
        all.push(took);
        fastest = fastest.min(took);
        if fastest < BOUND {
            break;
        }
    }
    assert!(fastest < BOUND, "reading the stream took at least {fastest:?} every time ({all:?}); TCP_NODELAY off?");
    host.shutdown().await;
}
