//! [`PgDatabase`]: a connection pool on one database, its schema brought up to date, and the
//! `LISTEN` task that wakes this replica's followers. Shared by every agent a server mounts.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::error::{PgError, Result};
use crate::migrate::{self, MigrationReport};
use crate::notify::Notifier;
use crate::wire::{CountingConnect, RoundTrips, Wire};
use crate::writer::Writer;

/// How to open a database. Defaults: 16 connections, 5 s to connect or to wait for a free
/// connection, migrations applied at open.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connections in the pool (each replica holds at most this many, plus one for `LISTEN`).
    pub pool_size: usize,
    /// A schema to use instead of the user's default (`search_path`); tests isolate themselves
    /// with a fresh one. Letters, digits and `_` only.
    pub schema: Option<String>,
    pub connect_timeout: Duration,
    /// How long a request waits for a free connection before failing as unavailable.
    pub wait_timeout: Duration,
    /// Apply pending migrations when opening (`bdk serve` does unless `--no-migrate`).
    pub migrate: bool,
    /// How long a session lease outlives its holder's last heartbeat (renewed every third of
    /// it): the bound on noticing that the replica running a turn died. Default 10 s.
    pub session_lease: Duration,
    /// Count what the pool's connections send ([`PgDatabase::round_trips`]): the connections
    /// are opened on a counting socket (TCP or Unix; no TLS, as without it). For benchmarks
    /// and tests; off by default.
    pub count_round_trips: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            pool_size: 16,
            schema: None,
            connect_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(5),
            migrate: true,
            session_lease: DEFAULT_SESSION_LEASE,
            count_round_trips: false,
        }
    }
}

/// The default [`PgOptions::session_lease`].
pub const DEFAULT_SESSION_LEASE: Duration = Duration::from_secs(10);

/// One database: its pool, the notifier, what migrating did, and this replica's identity for
/// session leases (with the heartbeat that keeps its leases alive).
#[derive(Debug)]
pub struct PgDatabase {
    pool: Pool,
    url: String,
    pub(crate) notifier: Arc<Notifier>,
    /// The group-commit writer every event append goes through.
    pub(crate) writer: Writer,
    /// Write transactions so far (see [`PgDatabase::commits`]).
    counters: Counters,
    /// What the pool's connections sent, when counted (see [`PgDatabase::round_trips`]).
    wire: Arc<Wire>,
    /// The lease tokens this replica holds, by (agent, session): appends to those sessions are
    /// fenced on them (refused once another replica claimed the lease).
    fences: std::sync::Mutex<std::collections::HashMap<(String, String), String>>,
    migration: MigrationReport,
    pub(crate) replica: String,
    pub(crate) session_lease: Duration,
    /// Agents whose forwarded commands this replica already serves (one inbox each).
    pub(crate) inboxes: std::sync::Mutex<std::collections::HashSet<String>>,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// The options each connection starts with: the URL's own, then the schema (`search_path`), then
/// `plan_cache_mode=force_generic_plan` unless the URL sets the mode. Every statement on the
/// hot path is prepared once per connection and looks rows up by key; under the default mode
/// PostgreSQL plans most of them again on every execution (a custom plan), which was about a
/// third of the database's CPU per turn (decision 0034).
fn session_options(url: Option<&str>, schema: Option<&str>) -> String {
    let mut options: Vec<String> =
        url.filter(|o| !o.trim().is_empty()).map(|o| o.trim().to_owned()).into_iter().collect();
    if let Some(schema) = schema {
        options.push(format!("-c search_path={schema}"));
    }
    if !url.is_some_and(|o| o.contains("plan_cache_mode")) {
        options.push("-c plan_cache_mode=force_generic_plan".to_owned());
    }
    options.join(" ")
}

impl PgDatabase {
    /// Connects to `url`, checks (or applies) the schema and starts listening for appends.
    /// Errors name the URL without its password.
    pub async fn connect(url: &str, options: &PgOptions) -> Result<Arc<PgDatabase>> {
        let shown = redact_url(url);
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| PgError::Url { url: shown.clone(), reason: e.to_string() })?;
        config.connect_timeout(options.connect_timeout);
        if let Some(schema) = &options.schema
            && (schema.is_empty() || !schema.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            return Err(PgError::Url { url: shown, reason: format!("invalid schema name {schema:?}") });
        }
        config.options(session_options(config.get_options(), options.schema.as_deref()));
        if config.get_application_name().is_none() {
            config.application_name("bdk");
        }
        let wire = Arc::new(Wire::default());
        let recycling = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = if options.count_round_trips {
            Manager::from_connect(config.clone(), CountingConnect { wire: wire.clone() }, recycling)
        } else {
            Manager::from_config(config.clone(), NoTls, recycling)
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| PgError::Connect { url: shown.clone(), reason: e.to_string() })?;
        let mut client = pool.get().await.map_err(|e| PgError::Connect {
            url: shown.clone(),
            reason: match e {
                deadpool_postgres::PoolError::Backend(e) => crate::error::describe(&e),
                other => other.to_string(),
            },
        })?;
        let migration =
            if options.migrate { migrate::apply(&mut client).await? } else { migrate::check(&client).await? };
        drop(client);
        let notifier = Arc::new(Notifier::start(config));
        let writer = Writer::start(pool.clone(), notifier.clone());
        let replica = crate::leases::replica_id();
        let session_lease = options.session_lease.max(Duration::from_millis(300));
        let heartbeat = tokio::spawn(crate::leases::heartbeat(pool.clone(), replica.clone(), session_lease));
        Ok(Arc::new(PgDatabase {
            pool,
            url: shown,
            notifier,
            writer,
            fences: Default::default(),
            counters: Counters::default(),
            wire,
            migration,
            replica,
            session_lease,
            inboxes: Default::default(),
            heartbeat,
        }))
    }

