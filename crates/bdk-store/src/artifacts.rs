//! Durable artifacts (the reference's `ctx.artifacts`): records tagged by `(owner, kind, key)`,
//! each with optional JSON data and optional downloadable content. The trait says what a backend
//! keeps and guarantees; which kinds exist, schema checks, path confinement and events are the
//! engine's.
//!
//! A tag is an upsert: tagging the same `(principal, kind, key)` again updates that record in
//! place (same id, new `updated_at`). With a retention cap, the backend evicts the
//! oldest-updated records past it in the same operation, so the cap holds after every tag.

use std::fmt;

use bdk_protocol::SessionId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::BoxFuture;
use crate::error::{Error, Result};

/// Most bytes of content one artifact may carry.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024 * 1024;

/// One artifact as stored and listed (`GET /v1/artifacts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRecord {
    /// `art_<suffix>`: stable across updates of the same key.
    pub id: String,
    pub kind: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The principal who owns it (who owned the tagging session).
    pub principal: String,
    /// The session that tagged it last, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// What tagged it: `tag_artifact` (the model) or `host` (host code).
    pub source: String,
    /// Set when the artifact has content to download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentInfo>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a download serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentInfo {
    /// The attachment's file name.
    pub file_name: String,
    pub content_type: String,
    pub size: u64,
}

/// A tag request, already checked by the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactTag {
    pub kind: String,
    pub key: String,
    pub title: Option<String>,
    pub data: Option<Value>,
    pub principal: String,
    pub session_id: Option<SessionId>,
    pub source: String,
    /// New content (replaces the old); `None` keeps what the record had.
    pub content: Option<(ContentInfo, Vec<u8>)>,
}

impl ArtifactTag {
    /// Refuses content over [`MAX_CONTENT_BYTES`] (every backend, before it writes anything).
    pub fn check_size(&self) -> Result<()> {
        match &self.content {
            Some((_, bytes)) if bytes.len() > MAX_CONTENT_BYTES => Err(Error::TooLarge {
                what: "artifact content",
                size: bytes.len() as u64,
                limit: MAX_CONTENT_BYTES as u64,
            }),
            _ => Ok(()),
        }
    }

    /// The upsert every backend makes: the record of this tag's key as it must be stored at
    /// `now`, given the record the key has (`existing`; `None` makes a new one with a fresh
    /// id). Given fields replace the old ones, absent ones keep them; `updated_at` never goes
    /// back. Returns the record, whether it is new, and the new content bytes to write (`None`:
    /// the old content stays).
    pub fn apply(
        self,
        existing: Option<ArtifactRecord>,
        now: DateTime<Utc>,
    ) -> (ArtifactRecord, bool, Option<Vec<u8>>) {
        let created = existing.is_none();
        let mut record = existing.unwrap_or_else(|| ArtifactRecord {
            id: new_artifact_id(),
            kind: self.kind.clone(),
            key: self.key.clone(),
            title: None,
            data: None,
            principal: self.principal.clone(),
            session_id: None,
            source: String::new(),
            content: None,
            created_at: now,
            updated_at: now,
        });
        record.title = self.title.or(record.title);
        record.data = self.data.or(record.data);
        record.session_id = self.session_id.or(record.session_id);
        record.source = self.source;
        record.updated_at = now.max(record.updated_at);
        let bytes = self.content.map(|(info, bytes)| {
            record.content = Some(info);
            bytes
        });
        (record, created, bytes)
    }
}

/// Which artifacts a listing returns. Newest-updated first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArtifactQuery {
    /// Only this principal's (`None`: every principal's).
    pub principal: Option<String>,
    pub kind: Option<String>,
    pub session_id: Option<SessionId>,
    pub limit: Option<usize>,
}

impl ArtifactQuery {
    /// Whether `record` passes the filters (not the limit).
    pub fn matches(&self, record: &ArtifactRecord) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == record.principal)
            && self.kind.as_ref().is_none_or(|k| *k == record.kind)
            && self.session_id.as_ref().is_none_or(|s| record.session_id.as_ref() == Some(s))
    }
}

/// What a tag did.
#[derive(Debug, Clone, PartialEq)]
pub struct Tagged {
    pub record: ArtifactRecord,
    /// Whether a new record was created (else an existing key was updated).
    pub created: bool,
    /// Ids evicted by the retention cap.
    pub evicted: Vec<String>,
}

/// The agent's artifacts. Ids are `art_` plus letters, digits, `_` and `-`; any other id is
/// simply not found.
pub trait ArtifactStore: Send + Sync + fmt::Debug {
    /// Creates or updates the record of `(principal, kind, key)`, then evicts the
    /// oldest-updated records while more than `max` remain (`None`: no cap).
    fn tag(&self, tag: ArtifactTag, max: Option<usize>) -> BoxFuture<'_, Result<Tagged>>;

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ArtifactRecord>>>;

    /// Matching records, newest-updated first, at most `query.limit`.
    fn list<'a>(&'a self, query: &'a ArtifactQuery) -> BoxFuture<'a, Result<Vec<ArtifactRecord>>>;

    /// The content bytes, or `None` when the artifact or its content does not exist.
    fn content<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>>;
}

/// Whether `id` is a well-formed artifact id (no path can be made of it).
pub fn is_artifact_id(id: &str) -> bool {
    id.strip_prefix("art_").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 120
            && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

/// A new artifact id: `art_` and a time-ordered random suffix.
pub fn new_artifact_id() -> String {
    let session = SessionId::generate();
    format!("art_{}", &session.as_str()["ses_".len()..])
}
