//! `SessionRecord`: the metadata kept in `session.json` (channel, mode, principal, token, and
//! the status a listing shows). Conversation state is not here: it is rebuilt from the event log.

use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One session's metadata. Fields this build does not know are kept in `extra` and written back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub id: SessionId,
    pub mode: SessionMode,
    pub channel: String,
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The current continuation token (rotated by the HTTP channel on every accepted follow-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The session's status as of `updated_at`, kept by its actor on every transition so a
    /// listing reads no log. `None` in records written before it existed (readers fall back to
    /// the log's last event). The log stays the truth: recovery rewrites a stale one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SessionStatus>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a session is doing: a turn is open (`running`), a chat session waits for a follow-up
/// (`waiting`), or a task session ended (`completed`, `failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Running,
    Waiting,
    Completed,
    Failed,
}

impl SessionStatus {
    /// The wire spelling: `running`, `waiting`, `completed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Waiting => "waiting",
            SessionStatus::Completed => "completed",
            SessionStatus::Failed => "failed",
        }
    }
}

impl SessionRecord {
    /// A record created now, with no title or token.
    pub fn new(id: SessionId, mode: SessionMode, channel: impl Into<String>, principal: impl Into<String>) -> Self {
        let now = bdk_protocol::event::timestamp_now();
        SessionRecord {
            id,
            mode,
            channel: channel.into(),
            principal: principal.into(),
            title: None,
            continuation_token: None,
            created_at: now,
            updated_at: now,
            dry_run: false,
            as_of: None,
            purpose: None,
            status: None,
            extra: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let json = r#"{"id":"ses_a","mode":"task","channel":"cron","principal":"app","createdAt":"2025-01-01T00:00:00Z","updatedAt":"2025-01-01T00:00:00Z","future":{"x":1}}"#;
        let record: SessionRecord = serde_json::from_str(json).unwrap();
        assert_eq!(record.mode, SessionMode::Task);
        assert!(!record.dry_run);
        assert_eq!(record.extra["future"], serde_json::json!({"x": 1}));
        let back = serde_json::to_value(&record).unwrap();
        assert_eq!(back["future"], serde_json::json!({"x": 1}));
        assert!(back.get("dryRun").is_none());
        assert_eq!(record.status, None);
        assert!(back.get("status").is_none());
    }

    #[test]
    fn status_round_trips_lowercase() {
        let mut record = SessionRecord::new(SessionId::generate(), SessionMode::Chat, "http", "p");
        record.status = Some(SessionStatus::Waiting);
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["status"], "waiting");
        let back: SessionRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back.status, Some(SessionStatus::Waiting));
    }
}
