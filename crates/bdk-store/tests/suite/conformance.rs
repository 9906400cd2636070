//! Guards that the filesystem backend passes the store-trait conformance suite
//! (`bdk_store::conformance`), the same checks the PostgreSQL backend runs.

use std::sync::Arc;

use bdk_store::conformance::{Backend, Instance};
use bdk_store::{BoxFuture, FsStore, Stores, TimedStore};
use tempfile::TempDir;

struct Fs;

struct FsInstance {
    dir: Arc<TempDir>,
    store: FsStore,
}

impl Backend for Fs {
    fn fresh(&self) -> BoxFuture<'_, Box<dyn Instance>> {
        Box::pin(async {
            let dir = Arc::new(tempfile::tempdir().unwrap());
            let store = FsStore::open(dir.path().join("agent")).unwrap();
            Box::new(FsInstance { dir, store }) as Box<dyn Instance>
        })
    }
}

impl Instance for FsInstance {
    fn stores(&self) -> Stores {
        self.store.stores()
    }

    fn timed(&self) -> Arc<dyn TimedStore> {
        Arc::new(self.store.clone())
    }

    fn reopen(&self) -> BoxFuture<'_, Box<dyn Instance>> {
        Box::pin(async {
            let store = FsStore::open(self.dir.path().join("agent")).unwrap();
            Box::new(FsInstance { dir: self.dir.clone(), store }) as Box<dyn Instance>
        })
    }
}

bdk_store::conformance_suite!(async { Some(Fs) });