    /// A pooled connection, or `Unavailable` when none comes in time.
    pub(crate) async fn client(&self) -> bdk_store::Result<Object> {
        self.pool.get().await.map_err(crate::error::pool)
    }

    /// Notes that this replica holds `session`'s lease under `token` (appends are fenced on it).
    pub(crate) fn hold(&self, agent: &str, session: &str, token: &str) {
        self.fences().insert((agent.to_owned(), session.to_owned()), token.to_owned());
    }

    /// Forgets the holding `token` of `session` (a newer holding is kept).
    pub(crate) fn let_go(&self, agent: &str, session: &str, token: &str) {
        let mut fences = self.fences();
        let key = (agent.to_owned(), session.to_owned());
        if fences.get(&key).is_some_and(|held| held == token) {
            fences.remove(&key);
        }
    }

    /// The lease token this replica holds on `session`, if it claimed one.
    pub(crate) fn fence(&self, agent: &str, session: &str) -> Option<String> {
        self.fences().get(&(agent.to_owned(), session.to_owned())).cloned()
    }

    fn fences(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), String>> {
        self.fences.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one write transaction (`durable`: its commit waited for the WAL flush).
    pub(crate) fn count_commit(&self, durable: bool) {
        let counter = if durable { &self.counters.durable } else { &self.counters.relaxed };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The write transactions of this replica's session path so far (event appends, session
    /// records, leases, workspace saves): what a turn costs in commits, for benchmarks.
    pub fn commits(&self) -> Commits {
        use std::sync::atomic::Ordering::Relaxed;
        let (batches, relaxed) = (self.writer.stats.batches.load(Relaxed), self.writer.stats.relaxed.load(Relaxed));
        Commits {
            durable: self.counters.durable.load(Relaxed) + batches - relaxed,
            relaxed: self.counters.relaxed.load(Relaxed) + relaxed,
        }
    }

    /// What the pool's connections sent so far (round trips, statements, statements
    /// prepared), counted on the wire; zeros unless [`PgOptions::count_round_trips`]. Covers
    /// everything this replica's pool sends (the heartbeat and lease sweeps too), not the
    /// `LISTEN` connection, which only receives.
    pub fn round_trips(&self) -> RoundTrips {
        self.wire.snapshot()
    }

    /// Group commits so far: (transactions, appends they carried). An append that waited for
    /// others to fill a batch shows as appends > transactions.
    pub fn append_batches(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.writer.stats.batches.load(Relaxed), self.writer.stats.appends.load(Relaxed))
    }

    /// The URL, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What opening the database did to its schema.
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// This replica's id in session leases (unique per process).
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Connections open and idle in the pool.
    pub fn pool_status(&self) -> (usize, usize) {
        let status = self.pool.status();
        (status.size, status.available)
    }
}

#[derive(Debug, Default)]
struct Counters {
    durable: std::sync::atomic::AtomicU64,
    relaxed: std::sync::atomic::AtomicU64,
}

/// Write transactions counted by [`PgDatabase::commits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Commits {
    /// Commits that waited for the WAL flush (each one an fsync on the database server, shared
    /// by everything a group commit carried).
    pub durable: u64,
    /// Commits with `synchronous_commit = off`: written, not waited for; made durable by the
    /// next durable commit (the WAL is flushed in order).
    pub relaxed: u64,
}

