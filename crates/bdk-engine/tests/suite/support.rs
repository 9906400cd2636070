//! Shared fixtures: an engine over the backend this run tests (a temp-dir `FsStore`, or with
//! `BDK_TEST_BACKEND=postgres` a fresh schema of `BDK_TEST_DATABASE_URL`) with the scripted
//! provider and a test tool registry, helpers that wait for events through the engine's own
//! stream, and a timeout on every wait. Tests of filesystem internals (sync counters, open logs,
//! files on disk, injected disk faults) call [`filesystem_only`] and run in the filesystem pass.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bdk_engine::Admission;
use bdk_engine::{AgentConfig, Engine, FollowUp, Principal, SessionStarted, StartSession};
use bdk_model::{ModelProvider, ScriptStep, ScriptedProvider, Usage};
use bdk_protocol::event::SessionMode;
use bdk_protocol::{Event, EventData, SessionId};
use bdk_store::{FsStore, Stores, TimedStore};
use bdk_tools::{BoxFuture, ToolInvocation, ToolOutcome, ToolRegistry, ToolSpec};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

/// Every wait in this suite is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A model step that never answers until cancelled.
pub fn hang() -> ScriptStep {
    ScriptStep::text("never said").with_delay(Duration::from_secs(3600))
}

/// A text step with usage.
pub fn say(text: &str) -> ScriptStep {
    ScriptStep::text(text).with_usage(Usage { input_tokens: 10, output_tokens: 5, ..Default::default() })
}

/// Awaits `future` or panics after [`TIMEOUT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {TIMEOUT:?}"),
    }
}

pub fn alice() -> Principal {
    Principal::new("alice")
}

pub fn config() -> AgentConfig {
    AgentConfig {
        slug: "test".into(),
        instructions: "You are a test agent.".into(),
        max_steps: 8,
        max_running_turns: 16,
        idle_timeout: Duration::from_millis(200),
    }
}

pub use bdk_test_support::postgres::{filesystem_only, on_postgres};

/// A fresh schema and the database handle on it (dropped in this order: connections first).
struct PgBackend {
    database: Arc<bdk_store_pg::PgDatabase>,
    _schema: bdk_test_support::postgres::TestDb,
}

/// Where one test's agent keeps its state: a folder (`FsStore`), or in the PostgreSQL pass a
/// fresh schema (with local working folders under the same folder). Cheap to clone; every
/// [`TestStore::stores`] is a fresh handle on the same state, as after a restart.
#[derive(Clone)]
pub struct TestStore {
    state: std::path::PathBuf,
    pg: Option<Arc<PgBackend>>,
}

impl TestStore {
    /// The backend this run tests, with its state under `state`.
    pub async fn open(state: &std::path::Path) -> TestStore {
        let pg = if on_postgres() {
            let schema = bdk_test_support::postgres::fresh("engine_suite")
                .await
                .expect("BDK_TEST_BACKEND=postgres needs BDK_TEST_DATABASE_URL");
            let options = bdk_store_pg::PgOptions {
                schema: Some(schema.schema().to_owned()),
                pool_size: 8,
                ..Default::default()
            };
            let database = bdk_store_pg::PgDatabase::connect(&schema.url(), &options).await.unwrap();
            Some(Arc::new(PgBackend { database, _schema: schema }))
        } else {
            None
        };
        TestStore { state: state.to_owned(), pg }
    }

    /// A filesystem store under `state` whatever the run tests (see its callers for why).
    pub fn filesystem(state: &std::path::Path) -> TestStore {
        TestStore { state: state.to_owned(), pg: None }
    }

    fn pg_store(&self) -> Option<bdk_store_pg::PgStore> {
        let pg = self.pg.as_ref()?;
        Some(bdk_store_pg::PgStore::new(pg.database.clone(), config().slug, &self.state))
    }

    /// A fresh handle on the state: what an engine (or a restarted one) runs on.
    pub fn stores(&self) -> Stores {
        match self.pg_store() {
            Some(pg) => pg.stores(),
            None => FsStore::open(&self.state).unwrap().stores(),
        }
    }

    /// The session leases of one replica on the same state, in the PostgreSQL pass.
    pub fn leases(&self) -> Option<Arc<dyn bdk_store::SessionLeases>> {
        self.pg_store().map(|pg| pg.leases())
    }

    /// The artifact store on the same state.
    pub fn artifacts(&self) -> Arc<dyn bdk_store::ArtifactStore> {
        match self.pg_store() {
            Some(pg) => Arc::new(pg),
            None => Arc::new(FsStore::open(&self.state).unwrap()),
        }
    }

    /// The timed-work store (firings and reminders) on the same state.
    pub fn timed(&self) -> Arc<dyn TimedStore> {
        match self.pg_store() {
            Some(pg) => pg.timed(),
            None => Arc::new(FsStore::open(&self.state).unwrap()),
        }
    }
}

