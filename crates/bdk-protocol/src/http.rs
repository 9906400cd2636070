//! Request and response bodies of the session HTTP API (`docs/http.md`), shared by the server
//! and by clients such as `bdk cost --url`. Field names are the reference's camelCase.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{SessionId, TurnId};

/// `POST /v1/session`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartSessionRequest {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Write tools are stubbed instead of run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Tools see the world as of this time (`time_args` bounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Files written into the session workspace before the first turn: path (relative to the
    /// workspace) → content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace_files: BTreeMap<String, String>,
}

/// `POST /v1/session/:sessionId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowUpRequest {
    pub continuation_token: String,
    pub message: String,
    /// `preempt` (default) or `coalesce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// Files written into the session workspace before the turn that runs this message.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace_files: BTreeMap<String, String>,
}

/// The answer to an accepted start or follow-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionResponse {
    pub ok: bool,
    pub session_id: SessionId,
    /// The credential for the next follow-up (rotated on every accepted one).
    pub continuation_token: String,
    /// Deep link into the playground (absent under `--no-playground`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playground_url: Option<String>,
    /// The session's recorded events.
    pub trace_url: String,
    /// The turn that runs the message (absent when coalesced into a running turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<TurnId>,
}

/// Every error: `{ok:false, error:"<code>", message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub ok: bool,
    pub error: String,
    #[serde(default)]
    pub message: String,
}