/// Runs one write statement in its own transaction with `synchronous_commit = off`, pipelined
/// (`BEGIN; SET LOCAL ...`, the statement, `COMMIT`: one round trip). For writes that need not
/// be durable on their own: derived facts recovery rebuilds, and writes the caller's next durable
/// append makes durable (the WAL is flushed in order, so a later durable commit flushes them too).
pub(crate) async fn execute_relaxed(
    db: &PgDatabase,
    client: &Object,
    sql: &str,
    params: &Params<'_>,
) -> bdk_store::Result<u64> {
    let rows = relaxed(client, sql, params).await?;
    db.count_commit(false);
    Ok(rows)
}

/// Starts a transaction whose statements are planned as key lookups whatever the tables'
/// statistics say: an append batch's (`writer.rs`) and a slot claim's (`slots.rs`). Plans are
/// generic and cached per connection (decision 0034), made the first time a connection runs a
/// statement. On a new database's empty tables, or ones analyzed while small, the planner chose
/// hash joins over sequential scans of all sessions and leases, and a hashed subplan of the
/// fence check that read every lease: each append batch read every row of both tables until the
/// next `ANALYZE` replaced the plans. With sequential scans and hash and merge joins off, every
/// join there is a nested loop over the transaction's few keys with index lookups (the fence
/// checks' `OFFSET 0` keeps them per-row subplans, which cannot be hashed). `SET LOCAL` ends
/// with the transaction; the plans keep what they were made under.
pub(crate) const BEGIN_KEYED: &str = concat!("BEGIN; ", keyed!());

/// [`BEGIN_KEYED`] for an append batch of debouncing agents only (`storage.toml`'s
/// `policy.debounce_ms`): its commit does not wait for the WAL flush.
pub(crate) const BEGIN_KEYED_RELAXED: &str = concat!("BEGIN; SET LOCAL synchronous_commit = off; ", keyed!());

/// [`BEGIN_KEYED`] inside a transaction already begun.
pub(crate) const KEYED: &str = keyed!();

macro_rules! keyed {
    () => {
        "SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off"
    };
}
use keyed;

/// A statement's parameters, as the driver takes them.
pub(crate) type Params<'p> = [&'p (dyn tokio_postgres::types::ToSql + Sync)];

/// [`execute_relaxed`] without counting the commit (for the heartbeat, which no turn makes).
pub(crate) async fn relaxed(client: &Object, sql: &str, params: &Params<'_>) -> bdk_store::Result<u64> {
    let statement = client.prepare_cached(sql).await.map_err(crate::error::db)?;
    let (begun, executed, committed) = futures_util::future::join3(
        client.batch_execute("BEGIN; SET LOCAL synchronous_commit = off"),
        client.execute(&statement, params),
        client.batch_execute("COMMIT"),
    )
    .await;
    begun.map_err(crate::error::db)?;
    let rows = executed.map_err(crate::error::db)?;
    committed.map_err(crate::error::db)?;
    Ok(rows)
}

/// `url` with its password replaced by `***`, for messages and logs (URL and key=value forms).
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..].find(['/', '?']).map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    // `password=...` as a query parameter or a key=value pair.
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(pos) = rest.find("password=") {
        let boundary = pos == 0 || matches!(rest.as_bytes()[pos - 1], b'?' | b'&' | b' ');
        result.push_str(&rest[..pos + "password=".len()]);
        rest = &rest[pos + "password=".len()..];
        if boundary {
            let end = rest.find(['&', ' ']).unwrap_or(rest.len());
            result.push_str("***");
            rest = &rest[end..];
        }
    }
    result.push_str(rest);
    result
}

