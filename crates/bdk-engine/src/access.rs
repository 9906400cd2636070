//! Who may touch a session, and how: the owner check and the followability check every
//! per-session request makes. Low in the crate: it knows records, principals and errors only.

use bdk_protocol::event::SessionMode;
use bdk_store::SessionRecord;

use crate::error::{EngineError, Result};
use crate::types::Principal;

pub(crate) fn check_owner(record: &SessionRecord, principal: &Principal) -> Result<()> {
    if record.principal == principal.as_str() { Ok(()) } else { Err(EngineError::Forbidden(record.id.clone())) }
}

pub(crate) fn check_followable(record: &SessionRecord) -> Result<()> {
    match record.mode {
        SessionMode::Chat => Ok(()),
        SessionMode::Task => Err(EngineError::NotFollowable(record.id.clone())),
    }
}
