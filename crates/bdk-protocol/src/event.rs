//! The session event: the envelope `{type, index, sessionId, turnId?, at, data}` and
//! [`EventData`], one enum variant per event type, which together (de)serialize as exactly one
//! NDJSON line of `events.ndjson` and of the stream route. Storage and fan-out live elsewhere.
//!
//! `type` and `data` are read and written by hand (not by a serde enum attribute) so that the
//! envelope keeps the reference's field order and an unknown `type` from a newer writer lands in
//! [`EventData::Other`] with its `data` kept verbatim instead of failing the whole log.

mod failure;
mod payloads;
#[cfg(test)]
mod tests;

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::ids::{SessionId, TurnId};

pub use payloads::*;

/// One event of one session. `index` is dense from 0 within the session and assigned by the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub index: u64,
    pub session_id: SessionId,
    pub turn_id: Option<TurnId>,
    /// When the event was recorded. Millisecond precision on the wire.
    pub at: DateTime<Utc>,
    pub data: EventData,
}

impl Event {
    /// The dotted type name, e.g. `turn.completed`.
    pub fn event_type(&self) -> &str {
        self.data.event_type()
    }
}

/// The current time at the precision `at` is written with, so an event read back from a log
/// equals the event that was appended.
pub fn timestamp_now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// `at` as `to_rfc3339_opts(SecondsFormat::Millis, true)` writes it
/// (`2026-12-03T07:26:19.401Z`), into `buf` without chrono's general formatter (it runs for
/// every event sent). `None` for what that fixed shape cannot hold: a year outside 0–9999, a
/// leap second.
fn millis_utc<'b>(at: &DateTime<Utc>, buf: &'b mut [u8; 24]) -> Option<&'b str> {
    use chrono::{Datelike, Timelike};
    let (date, time) = (at.date_naive(), at.time());
    let year = u32::try_from(date.year()).ok().filter(|year| *year <= 9999)?;
    if time.nanosecond() >= 1_000_000_000 {
        return None;
    }
    let mut put = |at: usize, value: u32, digits: usize| {
        let mut value = value;
        for i in (at..at + digits).rev() {
            buf[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year, 4);
    put(5, date.month(), 2);
    put(8, date.day(), 2);
    put(11, time.hour(), 2);
    put(14, time.minute(), 2);
    put(17, time.second(), 2);
    put(20, time.nanosecond() / 1_000_000, 3);
    for (i, c) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (23, b'Z')] {
        buf[i] = c;
    }
    std::str::from_utf8(buf).ok()
}

/// Declares [`EventData`] from the vocabulary table: type name, variant, payload.
macro_rules! vocabulary {
    ($($name:literal => $variant:ident($payload:ty),)*) => {
        /// The `type` and `data` of an event: one variant per type in the vocabulary.
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventData {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant($payload),
            )*
            /// A type this build does not know, kept verbatim so newer logs stay readable.
            /// Never construct it with a known type name: that would read back as the typed variant.
            Other { event_type: String, data: Value },
        }

        impl EventData {
            /// The type names with a typed variant, in declaration order.
            pub const KNOWN_TYPES: &'static [&'static str] = &[$($name),*];

            /// The dotted type name.
            pub fn event_type(&self) -> &str {
                match self {
                    $(Self::$variant(_) => $name,)*
                    Self::Other { event_type, .. } => event_type,
                }
            }

            /// Builds the typed variant for `event_type` from its `data`. A missing or null
            /// `data` reads as `{}`. Unknown types become [`EventData::Other`].
            pub fn from_parts(event_type: String, data: Value) -> Result<Self, serde_json::Error> {
                match event_type.as_str() {
                    $($name => serde_json::from_value(object_or_empty(data))
                        .map(Self::$variant)
                        .map_err(|e| invalid_data($name, &e)),)*
                    _ => Ok(Self::Other { event_type, data }),
                }
            }

            /// The `data` value as JSON.
            pub fn data_value(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(Self::$variant(payload) => serde_json::to_value(payload),)*
                    Self::Other { data, .. } => Ok(data.clone()),
                }
            }

            fn serialize_data<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                match self {
                    $(Self::$variant(payload) => map.serialize_entry("data", payload),)*
                    Self::Other { data, .. } => map.serialize_entry("data", data),
                }
            }
        }
    };
}

vocabulary! {
    "session.started" => SessionStarted(SessionStarted),
    "ab.assigned" => AbAssigned(AbAssigned),
    "session.waiting" => SessionWaiting(SessionWaiting),
    "session.completed" => SessionCompleted(SessionCompleted),
    "session.failed" => SessionFailed(SessionFailed),
    "agent.bound" => AgentBound(AgentBound),
    "message.received" => MessageReceived(MessageReceived),
    "turn.queued" => TurnQueued(TurnQueued),
    "turn.started" => TurnStarted(TurnStarted),
    "turn.completed" => TurnCompleted(TurnCompleted),
    "turn.failed" => TurnFailed(TurnFailed),
    "step.started" => StepStarted(StepStarted),
    "step.completed" => StepCompleted(StepCompleted),
    "reasoning.appended" => ReasoningAppended(TextDelta),
    "reasoning.completed" => ReasoningCompleted(TextCompleted),
    "message.appended" => MessageAppended(TextDelta),
    "message.completed" => MessageCompleted(TextCompleted),
    "actions.requested" => ActionsRequested(ActionsRequested),
    "action.result" => ActionResult(ActionResult),
    "action.approval_requested" => ApprovalRequested(ApprovalRequested),
    "action.approval_resolved" => ApprovalResolved(ApprovalResolved),
    "subagent.called" => SubagentCalled(SubagentCalled),
    "subagent.completed" => SubagentCompleted(SubagentCompleted),
    "artifact.tagged" => ArtifactTagged(ArtifactTagged),
    "conversation.compacted" => ConversationCompacted(ConversationCompacted),
}

fn invalid_data(event_type: &str, error: &serde_json::Error) -> serde_json::Error {
    serde::de::Error::custom(format_args!("invalid `{event_type}` data: {error}"))
}

fn object_or_empty(data: Value) -> Value {
    if data.is_null() { Value::Object(serde_json::Map::new()) } else { data }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = if self.turn_id.is_some() { 6 } else { 5 };
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("type", self.data.event_type())?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("sessionId", &self.session_id)?;
        if let Some(turn_id) = &self.turn_id {
            map.serialize_entry("turnId", turn_id)?;
        }
        let mut at = [0u8; 24];
        match millis_utc(&self.at, &mut at) {
            Some(text) => map.serialize_entry("at", text)?,
            None => map.serialize_entry("at", &self.at.to_rfc3339_opts(SecondsFormat::Millis, true))?,
        }
        self.data.serialize_data(&mut map)?;
        map.end()
    }
}

/// The envelope as it appears on the wire, before `data` is typed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEvent {
    #[serde(rename = "type")]
    event_type: String,
    index: u64,
    session_id: SessionId,
    #[serde(default)]
    turn_id: Option<TurnId>,
    at: DateTime<Utc>,
    #[serde(default)]
    data: Value,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireEvent::deserialize(deserializer)?;
        let data = EventData::from_parts(wire.event_type, wire.data).map_err(serde::de::Error::custom)?;
        Ok(Event { index: wire.index, session_id: wire.session_id, turn_id: wire.turn_id, at: wire.at, data })
    }
}