/// The generic plans of `statements` (SQL, and its arguments as SQL literals) in a
/// [`BEGIN_KEYED`] transaction on a fresh schema's empty tables, as `EXPLAIN` prints them; `None`
/// without a test database.
#[cfg(test)]
pub(crate) async fn keyed_plans(statements: &[(&str, &str)]) -> Option<Vec<String>> {
    plans(BEGIN_KEYED, statements).await
}

/// Like [`keyed_plans`], in a plain transaction (the planner's own choices).
#[cfg(test)]
pub(crate) async fn generic_plans(statements: &[(&str, &str)]) -> Option<Vec<String>> {
    plans("BEGIN", statements).await
}

#[cfg(test)]
async fn plans(begin: &str, statements: &[(&str, &str)]) -> Option<Vec<String>> {
    let db = bdk_test_support::postgres::fresh("plans").await?;
    let options = PgOptions { schema: Some(db.schema().to_owned()), ..PgOptions::default() };
    let database = PgDatabase::connect(db.base_url(), &options).await.unwrap();
    let client = database.client().await.unwrap();
    client.batch_execute(begin).await.unwrap();
    let mut plans = Vec::new();
    for (n, (sql, args)) in statements.iter().enumerate() {
        client.batch_execute(&format!("PREPARE p{n} AS {sql}")).await.unwrap();
        let rows = client.simple_query(&format!("EXPLAIN EXECUTE p{n}({args})")).await.unwrap();
        let lines = rows.iter().filter_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        });
        plans.push(lines.collect::<Vec<_>>().join("\n"));
    }
    client.batch_execute("ROLLBACK").await.unwrap();
    Some(plans)
}

#[cfg(test)]
mod tests {
    use super::{PgDatabase, PgOptions, redact_url, session_options};

    #[test]
    fn connections_plan_generically_unless_the_url_says_otherwise() {
        let generic = "-c plan_cache_mode=force_generic_plan";
        assert_eq!(session_options(None, None), generic);
        assert_eq!(session_options(Some("  "), Some("s1")), format!("-c search_path=s1 {generic}"));
        // The URL's own options are kept, before the schema.
        assert_eq!(
            session_options(Some("-c synchronous_commit=off"), Some("s1")),
            format!("-c synchronous_commit=off -c search_path=s1 {generic}")
        );
        assert_eq!(session_options(Some("-c plan_cache_mode=auto"), None), "-c plan_cache_mode=auto");
    }

    /// What the pool's connections run with, asked of the server.
    #[tokio::test]
    async fn a_pool_connection_runs_with_its_schema_and_generic_plans() {
        let Some(db) = bdk_test_support::postgres::fresh("plans").await else { return };
        let url =
            format!("{}?options=-c%20synchronous_commit%3Doff", db.base_url().split('?').next().unwrap_or_default());
        let options = PgOptions { schema: Some(db.schema().to_owned()), ..PgOptions::default() };
        let database = PgDatabase::connect(&url, &options).await.unwrap();
        let client = database.client().await.unwrap();
        let show = |name: &'static str| {
            let client = &client;
            async move { client.query_one(&format!("SHOW {name}"), &[]).await.unwrap().get::<_, String>(0) }
        };
        assert_eq!(show("plan_cache_mode").await, "force_generic_plan");
        assert_eq!(show("search_path").await, db.schema());
        assert_eq!(show("synchronous_commit").await, "off");
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("postgres://bdk:s3cret@db:5432/bdk"), "postgres://bdk:***@db:5432/bdk");
        assert_eq!(redact_url("postgres://bdk@db/bdk"), "postgres://bdk@db/bdk");
        assert_eq!(
            redact_url("postgresql://u:p@h/d?password=x&sslmode=off"),
            "postgresql://u:***@h/d?password=***&sslmode=off"
        );
        assert_eq!(redact_url("host=db user=u password=hunter2 dbname=d"), "host=db user=u password=*** dbname=d");
        assert_eq!(redact_url("postgres://u:p@ss@h/d"), "postgres://u:***@h/d");
    }
}
