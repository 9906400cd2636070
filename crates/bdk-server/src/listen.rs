//! The accept loop and the limits on connections (docs/http.md#limits): a cap on connections
//! held at once, where a new connection at the cap closes the oldest idle one (no request in
//! flight, or a head still being read), and a few reserved slots past it that serve one request
//! each on a short clock when every held connection is busy, so `/v1/health` still answers; a
//! timeout on reading a request's head that also closes idle keep-alive connections, a timeout
//! between chunks of a request body, and a back-off when `accept` itself fails (out of file
//! descriptors). HTTP/1 only.
//!
//! It does not route or authenticate: every request goes to the router it is given, with the
//! peer's address as `ConnectInfo`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tower_http::timeout::TimeoutBody;

/// Default cap on connections held at once (lowered to half the file-descriptor limit).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default number of one-request connections admitted past the cap when every held connection
/// is busy.
pub const DEFAULT_RESERVED_CONNECTIONS: usize = 16;
/// Default time to read a request's head, which is also how long a keep-alive connection may
/// sit idle between requests.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(15);
/// Default longest pause between two chunks of a request body.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The head-read clock of a connection admitted on a reserved slot.
const RESERVED_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause after `accept` fails (e.g. `EMFILE`) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one "limit reached" log line per this interval.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The connection limits, from the `serve` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections held at once; more are served on a reserved slot or closed.
    pub max_connections: usize,
    /// One-request connections admitted past `max_connections` (for health checks).
    pub reserved: usize,
    /// Time to read a request's head; also the idle limit of a keep-alive connection.
    pub header_timeout: Duration,
    /// Longest pause between two chunks of a request body.
    pub body_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: default_max_connections(),
            reserved: DEFAULT_RESERVED_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// [`DEFAULT_MAX_CONNECTIONS`], or half the process's file-descriptor limit when that is lower
/// (the rest stays for logs, tool pipes and the reserved slots).
pub fn default_max_connections() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    match soft.and_then(|n| usize::try_from(n).ok()) {
        Some(n) => DEFAULT_MAX_CONNECTIONS.min(n / 2).max(8),
        None => DEFAULT_MAX_CONNECTIONS,
    }
}

/// Serves `router` on `listener` until `stop` fires; then stops accepting, asks every open
/// connection to finish its request and close, and returns once they have.
pub(crate) async fn run(listener: TcpListener, router: Router, limits: ConnectionLimits, stop: CancellationToken) {
    let pool = Arc::new(Pool::new(limits.max_connections.max(1)));
    let reserved = Arc::new(Semaphore::new(limits.reserved));
    let connections = TaskTracker::new();
    let last_log = AtomicU64::new(0);
    let started = Instant::now();
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                if should_log(&last_log, started) {
                    tracing::error!(%error, "accept failed; backing off");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (held, evicted) = pool.admit();
        if evicted && should_log(&last_log, started) {
            tracing::warn!(
                max_connections = limits.max_connections,
                "connection limit reached: closing the oldest idle connection for each new one"
            );
        }
        let slot = match held {
            Some(held) => Slot::Regular(held),
            None => match Arc::clone(&reserved).try_acquire_owned() {
                Ok(permit) => {
                    if should_log(&last_log, started) {
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            "connection limit reached with every connection busy: serving one request per new connection on a reserved slot"
                        );
                    }
                    Slot::Reserved(permit)
                }
                Err(_) => {
                    if should_log(&last_log, started) {
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            reserved = limits.reserved,
                            "connection limit and reserved slots exhausted: closing new connections"
                        );
                    }
                    drop(stream);
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        connections.spawn(serve_connection(stream, peer, router.clone(), limits, slot, stop.clone()));
    }
    connections.close();
    connections.wait().await;
}

/// The connections held under the cap.
#[derive(Debug)]
struct Pool {
    max: usize,
    next: AtomicU64,
    held: Mutex<HashMap<u64, Arc<Conn>>>,
}

/// One held connection: how many requests are in flight on it (a streamed response counts
/// until its body is done), and the token that closes it.
#[derive(Debug)]
struct Conn {
    busy: AtomicUsize,
    close: CancellationToken,
}

/// A place in the pool, given back when the connection ends.
#[derive(Debug)]
struct Held {
    pool: Arc<Pool>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut held) = self.pool.held.lock() {
            held.remove(&self.id);
        }
    }
}