pub struct Fixture {
    pub dir: TempDir,
    /// The filesystem pass's store, the one the engine runs on there (its open logs, sync
    /// counters). In the PostgreSQL pass an unused one: tests that look at it are
    /// [`filesystem_only`].
    pub fs: FsStore,
    /// The state the engine runs on, on this run's backend.
    pub backend: TestStore,
    /// Its timed-work store (firings, reminders): `fs` in the filesystem pass.
    pub timed: Arc<dyn TimedStore>,
    pub engine: Engine,
    pub provider: Arc<ScriptedProvider>,
    pub tools: Arc<TestTools>,
}

impl Fixture {
    pub async fn new(steps: Vec<ScriptStep>) -> Self {
        Self::with(config(), ScriptedProvider::new(steps)).await
    }

    pub async fn echo() -> Self {
        Self::with(config(), ScriptedProvider::echo()).await
    }

    pub async fn with(config: AgentConfig, provider: ScriptedProvider) -> Self {
        Self::build(config, Arc::new(provider), None).await.0
    }

    /// A fixture whose model holds its first `held` answers until [`Gated::open`].
    pub async fn gated(config: AgentConfig, provider: ScriptedProvider, held: usize) -> (Self, Arc<Gated>) {
        let (fx, gate) = Self::build(config, Arc::new(provider), Some(held)).await;
        (fx, gate.unwrap_or_else(|| unreachable!()))
    }

    async fn build(
        config: AgentConfig,
        provider: Arc<ScriptedProvider>,
        held: Option<usize>,
    ) -> (Self, Option<Arc<Gated>>) {
        let dir = tempfile::tempdir().unwrap();
        let tools = Arc::new(TestTools::default());
        let fs = FsStore::open(dir.path().join("test")).unwrap();
        let backend = TestStore::open(&dir.path().join("test")).await;
        let (stores, timed) = if on_postgres() {
            (backend.stores(), backend.timed())
        } else {
            (fs.stores(), Arc::new(fs.clone()) as Arc<dyn TimedStore>)
        };
        let gate = held.map(|held| Gated::new(provider.clone(), held));
        let model: Arc<dyn ModelProvider> = match &gate {
            Some(gate) => gate.clone(),
            None => provider.clone(),
        };
        let engine = Engine::new(config, stores, model, tools.clone());
        (Fixture { dir, fs, backend, timed, engine, provider, tools }, gate)
    }

    /// A fresh store and engine on the same state, as after a restart.
    pub fn restart(&self, provider: Arc<ScriptedProvider>) -> Engine {
        Engine::new(config(), self.backend.stores(), provider, self.tools.clone())
    }

    /// A fresh filesystem store on the state (the filesystem pass; see [`Fixture::fs`]).
    pub fn store(&self) -> FsStore {
        FsStore::open(self.dir.path().join("test")).unwrap()
    }

    pub async fn start(&self, message: &str) -> SessionStarted {
        within(self.engine.start_session(start(message, SessionMode::Chat))).await.unwrap()
    }
}

pub fn start(message: &str, mode: SessionMode) -> StartSession {
    StartSession {
        message: message.into(),
        principal: alice(),
        channel: "http".into(),
        continuation_key: None,
        mode,
        title: None,
        dry_run: false,
        as_of: None,
        purpose: None,
        workspace_files: Vec::new(),
    }
}

pub fn follow(message: &str, token: &str, admission: Admission) -> FollowUp {
    FollowUp {
        message: message.into(),
        principal: alice(),
        continuation_token: token.into(),
        admission,
        workspace_files: Vec::new(),
    }
}

/// Follows the session until `done` holds for an event; returns every event up to it.
pub async fn until(engine: &Engine, id: &SessionId, done: impl Fn(&Event) -> bool) -> Vec<Event> {
    within(async {
        let mut stream = engine.follow(id, &alice(), 0).await.unwrap();
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await {
            let event = (*event.unwrap()).clone();
            let stop = done(&event);
            seen.push(event);
            if stop {
                return seen;
            }
        }
        panic!("the stream ended before the awaited event: {:?}", types(&seen));
    })
    .await
}

/// Waits for the `n`-th event that settles the session (`session.waiting`, `.completed`, `.failed`).
pub async fn settled(engine: &Engine, id: &SessionId, n: usize) -> Vec<Event> {
    let count = AtomicUsize::new(0);
    until(engine, id, |e| {
        let settles = matches!(
            e.data,
            EventData::SessionWaiting(_) | EventData::SessionCompleted(_) | EventData::SessionFailed(_)
        );
        settles && count.fetch_add(1, Ordering::SeqCst) + 1 == n
    })
    .await
}

/// Waits until the session's current turn is inside a model step.
pub async fn in_step(engine: &Engine, id: &SessionId, steps: usize) {
    let count = AtomicUsize::new(0);
    until(engine, id, |e| {
        matches!(e.data, EventData::StepStarted(_)) && count.fetch_add(1, Ordering::SeqCst) + 1 == steps
    })
    .await;
}

pub fn types(events: &[Event]) -> Vec<&str> {
    events.iter().map(Event::event_type).collect()
}

/// Event types with runs of the same `*.appended` type collapsed (delta batching may vary).
pub fn shape(events: &[Event]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for t in types(events) {
        if t.ends_with(".appended") && out.last() == Some(&t) {
            continue;
        }
        out.push(t);
    }
    out
}

