//! A real host on `127.0.0.1:0` over temporary projects and state, driven with reqwest as a
//! client would; NDJSON streams read line by line. Every wait has a timeout.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bdk_engine::{AgentConfig, Engine, EngineOptions};
use bdk_model::{ModelProvider, ScriptStep, ScriptedProvider};
use bdk_protocol::Event;
use bdk_protocol::http::SessionResponse;
use bdk_server::{Agent, AppState, LogBuffer, ServeOptions};
use bdk_store::FsStore;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The longest any single wait in these tests may take: generous, because a turn that runs a
/// few `python3` tools can take well over 20 s on a loaded 2-core machine (stress mode), and
/// only a failing test ever waits this long.
pub const WAIT: Duration = Duration::from_secs(60);

/// Awaits `future` or panics after [`WAIT`], naming what was awaited.
pub async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// `BDK_TEST_BACKEND=postgres` runs this suite on the PostgreSQL backend (a fresh schema of
/// `BDK_TEST_DATABASE_URL` per host, with session leases); anything else on the filesystem.
async fn backend_database() -> Option<(bdk_test_support::postgres::TestDb, Arc<bdk_store_pg::PgDatabase>)> {
    if !on_postgres() {
        return None;
    }
    let db = bdk_test_support::postgres::fresh("server_suite")
        .await
        .expect("BDK_TEST_BACKEND=postgres needs BDK_TEST_DATABASE_URL");
    let options = bdk_store_pg::PgOptions { schema: Some(db.schema().to_owned()), pool_size: 8, ..Default::default() };
    let database = bdk_store_pg::PgDatabase::connect(&db.url(), &options).await.unwrap();
    Some((db, database))
}

pub use bdk_test_support::postgres::{filesystem_only, on_postgres};

/// One agent's stores on the backend this run uses.
struct Backend {
    stores: bdk_store::Stores,
    artifacts: Arc<dyn bdk_store::ArtifactStore>,
    timed: Arc<dyn bdk_store::TimedStore>,
    leases: Option<Arc<dyn bdk_store::SessionLeases>>,
    /// The filesystem store itself (its counters), when that is the backend.
    fs: Option<FsStore>,
}

impl Backend {
    async fn open(
        database: Option<&(bdk_test_support::postgres::TestDb, Arc<bdk_store_pg::PgDatabase>)>,
        slug: &str,
        state_dir: &Path,
    ) -> Backend {
        match database {
            Some((_, database)) => {
                let store = bdk_store_pg::PgStore::new(database.clone(), slug, state_dir);
                Backend {
                    stores: store.stores(),
                    artifacts: Arc::new(store.clone()),
                    timed: store.timed(),
                    leases: Some(store.leases()),
                    fs: None,
                }
            }
            None => {
                let store = FsStore::open(state_dir).unwrap();
                Backend {
                    stores: store.stores(),
                    artifacts: Arc::new(store.clone()),
                    timed: Arc::new(store.clone()),
                    leases: None,
                    fs: Some(store.clone()),
                }
            }
        }
    }
}

/// Writes a minimal valid project `<root>/<slug>/bot/`.
pub fn write_project(root: &Path, slug: &str) -> PathBuf {
    let dir = root.join(slug);
    std::fs::create_dir_all(dir.join("bot")).unwrap();
    std::fs::write(
        dir.join("bot/agent.toml"),
        format!("name = \"{slug} agent\"\ndescription = \"A test agent.\"\nmodel = \"script\"\n"),
    )
    .unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Answer briefly.\n").unwrap();
    dir
}

/// How a test host is set up.
pub struct Builder {
    token: Option<String>,
    slugs: Vec<String>,
    options: ServeOptions,
    script: Option<Vec<ScriptStep>>,
    grace: Duration,
    /// Extra project files (path under the project folder, content); with any, the agents run
    /// their project's real tools instead of none.
    files: Vec<(String, String)>,
    /// Where the agents' state goes (`<dir>/<slug>`); a temp folder by default.
    state_root: Option<PathBuf>,
    /// Where the projects are written (`<dir>/<slug>`); a temp folder by default.
    projects_root: Option<PathBuf>,
    /// The model the agents run on instead of the script (a real provider on a fake model
    /// server, say).
    model: Option<Arc<dyn ModelProvider>>,
}

pub fn host() -> Builder {
    Builder {
        token: None,
        slugs: vec!["hello".into()],
        options: ServeOptions::default(),
        script: None,
        grace: Duration::from_secs(5),
        files: Vec::new(),
        state_root: None,
        projects_root: None,
        model: None,
    }
}

impl Builder {
    pub fn options(mut self, f: impl FnOnce(&mut ServeOptions)) -> Self {
        f(&mut self.options);
        self
    }

