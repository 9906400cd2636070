//! Request and response bodies of the session HTTP API (`docs/http.md`), shared by the server
//! and by clients such as `bdk cost --url`. Field names are the reference's camelCase.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::ids::{CallId, SessionId, TurnId};

/// `POST /v1/session`. Unknown fields are refused (a typo such as `dryrun` must not start a
/// live session).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartSessionRequest {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Write tools are stubbed instead of run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Tools see the world as of this time (`time_args` bounds). An RFC 3339 instant with a
    /// timezone (`2025-01-31T12:00:00Z`), not in the future.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "rfc3339::option")]
    #[schemars(with = "Option<String>", extend("format" = "date-time"))]
    pub as_of: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Files written into the session workspace before the first turn: path (relative to the
    /// workspace) → content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace_files: BTreeMap<String, String>,
}

/// `POST /v1/session/:sessionId`. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionResponse {
    pub ok: bool,
    #[schemars(with = "String")]
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
    #[schemars(with = "Option<String>")]
    pub turn_id: Option<TurnId>,
}

/// `POST /v1/tools/:name`: a direct tool call. `sessionId` and `continuationToken` are mutually
/// exclusive; with neither, the call runs in a scratch workspace removed afterwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCallRequest {
    /// The tool's input (absent: `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `<channelId>:<key>` as `/v1/sessions` lists it, or a session's current `http:` token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
}

/// The answer to a direct tool call that ran: `isError` says whether the tool failed (the same
/// result the model would have read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResponse {
    pub ok: bool,
    pub tool_name: String,
    #[schemars(with = "String")]
    pub call_id: CallId,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
    /// The bound session's workspace could not be created, so this read ran in a scratch one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scratch_workspace: bool,
}

/// Every error: `{ok:false, error:"<code>", message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorResponse {
    pub ok: bool,
    pub error: String,
    #[serde(default)]
    pub message: String,
}

/// Instants given in request bodies: RFC 3339 with a timezone, and a message saying so.
mod rfc3339 {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer};

    pub fn option<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(deserializer)? else { return Ok(None) };
        DateTime::parse_from_rfc3339(&text).map(|t| Some(t.with_timezone(&Utc))).map_err(|_| {
            serde::de::Error::custom(format!(
                "asOf must be an RFC 3339 instant with a timezone, like 2025-01-31T12:00:00Z, not {text:?}"
            ))
        })
    }
}
