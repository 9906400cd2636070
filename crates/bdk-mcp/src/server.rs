//! One connection's lifecycle: opened on first use (placeholders resolved then), shared by every
//! caller, restarted after it dies, backed off after it fails to start, closed with its hub.
//!
//! A stdio server runs with the bot folder as cwd, in its own process group, tagged like a tool
//! call's processes (`bdk_tools::contain`), so closing it ends everything it started and a
//! killed host's leftovers are ended at the next start. Its stderr is kept as a short tail that
//! every error about it quotes. It does not decide which tools are visible (the hub does).

use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bdk_project::model::{ConnectionDef, Transport};
use bdk_tools::contain::Containment;
use rmcp::model::{ClientInfo, Implementation, Tool};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::env;
use crate::error::{McpError, Result};
use crate::http::{SessionSlot, TracedClient};
use crate::hub::PeerSlot;

/// How long opening a server (spawn or connect, handshake, first tool listing) may take.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait between two attempts to start a server that keeps failing.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How much of a server's stderr errors quote.
const STDERR_TAIL: usize = 2000;

/// Looks a variable up (the process environment, or a test's table).
pub type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

type Client = RunningService<RoleClient, ClientInfo>;

/// A running server: its session, its tools as listed when it opened, its process tree.
struct Live {
    client: Client,
    tools: Arc<Vec<Tool>>,
    containment: Option<Containment>,
}

enum State {
    /// Never opened (or closed after a death, to be opened again at once).
    Idle,
    Up(Box<Live>),
    /// Failed to open `failures` times in a row; not tried again before `retry_at`.
    Down {
        failures: u32,
        retry_at: Instant,
        error: String,
    },
    /// The hub closed: the host is shutting down.
    Closed,
}

/// The wait after `failures` failed starts in a row: 1 s, 2 s, 4 s, ... up to [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(5);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// Where a running server is reached, for its spans' network attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A child process over stdio.
    Pipe,
    /// Streamable HTTP at this host and port.
    Http { host: String, port: u16 },
    /// An agent of the same host, in process.
    InProcess,
}

/// One connection.
pub struct Connection {
    pub def: ConnectionDef,
    bot_dir: PathBuf,
    peers: PeerSlot,
    lookup: Lookup,
    state: tokio::sync::Mutex<State>,
    stderr: Arc<Mutex<String>>,
    /// Where the running server is (set when it opens).
    endpoint: Mutex<Option<Endpoint>>,
    /// The MCP session id an HTTP server assigned.
    session: SessionSlot,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection").field("name", &self.def.name).finish_non_exhaustive()
    }
}

impl Connection {
    pub fn new(def: ConnectionDef, bot_dir: PathBuf, peers: PeerSlot, lookup: Lookup) -> Self {
        Self {
            def,
            bot_dir,
            peers,
            lookup,
            state: tokio::sync::Mutex::new(State::Idle),
            stderr: Arc::new(Mutex::new(String::new())),
            endpoint: Mutex::new(None),
            session: SessionSlot::default(),
        }
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Where the server was last reached (`None` before it first opens).
    pub fn endpoint(&self) -> Option<Endpoint> {
        self.endpoint.lock().ok()?.clone()
    }

    /// The MCP session id the (HTTP) server assigned, if any.
    pub fn session_id(&self) -> Option<Arc<str>> {
        self.session.get()
    }

    fn set_endpoint(&self, endpoint: Endpoint) {
        if let Ok(mut slot) = self.endpoint.lock() {
            *slot = Some(endpoint);
        }
    }

    /// The last lines the server wrote to stderr (stdio servers), or empty.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|t| t.trim().to_owned()).unwrap_or_default()
    }

    /// `message`, with the stderr tail when there is one.
    pub fn with_tail(&self, message: impl fmt::Display) -> String {
        let tail = self.stderr_tail();
        if tail.is_empty() { message.to_string() } else { format!("{message}; its stderr ends with:\n{tail}") }
    }

    /// The live session and its tools, opening the server first if it is not running (or has
    /// died since the last call).
    pub async fn open(&self) -> Result<(Peer<RoleClient>, Arc<Vec<Tool>>)> {
        let mut state = self.state.lock().await;
        if let State::Up(live) = &*state {
            if !live.client.is_transport_closed() {
                return Ok((live.client.peer().clone(), Arc::clone(&live.tools)));
            }
            tracing::warn!(server = %self.def.name, "MCP server died; restarting it");
            let old = std::mem::replace(&mut *state, State::Idle);
            dispose(old).await;
        }
        let failures = match &*state {
            State::Closed => return Err(McpError::Closed),
            State::Down { failures, retry_at, error } => {
                let now = Instant::now();
                if *retry_at > now {
                    let wait = retry_at.duration_since(now).as_secs_f64();
                    return Err(McpError::Unavailable {
                        server: self.def.name.clone(),
                        message: format!("{error} (next attempt in {wait:.1}s)"),
                    });
                }
                *failures
            }
            State::Idle | State::Up(_) => 0,
        };
        match tokio::time::timeout(START_TIMEOUT, self.start()).await {
            Ok(Ok(live)) => {
                let opened = (live.client.peer().clone(), Arc::clone(&live.tools));
                tracing::info!(server = %self.def.name, tools = live.tools.len(), "MCP server opened");
                *state = State::Up(Box::new(live));
                Ok(opened)
            }
            Ok(Err(message)) => Err(self.failed(&mut state, failures + 1, message)),
            Err(_) => {
                let message = format!("did not open within {}s", START_TIMEOUT.as_secs());
                Err(self.failed(&mut state, failures + 1, message))
            }
        }
    }