pub fn count(events: &[Event], event_type: &str) -> usize {
    events.iter().filter(|e| e.event_type() == event_type).count()
}

/// Tools for tests: `add` sums `a` and `b`; `pair` waits until a second `pair` call runs at
/// the same time (so it only finishes when calls run concurrently); `slow` waits for cancel.
#[derive(Debug, Default)]
pub struct TestTools {
    pub calls: Mutex<Vec<ToolInvocation>>,
    pair: PairBarrier,
}

#[derive(Debug)]
struct PairBarrier(Arc<Barrier>);

impl Default for PairBarrier {
    fn default() -> Self {
        PairBarrier(Arc::new(Barrier::new(2)))
    }
}

impl ToolRegistry for TestTools {
    fn specs(&self) -> Vec<ToolSpec> {
        ["add", "pair", "slow"]
            .into_iter()
            .map(|name| ToolSpec {
                name: name.into(),
                description: format!("the {name} test tool"),
                input_schema: json!({"type": "object"}),
                output_schema: None,
            })
            .collect()
    }

    fn call(&self, invocation: ToolInvocation, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        self.calls.lock().unwrap().push(invocation.clone());
        let barrier = self.pair.0.clone();
        Box::pin(async move {
            match invocation.name.as_str() {
                "add" => {
                    let n = |k: &str| invocation.input.get(k).and_then(Value::as_i64).unwrap_or(0);
                    ToolOutcome::ok(json!(n("a") + n("b")))
                }
                "pair" => match tokio::time::timeout(Duration::from_secs(5), barrier.wait()).await {
                    Ok(_) => ToolOutcome::ok(json!("paired")),
                    Err(_) => ToolOutcome::error("the other call never ran alongside"),
                },
                "slow" => {
                    cancel.cancelled().await;
                    ToolOutcome::error("cancelled")
                }
                other => ToolOutcome::error(format!("unknown tool `{other}`")),
            }
        })
    }
}

/// A provider that holds the answers of its first calls until the test opens the gate. A test
/// that needs a turn still running while something else happens opens it after that thing,
/// instead of betting on a model delay being long enough on a loaded machine.
#[derive(Debug)]
pub struct Gated {
    inner: Arc<ScriptedProvider>,
    open: tokio::sync::watch::Sender<bool>,
    held: AtomicUsize,
}

impl Gated {
    pub fn new(inner: Arc<ScriptedProvider>, held: usize) -> Arc<Self> {
        Arc::new(Gated { inner, open: tokio::sync::watch::Sender::new(false), held: AtomicUsize::new(held) })
    }

    /// Lets every held answer (and every later one) through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
}

impl ModelProvider for Gated {
    fn info(&self) -> bdk_model::ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: bdk_model::ModelRequest, cancel: CancellationToken) -> bdk_model::ModelStream {
        let hold = self.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let answer = self.inner.stream(request, cancel.clone());
        if !hold {
            return answer;
        }
        use futures_util::StreamExt as _;
        let mut open = self.open.subscribe();
        Box::pin(
            futures_util::stream::once(async move {
                tokio::select! {
                    _ = open.wait_for(|open| *open) => {}
                    () = cancel.cancelled() => {}
                }
                answer
            })
            .flatten(),
        )
    }
}

/// An event log that counts the reads made through it.
#[derive(Debug)]
pub struct CountingLog {
    inner: Arc<dyn bdk_store::EventLog>,
    reads: AtomicUsize,
}

impl CountingLog {
    pub fn wrap(inner: Arc<dyn bdk_store::EventLog>) -> Arc<Self> {
        Arc::new(CountingLog { inner, reads: AtomicUsize::new(0) })
    }

    /// The reads so far.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl bdk_store::LogLayer for CountingLog {
    fn inner(&self) -> &Arc<dyn bdk_store::EventLog> {
        &self.inner
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> bdk_store::BoxFuture<'a, bdk_store::Result<Vec<Event>>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read(session, from, limit)
    }
}

/// Refuses appends that carry a `message.received` while `refuse` is set, as a full disk would.
#[derive(Debug)]
pub struct RefusingMessages {
    pub inner: Arc<dyn bdk_store::EventLog>,
    pub refuse: Arc<AtomicBool>,
}

impl bdk_store::LogLayer for RefusingMessages {
    fn inner(&self) -> &Arc<dyn bdk_store::EventLog> {
        &self.inner
    }

    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<bdk_store::NewEvent>,
        record: Option<bdk_store::SessionRecord>,
    ) -> bdk_store::BoxFuture<'a, bdk_store::Result<Vec<bdk_store::SharedEvent>>> {
        let message = events.iter().any(|e| matches!(e.data, EventData::MessageReceived(_)));
        if message && self.refuse.load(Ordering::SeqCst) {
            return Box::pin(async {
                let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
                Err(bdk_store::Error::Io { path: "events.ndjson".into(), source: full })
            });
        }
        bdk_store::layer::append_to(self.inner.as_ref(), session, events, record)
    }
}