impl Pool {
    fn new(max: usize) -> Self {
        Self { max, next: AtomicU64::new(0), held: Mutex::new(HashMap::new()) }
    }

    /// A place for a new connection, closing the oldest idle one when the pool is full.
    /// `None` when every held connection is busy. The flag says whether one was closed.
    fn admit(self: &Arc<Self>) -> (Option<Held>, bool) {
        let Ok(mut held) = self.held.lock() else { return (None, false) };
        let mut evicted = false;
        if held.len() >= self.max {
            // Ids grow with time: the smallest idle id is the oldest idle connection.
            let victim = held.iter().filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0).map(|(id, _)| *id).min();
            match victim.and_then(|id| held.remove(&id)) {
                Some(conn) => {
                    conn.close.cancel();
                    evicted = true;
                }
                None => return (None, false),
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn { busy: AtomicUsize::new(0), close: CancellationToken::new() });
        held.insert(id, Arc::clone(&conn));
        (Some(Held { pool: Arc::clone(self), id, conn }), evicted)
    }
}

/// Marks a connection busy while it lives.
#[derive(Debug)]
struct Busy(Option<Arc<Conn>>);

impl Busy {
    fn new(conn: Option<Arc<Conn>>) -> Self {
        if let Some(conn) = &conn {
            conn.busy.fetch_add(1, Ordering::AcqRel);
        }
        Self(conn)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(conn) = &self.0 {
            conn.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[derive(Debug)]
enum Slot {
    Regular(Held),
    Reserved(OwnedSemaphorePermit),
}

/// Whether enough time passed since the last limit log line (and records this one).
fn should_log(last: &AtomicU64, started: Instant) -> bool {
    let now = started.elapsed().as_millis() as u64 + LOG_EVERY.as_millis() as u64;
    let previous = last.load(Ordering::Relaxed);
    now.saturating_sub(previous) >= LOG_EVERY.as_millis() as u64
        && last.compare_exchange(previous, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    slot: Slot,
    stop: CancellationToken,
) {
    let body_timeout = limits.body_timeout;
    let (conn, close) = match &slot {
        Slot::Regular(held) => (Some(Arc::clone(&held.conn)), held.conn.close.clone()),
        Slot::Reserved(_) => (None, CancellationToken::new()),
    };
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let router = router.clone();
        let busy = Busy::new(conn.clone());
        async move {
            let mut request = request.map(|body| Body::new(TimeoutBody::new(body_timeout, body)));
            request.extensions_mut().insert(ConnectInfo(peer));
            let response = router.oneshot(request).await.map_err(|never: Infallible| match never {})?;
            // The connection stays busy until the response body is done (a live stream).
            Ok::<_, Infallible>(response.map(move |body| {
                Body::new(body.map_err(move |error| {
                    let _busy = &busy;
                    error
                }))
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new());
    match slot {
        Slot::Regular(_) => builder.header_read_timeout(limits.header_timeout).keep_alive(true),
        Slot::Reserved(_) => {
            builder.header_read_timeout(RESERVED_HEADER_TIMEOUT.min(limits.header_timeout)).keep_alive(false)
        }
    };
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.as_mut().await
        }
        () = close.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.as_mut().await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
    // Only now is the place (or the reserved permit) given back.
    match slot {
        Slot::Regular(held) => drop(held),
        Slot::Reserved(permit) => drop(permit),
    }
}
