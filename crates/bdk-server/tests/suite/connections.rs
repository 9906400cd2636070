//! Connection limits (docs/http.md#limits): idle connections past the cap do not stop
//! `/v1/health` from answering, and the excess is closed; an idle connection is closed after
//! the head-read timeout; a `Content-Length` over the body limit gets 413 before any body byte
//! is sent; a body that stalls is cut off after the body timeout.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::support::*;

/// Reads until the peer closes (`true`) or `wait` passes (`false`); data read is discarded.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(wait, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Sends raw bytes on a new connection and returns the response head, or what came back
/// before the server closed it; `None` when neither happened within `wait`.
async fn raw(addr: std::net::SocketAddr, request: &[u8], wait: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let done = tokio::time::timeout(wait, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.windows(4).any(|w| w == b"\r\n\r\n") {
                        return;
                    }
                }
            }
        }
    })
    .await;
    done.ok().map(|()| String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn idle_connections_past_the_cap_leave_health_answering() {
    let host = host()
        .options(|o| {
            o.connections.max_connections = 8;
            o.connections.reserved = 2;
            o.connections.header_timeout = Duration::from_secs(60);
        })
        .start()
        .await;
    // Fill the cap with idle connections, then some more.
    let mut idle = Vec::new();
    for _ in 0..30 {
        idle.push(TcpStream::connect(host.addr).await.unwrap());
    }
    // Health still answers, on a fresh connection each time.
    for _ in 0..3 {
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).timeout(WAIT).build().unwrap();
        let response = within("health", client.get(format!("{}/v1/health", host.origin)).send()).await.unwrap();
        assert_eq!(response.status(), 200);
    }
    // The connections past the cap and the reserved slots were closed by the server. Sweep the
    // still-open ones until enough have closed: a loaded machine may close them late.
    let want = 30 - 8 - 2;
    let mut open: Vec<&mut TcpStream> = idle.iter_mut().collect();
    let mut closed = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while closed < want && tokio::time::Instant::now() < deadline {
        let mut still_open = Vec::new();
        for stream in open {
            if closed_within(stream, Duration::from_millis(20)).await {
                closed += 1;
            } else {
                still_open.push(stream);
            }
        }
        open = still_open;
    }
    assert!(closed >= want, "only {closed} of 30 idle connections were closed");
    host.shutdown().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_header_timeout() {
    let host = host().options(|o| o.connections.header_timeout = Duration::from_millis(300)).start().await;
    let mut stream = TcpStream::connect(host.addr).await.unwrap();
    assert!(closed_within(&mut stream, WAIT).await, "the idle connection stayed open");
    // A half-sent head is cut off the same way.
    let mut stream = TcpStream::connect(host.addr).await.unwrap();
    stream.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert!(closed_within(&mut stream, WAIT).await, "the slow head kept the connection");
    host.shutdown().await;
}

#[tokio::test]
async fn an_oversized_content_length_gets_413_before_the_body() {
    let host = host().start().await;
    let head = format!(
        "POST /hello/v1/session HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n",
        host.addr
    );
    let answer = raw(host.addr, head.as_bytes(), WAIT).await.expect("no answer to an oversized length");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_stalled_body_is_cut_off() {
    let host = host().options(|o| o.connections.body_timeout = Duration::from_millis(300)).start().await;
    let head = format!(
        "POST /hello/v1/session HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"mes",
        host.addr
    );
    // Cut off long before the test's own wait: answered 400 or closed.
    let answer =
        raw(host.addr, head.as_bytes(), Duration::from_secs(10)).await.expect("the stalled body held the request");
    assert!(answer.starts_with("HTTP/1.1 400") || answer.is_empty(), "{answer}");
    host.shutdown().await;
}
