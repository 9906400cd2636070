//! A PostgreSQL database for tests: `BDK_TEST_DATABASE_URL` names the server (`.ci/run` sets it to
//! the machine's PostgreSQL); each test gets a fresh schema of its own, dropped when the
//! [`TestDb`] is, so parallel tests and parallel CI runs never see each other's rows. Without the
//! variable (or with a server that does not answer) [`fresh`] prints a loud SKIPPED notice and
//! returns `None`.
//!
//! ```no_run
//! # async fn demo() {
//! let Some(db) = bdk_test_support::postgres::fresh("my_test").await else { return };
//! // connect to db.url(): its search_path is the fresh schema
//! # }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio_postgres::NoTls;

/// The variable naming the test server.
pub const ENV: &str = "BDK_TEST_DATABASE_URL";

/// Whether this run tests the PostgreSQL backend (`BDK_TEST_BACKEND=postgres`: the engine and
/// server suites' second pass in `.ci/run`).
pub fn on_postgres() -> bool {
    std::env::var("BDK_TEST_BACKEND").ok().as_deref() == Some("postgres")
}

/// In the PostgreSQL pass, says loudly that `test` checks something of the filesystem backend
/// only (`why`) and returns true: the caller returns at once; it runs in the filesystem pass.
pub fn filesystem_only(test: &str, why: &str) -> bool {
    if on_postgres() {
        // Straight to stderr: the harness would hide an `eprintln!` of a passing test.
        let line = format!("*** SKIPPED ({test}): filesystem-only ({why}); it runs in the filesystem pass ***\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    on_postgres()
}

/// A fresh schema on the test server.
#[derive(Debug)]
pub struct TestDb {
    base: String,
    schema: String,
}

impl TestDb {
    /// The server URL as given.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The schema's name (letters, digits, `_`).
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Runs `sql` (one or more statements, no parameters) in this schema: for tests that
    /// change rows behind the backend's back (a stalled replica's expired lease, say).
    pub async fn execute(&self, sql: &str) {
        let (client, connection) = match tokio_postgres::connect(&self.url(), NoTls).await {
            Ok(pair) => pair,
            Err(error) => panic!("cannot connect to the test server: {error}"),
        };
        let driver = tokio::spawn(connection);
        if let Err(error) = client.batch_execute(sql).await {
            panic!("the test statement failed: {error}");
        }
        drop(client);
        let _ = driver.await;
    }

    /// A URL whose connections use this schema (`options=-c search_path=...`) and carry its name
    /// as their `application_name`, so dropping the schema can end them first (see `Drop`).
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}&application_name={}", self.base, self.schema, self.schema)
    }
}

/// Ends the connections opened through [`TestDb::url`] (a test's pool, its `LISTEN` connection),
/// then drops the schema. Drop usually runs on the test's runtime thread, which it blocks until
/// done: a transaction of a task on that runtime, left open in this schema, would otherwise hold
/// the `DROP SCHEMA` (and the test) forever.
impl Drop for TestDb {
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        // Drop runs inside or outside a runtime: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            runtime.block_on(async move {
                if let Ok((client, connection)) = tokio_postgres::connect(&base, NoTls).await {
                    let driver = tokio::spawn(connection);
                    let _ = client
                        .execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                             WHERE application_name = $1 AND pid <> pg_backend_pid()",
                            &[&schema],
                        )
                        .await;
                    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
                    drop(client);
                    let _ = driver.await;
                }
            });
        })
        .join();
    }
}

/// A fresh schema named after `label`, or `None` (after a loud SKIPPED notice) when
/// `BDK_TEST_DATABASE_URL` is unset. A set variable whose server does not answer fails the test:
/// a configured database that is down must not turn into a silent pass.
pub async fn fresh(label: &str) -> Option<TestDb> {
    let Ok(base) = std::env::var(ENV) else {
        eprintln!(
            "\n*** SKIPPED ({label}): {ENV} is not set; PostgreSQL tests need a server, e.g. \
             {ENV}=postgres://postgres@127.0.0.1:5432/test (see README, Testing) ***\n"
        );
        return None;
    };
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let clean: String = label.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(20).collect();
    let schema = format!(
        "bdk_t_{}_{}_{}_{:x}",
        clean.to_ascii_lowercase(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    );
    let (client, connection) = match tokio_postgres::connect(&base, NoTls).await {
        Ok(pair) => pair,
        Err(error) => panic!("{ENV} is set but the server does not answer: {error}"),
    };
    let driver = tokio::spawn(connection);
    if let Err(error) = client.batch_execute(&format!("CREATE SCHEMA {schema}")).await {
        panic!("cannot create the test schema {schema}: {error}");
    }
    drop(client);
    let _ = driver.await;
    Some(TestDb { base, schema })
}