    pub fn agents(mut self, slugs: &[&str]) -> Self {
        self.slugs = slugs.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// The model's answers, one step per model call; without a script the model echoes.
    pub fn script(mut self, steps: Vec<ScriptStep>) -> Self {
        self.script = Some(steps);
        self
    }

    /// Runs the agents on `provider` (the script, if any, is then unused).
    pub fn model(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.model = Some(provider);
        self
    }

    /// The bearer token the host's request helpers send (see `Host::as_token` for others).
    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    /// Writes `content` at `path` (e.g. `bot/tools/x.toml`) in every project; the agents then
    /// run their projects' tools.
    pub fn file(mut self, path: &str, content: &str) -> Self {
        self.files.push((path.to_owned(), content.to_owned()));
        self
    }

    /// Puts the agents' state under `root` (a small file system a test fills, say).
    pub fn state_root(mut self, root: &Path) -> Self {
        self.state_root = Some(root.to_owned());
        self
    }

    /// Writes the projects under `root` (two hosts in one process serving the same folders).
    pub fn projects_root(mut self, root: &Path) -> Self {
        self.projects_root = Some(root.to_owned());
        self
    }

    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    pub async fn start(self) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let projects_root = self.projects_root.clone().unwrap_or_else(|| dir.path().join("projects"));
        for slug in &self.slugs {
            let project = write_project(&projects_root, slug);
            for (path, content) in &self.files {
                let path = project.join(path);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, content).unwrap();
            }
        }
        let discovery = bdk_project::discover(&[projects_root]);
        assert!(!discovery.has_errors(), "{:?}", discovery.all_diagnostics().collect::<Vec<_>>());
        let provider = Arc::new(match self.script {
            Some(steps) => ScriptedProvider::new(steps),
            None => ScriptedProvider::echo(),
        });
        let mut agents = Vec::new();
        let host_tokens = bdk_server::HostTokens::new();
        let database = backend_database().await;
        let mut fs_store = None;
        for project in discovery.projects {
            let state_dir = self.state_root.clone().unwrap_or_else(|| dir.path().join("state")).join(&project.slug);
            let backend = Backend::open(database.as_ref(), &project.slug, &state_dir).await;
            fs_store = fs_store.or(backend.fs.clone());
            let tools: Arc<dyn bdk_tools::ToolRegistry> = if self.files.is_empty() {
                Arc::new(bdk_tools::NoTools)
            } else {
                bdk_server::mount::tools(&project, &state_dir).unwrap()
            };
            let options = EngineOptions {
                host: Some(host_tokens.authority(&project.slug)),
                capabilities: bdk_engine::capabilities(&project, &state_dir),
                artifacts: Some(backend.artifacts.clone()),
                leases: backend.leases.clone(),
                ..EngineOptions::default()
            };
            let engine = Engine::with_options(
                AgentConfig::from_project(&project),
                backend.stores.clone(),
                self.model.clone().unwrap_or_else(|| provider.clone() as Arc<dyn ModelProvider>),
                tools,
                options,
            );
            engine.recover().await.unwrap();
            let reminders = bdk_engine::reminders::Reminders::new(
                engine.clone(),
                backend.timed.clone(),
                Arc::new(bdk_engine::clock::SystemClock),
                &project.caps.reminders,
            );
            agents.push(Agent::new(project, engine).with_reminders(reminders));
        }
        let logs = LogBuffer::new(100);
        let state = AppState::new(agents, self.options, logs).with_host_tokens(host_tokens);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = state.clone();
        let grace = self.grace;
        let task = tokio::spawn(async move {
            bdk_server::serve(
                listener,
                serving,
                async move {
                    let _ = stopped.await;
                },
                grace,
            )
            .await
        });
        let base = match state.options.mode {
            bdk_server::Mode::Multi => format!("http://{addr}/{}", self.slugs[0]),
            bdk_server::Mode::Single => format!("http://{addr}"),
        };
        Host {
            addr,
            origin: format!("http://{addr}"),
            base,
            client: reqwest::Client::builder().timeout(WAIT).build().unwrap(),
            token: self.token,
            state,
            provider,
            fs_store,
            stop: Some(stop),
            task: Some(task),
            _dir: Some(dir),
            _database: database.map(|(db, _)| db),
        }
    }
}

