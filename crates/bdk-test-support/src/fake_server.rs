//! A fake model server on a real socket (127.0.0.1:0): it answers each request with the next
//! scripted [`Reply`], records every request, and checks invariants every provider request must
//! meet (a JSON body asking for a stream). Plain HTTP/1.1 over tokio, one request per
//! connection, chunked bodies, so a test controls exactly when bytes arrive, stall or stop.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long the `wait_for_*` helpers wait: generous, for a loaded 2-core machine.
pub const WAIT: Duration = Duration::from_secs(30);

/// One piece of a streamed body.
#[derive(Debug, Clone)]
pub enum Part {
    /// Sent as one HTTP chunk.
    Bytes(Vec<u8>),
    /// A pause before the next part.
    Delay(Duration),
}

/// How a streamed body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating chunk, then close.
    Complete,
    /// Close the socket mid-body (no terminating chunk).
    Abort,
    /// Keep the connection open and send nothing more.
    Hang,
}

/// What the server answers one request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream` with these parts.
    Sse { parts: Vec<Part>, end: End },
    /// Any status with a body, for errors.
    Status { status: u16, headers: Vec<(String, String)>, body: String },
    /// Read the request and never answer.
    Hang,
}

impl Reply {
    pub fn sse(parts: Vec<Part>) -> Self {
        Reply::Sse { parts, end: End::Complete }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply::Status { status, headers: Vec::new(), body: body.to_owned() }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    disconnects: AtomicUsize,
    /// Answers any request, without the model-request invariants ([`FakeServer::start_plain`]).
    plain: bool,
}

/// The running server; stops when dropped.
#[derive(Debug)]
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeServer {
    pub async fn start() -> Self {
        Self::start_with(Shared::default()).await
    }

    /// A server for requests that are not model requests (a webhook receiver, say): it records
    /// and answers each with the next reply, with no invariant checked.
    pub async fn start_plain() -> Self {
        Self::start_with(Shared { plain: true, ..Shared::default() }).await
    }

    async fn start_with(shared: Shared) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("the fake server cannot bind 127.0.0.1:0: {err}"));
        let addr = listener.local_addr().unwrap_or_else(|err| panic!("the fake server has no address: {err}"));
        let shared = Arc::new(shared);
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, state.clone()));
            }
        });
        Self { addr, shared, task }
    }

    /// The API root, like `https://api.openai.com/v1`: what a provider's `base_url` is set to.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bound address (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues the answer to the next unanswered request.
    pub fn push(&self, reply: Reply) -> &Self {
        lock(&self.shared.replies).push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// How many connections the client closed while the server was still holding them open
    /// (after [`End::Hang`] or [`Reply::Hang`]).
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// Waits (up to [`WAIT`]) until the server has seen `n` requests, and returns them.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<Recorded> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            assert!(tokio::time::Instant::now() < deadline, "the fake server saw {} of {n} requests", requests.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (up to [`WAIT`]) until the client closed `n` held connections.
    pub async fn wait_for_disconnects(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.disconnects() < n {
            assert!(tokio::time::Instant::now() < deadline, "the client never closed the connection");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A poisoned lock only means another test thread panicked; the data is still what it was.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn serve(mut socket: TcpStream, shared: Arc<Shared>) {
    let Some(request) = read_request(&mut socket).await else { return };
    let problem = if shared.plain { None } else { check_invariants(&request) };
    lock(&shared.requests).push(request);
    let reply = match problem {
        Some(problem) => Reply::status(400, &serde_json::json!({"error": {"message": problem}}).to_string()),
        None => lock(&shared.replies)
            .pop_front()
            .unwrap_or_else(|| Reply::status(500, r#"{"error":{"message":"the fake server has no reply queued"}}"#)),
    };
    let _ = answer(&mut socket, reply, &shared).await;
}

/// What every provider request must satisfy.
fn check_invariants(request: &Recorded) -> Option<String> {
    if request.method != "POST" {
        return Some(format!("expected POST, got {}", request.method));
    }
    if request.body.get("stream") != Some(&Value::Bool(true)) {
        return Some("the request body must be JSON with \"stream\": true".into());
    }
    if request.body.get("model").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Some("the request body names no model".into());
    }
    None
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Recorded { method, path, headers, body })
}

async fn answer(socket: &mut TcpStream, reply: Reply, shared: &Shared) -> std::io::Result<()> {
    match reply {
        Reply::Status { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\n");
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
            socket.shutdown().await
        }
        Reply::Hang => hold_until_closed(socket, shared).await,
        Reply::Sse { parts, end } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            socket.write_all(head.as_bytes()).await?;
            socket.flush().await?;
            for part in parts {
                match part {
                    Part::Delay(delay) => tokio::time::sleep(delay).await,
                    Part::Bytes(bytes) => {
                        socket.write_all(format!("{:x}\r\n", bytes.len()).as_bytes()).await?;
                        socket.write_all(&bytes).await?;
                        socket.write_all(b"\r\n").await?;
                        socket.flush().await?;
                    }
                }
            }
            match end {
                End::Complete => {
                    socket.write_all(b"0\r\n\r\n").await?;
                    socket.shutdown().await
                }
                End::Abort => Ok(()),
                End::Hang => hold_until_closed(socket, shared).await,
            }
        }
    }
}

/// Keeps the connection open until the client closes it, then counts that.
async fn hold_until_closed(socket: &mut TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut scratch = [0u8; 256];
    loop {
        match socket.read(&mut scratch).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    shared.disconnects.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Re-cuts the bytes of `parts` into pieces of `size` bytes, keeping delays where they were
/// (for tests that split UTF-8 characters and SSE lines across network chunks).
pub fn rechunk(parts: Vec<Part>, size: usize) -> Vec<Part> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for part in parts {
        match part {
            Part::Bytes(bytes) => pending.extend(bytes),
            Part::Delay(delay) => {
                out.extend(pending.chunks(size).map(|c| Part::Bytes(c.to_vec())));
                pending.clear();
                out.push(Part::Delay(delay));
            }
        }
    }
    out.extend(pending.chunks(size).map(|c| Part::Bytes(c.to_vec())));
    out
}
