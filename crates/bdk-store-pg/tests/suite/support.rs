//! Fixtures: a backend whose every `fresh` state is a new schema on the test server.

use std::sync::Arc;

use bdk_store::conformance::{Backend, Instance};
use bdk_store::{BoxFuture, Stores, TimedStore};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use tempfile::TempDir;

pub struct Pg;

/// `Some(Pg)` when a test server is configured (else a loud SKIPPED notice).
pub async fn backend() -> Option<Pg> {
    // Probe once so an unconfigured run says SKIPPED instead of failing.
    postgres::fresh("probe").await.map(|_| Pg)
}

pub struct PgInstance {
    pub test_db: Arc<TestDb>,
    pub local: Arc<TempDir>,
    pub store: PgStore,
}

pub fn options(db: &TestDb) -> PgOptions {
    PgOptions { schema: Some(db.schema().to_owned()), pool_size: 8, ..PgOptions::default() }
}

impl PgInstance {
    pub async fn open(test_db: Arc<TestDb>, local: Arc<TempDir>) -> PgInstance {
        let db = PgDatabase::connect(test_db.base_url(), &options(&test_db)).await.unwrap();
        let store = PgStore::new(db, "agent", local.path().join("agent"));
        PgInstance { test_db, local, store }
    }
}

impl Backend for Pg {
    fn fresh(&self) -> BoxFuture<'_, Box<dyn Instance>> {
        Box::pin(async {
            let test_db = Arc::new(postgres::fresh("conformance").await.unwrap());
            let local = Arc::new(tempfile::tempdir().unwrap());
            Box::new(PgInstance::open(test_db, local).await) as Box<dyn Instance>
        })
    }
}

impl Instance for PgInstance {
    fn stores(&self) -> Stores {
        self.store.stores()
    }

    fn timed(&self) -> Arc<dyn TimedStore> {
        self.store.timed()
    }

    fn reopen(&self) -> BoxFuture<'_, Box<dyn Instance>> {
        Box::pin(async {
            Box::new(PgInstance::open(self.test_db.clone(), self.local.clone()).await) as Box<dyn Instance>
        })
    }

    fn replica(&self) -> Option<BoxFuture<'_, Box<dyn Instance>>> {
        // Another replica: its own pool, listener and local folder.
        Some(Box::pin(async {
            let local = Arc::new(tempfile::tempdir().unwrap());
            Box::new(PgInstance::open(self.test_db.clone(), local).await) as Box<dyn Instance>
        }))
    }
}