    fn failed(&self, state: &mut State, failures: u32, message: String) -> McpError {
        let error = self.with_tail(format!("failed to start: {message}"));
        tracing::warn!(server = %self.def.name, failures, "MCP server {error}");
        *state = State::Down { failures, retry_at: Instant::now() + backoff(failures), error: error.clone() };
        McpError::Unavailable { server: self.def.name.clone(), message: error }
    }

    /// Called after a call failed in transport: when the session is gone, the server is
    /// disposed of, and the next call opens it again.
    pub async fn check_alive(&self) {
        let mut state = self.state.lock().await;
        if matches!(&*state, State::Up(live) if live.client.is_transport_closed()) {
            tracing::warn!(server = %self.def.name, "MCP server died during a call");
            let old = std::mem::replace(&mut *state, State::Idle);
            dispose(old).await;
        }
    }

    /// Ends the session and the server's processes; later calls fail with [`McpError::Closed`].
    pub async fn close(&self) {
        let mut state = self.state.lock().await;
        let old = std::mem::replace(&mut *state, State::Closed);
        dispose(old).await;
    }

    async fn start(&self) -> std::result::Result<Live, String> {
        let lookup = |name: &str| (self.lookup)(name);
        let resolve = |text: &str| {
            env::resolve(text, &lookup).map_err(|name| {
                format!("environment variable `{name}` is not set ({} reads it as `${{{name}}}`)", self.def.file)
            })
        };
        let info = client_info();
        let (client, containment) = match &self.def.transport {
            Transport::Stdio { command, args, env } => {
                let program = resolve(command)?;
                let mut cmd = tokio::process::Command::new(&program);
                for arg in args {
                    cmd.arg(resolve(arg)?);
                }
                for (key, value) in env {
                    cmd.env(key, resolve(value)?);
                }
                cmd.current_dir(&self.bot_dir).kill_on_drop(true).process_group(0);
                let containment = Containment::tag(&mut cmd);
                if let Ok(mut tail) = self.stderr.lock() {
                    tail.clear();
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot run `{program}`: {e}"))?;
                let reader = stderr.map(|stderr| tokio::spawn(keep_tail(stderr, Arc::clone(&self.stderr))));
                self.set_endpoint(Endpoint::Pipe);
                match info.serve(transport).await {
                    Ok(client) => (client, Some(containment)),
                    Err(e) => {
                        // The server is gone or going: let its last stderr lines arrive first.
                        if let Some(reader) = reader {
                            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
                        }
                        containment.end().await;
                        return Err(format!("the MCP handshake failed: {e}"));
                    }
                }
            }
            Transport::Http { url, headers } => {
                let url = resolve(url)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` resolved to `{url}`, which is not an http(s) URL"));
                }
                let mut map = reqwest::header::HeaderMap::new();
                for (key, value) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                        .map_err(|_| format!("`{key}` is not a valid header name"))?;
                    let value = reqwest::header::HeaderValue::from_str(&resolve(value)?)
                        .map_err(|_| format!("header `{key}` has a value that cannot be sent"))?;
                    map.insert(name, value);
                }
                let http = reqwest::Client::builder()
                    .default_headers(map)
                    .build()
                    .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
                if let Ok(parsed) = reqwest::Url::parse(&url) {
                    let host = parsed.host_str().unwrap_or_default().to_owned();
                    let port = parsed.port_or_known_default().unwrap_or_default();
                    self.set_endpoint(Endpoint::Http { host, port });
                }
                // rmcp's reqwest client, plus the call's `traceparent` header.
                let transport = StreamableHttpClientTransport::with_client(
                    TracedClient::new(http, self.session.clone()),
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                );
                let client =
                    info.serve(transport).await.map_err(|e| format!("the MCP handshake with {url} failed: {e}"))?;
                (client, None)
            }
            Transport::Agent { slug } => {
                let stream =
                    self.peers.connect(slug).ok_or_else(|| format!("agent `{slug}` is not mounted in this host"))?;
                self.set_endpoint(Endpoint::InProcess);
                let client = info.serve(stream).await.map_err(|e| format!("the MCP handshake failed: {e}"))?;
                (client, None)
            }
        };
        let tools = match client.peer().list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                let _ = client.cancel().await;
                if let Some(containment) = containment {
                    containment.end().await;
                }
                return Err(format!("listing its tools failed: {e}"));
            }
        };
        Ok(Live { client, tools: Arc::new(tools), containment })
    }
}

/// Ends a session and its process tree.
async fn dispose(state: State) {
    if let State::Up(live) = state {
        let Live { client, containment, .. } = *live;
        let _ = tokio::time::timeout(Duration::from_secs(5), client.cancel()).await;
        if let Some(containment) = containment {
            containment.end().await;
        }
    }
}

fn client_info() -> ClientInfo {
    ClientInfo {
        client_info: Implementation {
            name: "bdk".into(),
            title: None,
            version: env!("CARGO_PKG_VERSION").into(),
            description: None,
            icons: None,
            website_url: None,
        },
        ..ClientInfo::default()
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of a server's stderr.
async fn keep_tail(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(mut tail) = tail.lock() else { return };
        tail.push_str(&line);
        tail.push('\n');
        if tail.len() > STDERR_TAIL {
            let mut cut = tail.len() - STDERR_TAIL;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(50), MAX_BACKOFF);
    }
}
