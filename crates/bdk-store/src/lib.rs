//! Durable state for BDK: the storage traits the engine holds (`api`), their error type, the
//! `session.json` record, and the filesystem backend. A Postgres backend will implement the same
//! traits. No HTTP, no engine logic: this crate stores and replays, it does not decide.

pub mod api;
pub mod artifacts;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod error;
pub mod evals;
pub mod fs;
#[doc(hidden)]
pub mod fuzzing;
pub mod layer;
pub mod lease;
pub mod record;
pub mod rules;
pub mod timed;

pub use api::{
    BoxFuture, DataScope, EventFollower, EventLog, EventStream, FileEntry, HostDataStore, KvStore, NewEvent,
    SessionStore, SharedEvent, Stores, WorkspaceStore,
};
pub use artifacts::{ArtifactQuery, ArtifactRecord, ArtifactStore, ArtifactTag, ContentInfo, Tagged};
pub use error::{Error, Result};
pub use evals::{EvalRunRecord, EvalRunStore, FsEvalRuns};
pub use fs::{FsStore, FsStoreOptions, Layout, LogInfo, LogMemory, SyncStats};
pub use layer::{LogLayer, append_to};
pub use lease::{Claim, Incoming, SessionLeases, SlotClaim};
pub use record::{SessionRecord, SessionStatus};
pub use timed::{FiringRecord, FiringStatus, ReminderRecord, TimedKind, TimedStore};
