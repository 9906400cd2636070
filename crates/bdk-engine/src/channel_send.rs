//! Handing a message into a channel: start a chat session on it, or, when a session holds the
//! token `<channel>:<key>`, follow it up under the channel's admission policy. One lock makes
//! find-or-create atomic, so two deliveries with one key make one session. Used by the host
//! `send` service, the server's channel routes and `receive` schedules; it decides nothing about
//! HTTP, signatures or delivery back to a surface.

use std::sync::Arc;

use bdk_protocol::event::SessionMode;
use bdk_tools::host::SendOutcome;

use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::types::{Admission, FollowUp, Principal, StartSession};

/// One message for a channel.
#[derive(Debug, Clone)]
pub struct ChannelSend {
    pub channel: String,
    pub message: String,
    /// Who owns a session this creates, and who a follow-up must come from.
    pub principal: Principal,
    /// The conversation key: the token is `<channel>:<key>`. `None` always starts a session.
    pub continuation_key: Option<String>,
    /// The title of a session this creates.
    pub title: Option<String>,
    /// What the message does to a busy session it continues.
    pub admission: Admission,
    /// Whether a session this creates is a dry run.
    pub dry_run: bool,
    /// The session's `purpose` (`None` for ordinary channel traffic).
    pub purpose: Option<String>,
}

impl ChannelSend {
    /// A message from `principal` into `channel` (coalesced into a busy session, no title).
    pub fn new(channel: impl Into<String>, message: impl Into<String>, principal: Principal) -> Self {
        Self {
            channel: channel.into(),
            message: message.into(),
            principal,
            continuation_key: None,
            title: None,
            admission: Admission::Coalesce,
            dry_run: false,
            purpose: None,
        }
    }
}

pub(crate) async fn send(core: &Arc<Core>, request: ChannelSend) -> Result<SendOutcome> {
    if request.message.trim().is_empty() {
        return Err(EngineError::InvalidRequest("the message is empty".into()));
    }
    let start = |continuation_key: Option<String>| StartSession {
        message: request.message.clone(),
        principal: request.principal.clone(),
        channel: request.channel.clone(),
        continuation_key,
        mode: SessionMode::Chat,
        title: request.title.clone(),
        dry_run: request.dry_run,
        as_of: None,
        purpose: request.purpose.clone(),
        workspace_files: Vec::new(),
    };
    let Some(key) = request.continuation_key.clone() else {
        let started = core.start_session(start(None)).await?;
        return Ok(SendOutcome {
            session_id: started.session_id,
            continuation_token: started.continuation_token,
            turn_id: Some(started.turn_id),
            created: true,
        });
    };
    let token = crate::tokens::channel_token(&request.channel, &key)?;
    let _guard = core.host.send_lock.lock().await;
    match core.direct_tokens.find(core, &token).await? {
        Some(record) => {
            let follow_up = FollowUp {
                message: request.message.clone(),
                principal: request.principal.clone(),
                continuation_token: token,
                admission: request.admission,
                workspace_files: Vec::new(),
            };
            let accepted = core.follow_up(&record.id, follow_up).await?;
            Ok(SendOutcome {
                session_id: record.id,
                continuation_token: accepted.continuation_token,
                turn_id: accepted.turn_id,
                created: false,
            })
        }
        None => {
            let started = core.start_session(start(Some(key))).await?;
            Ok(SendOutcome {
                session_id: started.session_id,
                continuation_token: started.continuation_token,
                turn_id: Some(started.turn_id),
                created: true,
            })
        }
    }
}