/// A running host.
pub struct Host {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`
    pub origin: String,
    /// The first agent's base URL (`origin/<slug>`, or `origin` in single mode).
    pub base: String,
    pub client: reqwest::Client,
    /// Sent as `Authorization: Bearer` by the request helpers.
    pub token: Option<String>,
    pub state: AppState,
    pub provider: Arc<ScriptedProvider>,
    /// The first agent's filesystem store (`None` on the PostgreSQL backend).
    pub fs_store: Option<FsStore>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
    /// The schema of a `BDK_TEST_BACKEND=postgres` run, dropped with the host.
    _database: Option<bdk_test_support::postgres::TestDb>,
}

/// A response's status and JSON body (`Value::Null` when the body is not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// Asserts the error shape `{ok:false, error:<code>, message}` and the status.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.text);
        assert_eq!(self.body["ok"], json!(false), "{}", self.text);
        assert_eq!(self.body["error"], json!(code), "{}", self.text);
        assert!(self.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", self.text);
    }
}

pub async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = within("a response body", response.text()).await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, headers, body, text }
}

impl Host {
    /// `base + path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `base + path` with the host's token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.client.request(method, self.url(path));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// The same host seen by another caller (`None`: no credentials).
    pub fn as_token(&self, token: Option<&str>) -> Host {
        Host {
            addr: self.addr,
            origin: self.origin.clone(),
            base: self.base.clone(),
            client: self.client.clone(),
            token: token.map(str::to_owned),
            state: self.state.clone(),
            provider: self.provider.clone(),
            fs_store: self.fs_store.clone(),
            stop: None,
            task: None,
            _dir: None,
            _database: None,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        reply(within(path, self.request(reqwest::Method::GET, path).send()).await.unwrap()).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        reply(within(path, self.request(reqwest::Method::POST, path).json(body).send()).await.unwrap()).await
    }

    /// Starts a session with `message`; panics unless accepted.
    pub async fn start_session(&self, message: &str) -> SessionResponse {
        let reply = self.post("/v1/session", &json!({ "message": message })).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        serde_json::from_value(reply.body).unwrap()
    }

    pub async fn follow_up(&self, id: &str, token: &str, message: &str) -> Reply {
        self.post(&format!("/v1/session/{id}"), &json!({ "continuationToken": token, "message": message })).await
    }

    /// Opens the NDJSON stream of `id` from `start`.
    pub async fn stream(&self, id: &str, start: u64) -> Lines {
        let path = format!("/v1/session/{id}/stream?startIndex={start}");
        let response = within("the stream to open", self.request(reqwest::Method::GET, &path).send()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "application/x-ndjson");
        Lines::new(response)
    }

    /// The one-shot dump of `id`'s events.
    pub async fn events(&self, id: &str) -> Vec<Event> {
        let reply = self.get(&format!("/v1/session/{id}/events")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        parse_lines(&reply.text)
    }

    /// Waits until the session's log holds an event of type `event_type` after index `after`.
    pub async fn wait_for(&self, id: &str, event_type: &str, after: Option<u64>) -> Event {
        within(&format!("{event_type} in {id}"), async {
            loop {
                let events = self.events(id).await;
                if let Some(e) =
                    events.into_iter().find(|e| e.event_type() == event_type && after.is_none_or(|a| e.index > a))
                {
                    return e;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// Stops the host as SIGTERM would and waits for `serve` to return.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            within("the host to shut down", task).await.unwrap().unwrap();
        }
    }
}

pub fn parse_lines(text: &str) -> Vec<Event> {
    text.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// An NDJSON response read incrementally, one event per line.
pub struct Lines {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
    pub ended: bool,
}

impl Lines {
    fn new(response: reqwest::Response) -> Self {
        Self { body: response.bytes_stream().boxed(), buffer: Vec::new(), ended: false }
    }

    /// The next event, or `None` when the server ended the stream. Panics after [`WAIT`].
    pub async fn next(&mut self) -> Option<Event> {
        within("the next stream line", async {
            loop {
                if let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.buffer.drain(..=pos).collect();
                    return Some(serde_json::from_slice(&line[..line.len() - 1]).unwrap());
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                    Some(Err(err)) => panic!("stream read failed: {err:?}"),
                    None => {
                        assert!(self.buffer.is_empty(), "the stream ended inside a line");
                        self.ended = true;
                        return None;
                    }
                }
            }
        })
        .await
    }

    /// Reads events up to and including the first of type `event_type`.
    pub async fn until(&mut self, event_type: &str) -> Vec<Event> {
        let mut seen = Vec::new();
        loop {
            let event = self.next().await.unwrap_or_else(|| panic!("stream ended before {event_type}: {seen:?}"));
            let done = event.event_type() == event_type;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// A text step that streams `words` words with `delay` before each event.
pub fn slow_text(words: usize, delay: Duration) -> ScriptStep {
    ScriptStep::text(slow_text_body(words)).with_delay(delay)
}

/// Asserts indices run `from, from+1, ...` with no gap or duplicate.
pub fn assert_dense(events: &[Event], from: u64) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event.index,
            from + i as u64,
            "event {i} of {:?}",
            events.iter().map(|e| e.index).collect::<Vec<_>>()
        );
    }
}

/// The types of `events`, in order.
pub fn types(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.event_type().to_owned()).collect()
}

/// The text of `slow_text(words, ..)`.
pub fn slow_text_body(words: usize) -> String {
    (0..words).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
}

/// The concatenated `message.appended` deltas of `events`.
pub fn appended_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.data {
            bdk_protocol::EventData::MessageAppended(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}
