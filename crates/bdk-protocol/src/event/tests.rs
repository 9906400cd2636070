//! Guards the NDJSON line format: every variant round-trips, the enum covers exactly
//! `EVENT_TYPES`, the envelope keeps its field order, and unknown types survive a read.

use chrono::TimeZone;
use serde_json::json;

use super::*;
use crate::events::EVENT_TYPES;
use crate::ids::CallId;

fn call(id: &str) -> CallId {
    CallId::parse(id).unwrap()
}

fn usage() -> Usage {
    Usage { input_tokens: 1200, output_tokens: 340, cached_input_tokens: 1000, reasoning_tokens: 80 }
}

/// One populated sample per known type, in vocabulary order.
fn samples() -> Vec<EventData> {
    vec![
        EventData::SessionStarted(SessionStarted {
            mode: SessionMode::Chat,
            channel: "http".into(),
            principal: "local".into(),
            title: Some("Weather".into()),
            dry_run: Some(true),
            as_of: Some(Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()),
            purpose: Some("eval".into()),
        }),
        EventData::AbAssigned(AbAssigned { experiment: "tone".into(), arm: "b".into() }),
        EventData::SessionWaiting(SessionWaiting {}),
        EventData::SessionCompleted(SessionCompleted { result: Some("done".into()) }),
        EventData::SessionFailed(SessionFailed { message: "no reply".into(), error: Some(FailureCode::MaxSteps) }),
        EventData::AgentBound(AgentBound { agent_id: "bc-1".into(), url: None, model: Some("grok-4.5".into()) }),
        EventData::MessageReceived(MessageReceived { text: "hi".into(), principal: None }),
        EventData::TurnQueued(TurnQueued { position: 2 }),
        EventData::TurnStarted(TurnStarted { model: Some("grok-4.5".into()) }),
        EventData::TurnCompleted(TurnCompleted {
            usage: usage(),
            estimated_cost_usd: Some(0.00123),
            model: Some("grok-4.5".into()),
            result: Some("It is sunny.".into()),
            duration_ms: Some(950),
        }),
        EventData::TurnFailed(TurnFailed {
            status: TurnFailStatus::Cancelled,
            message: "turn interrupted".into(),
            error: Some(FailureCode::Cancelled),
            usage: None,
            estimated_cost_usd: None,
        }),
        EventData::StepStarted(StepStarted { step: 0 }),
        EventData::StepCompleted(StepCompleted {
            step: 0,
            duration_ms: 420,
            finish_reason: Some("tool_calls".into()),
            usage: Some(usage()),
        }),
        EventData::ReasoningAppended(TextDelta { delta: "Thinking".into() }),
        EventData::ReasoningCompleted(TextCompleted { text: "Thinking about weather".into() }),
        EventData::MessageAppended(TextDelta { delta: "It is".into() }),
        EventData::MessageCompleted(TextCompleted { text: "It is sunny.".into() }),
        EventData::ActionsRequested(ActionsRequested {
            calls: vec![ActionCall {
                call_id: call("tool_get_weather_01"),
                tool_name: "get_weather".into(),
                input: json!({"city": "Paris", "days": [1, 2]}),
            }],
            direct: Some(true),
        }),
        EventData::ActionResult(ActionResult {
            call_id: call("tool_get_weather_01"),
            tool_name: "get_weather".into(),
            is_error: false,
            result: json!({"tempC": 21.5}),
            duration_ms: 12,
            stubbed: Some(false),
            direct: Some(true),
        }),
        EventData::ApprovalRequested(ApprovalRequested {
            call_id: call("tool_promote_02"),
            tool_name: "promote".into(),
            input: json!({"environment": "production"}),
        }),
        EventData::ApprovalResolved(ApprovalResolved {
            call_id: call("tool_promote_02"),
            tool_name: "promote".into(),
            decision: ApprovalDecision::Deny,
            principal: Some("alice".into()),
            reason: None,
        }),
        EventData::SubagentCalled(SubagentCalled {
            call_id: call("tool_task_03"),
            subagent: "researcher".into(),
            prompt: "Find records".into(),
            child_turn_id: Some(TurnId::parse("turn_child").unwrap()),
            child_session_id: None,
        }),
        EventData::SubagentCompleted(SubagentCompleted {
            call_id: call("tool_task_03"),
            subagent: "researcher".into(),
            is_error: true,
            result: "cancelled".into(),
            duration_ms: 5,
            usage: None,
        }),
        EventData::ArtifactTagged(ArtifactTagged {
            artifact_id: "art_1".into(),
            kind: "report".into(),
            key: "pr-42".into(),
            title: Some("Review".into()),
            source: Some("tag_artifact".into()),
        }),
        EventData::ConversationCompacted(ConversationCompacted {
            summary: "The user asked about the weather twice.".into(),
            replaced_items: 4,
            through_index: 17,
            estimated_tokens: 1700,
            context_window: 2000,
            reason: "threshold".into(),
            usage: Some(usage()),
        }),
    ]
}

fn event(index: u64, data: EventData) -> Event {
    Event {
        index,
        session_id: SessionId::parse("ses_test").unwrap(),
        turn_id: index.is_multiple_of(2).then(|| TurnId::parse("turn_t1").unwrap()),
        at: Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::milliseconds(678),
        data,
    }
}

#[test]
fn the_enum_covers_exactly_the_vocabulary() {
    assert_eq!(EventData::KNOWN_TYPES, EVENT_TYPES);
    let samples = samples();
    let sample_types: Vec<&str> = samples.iter().map(|d| d.event_type()).collect();
    assert_eq!(sample_types, EVENT_TYPES, "one round-trip sample per type, in order");
}

#[test]
fn every_variant_round_trips_as_one_ndjson_line() {
    for (index, data) in samples().into_iter().enumerate() {
        let original = event(index as u64, data);
        let line = serde_json::to_string(&original).unwrap();
        assert!(!line.contains('\n'), "{line}");
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, original, "{line}");
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
        // The typed data matches what `data_value` reports.
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["data"], original.data.data_value().unwrap());
        assert_eq!(value["type"], original.event_type());
    }
}

#[test]
fn envelope_fields_keep_the_reference_order() {
    let line = serde_json::to_string(&event(0, samples().remove(9))).unwrap();
    assert_eq!(
        line,
        r#"{"type":"turn.completed","index":0,"sessionId":"ses_test","turnId":"turn_t1","at":"2025-01-02T03:04:05.678Z","data":{"usage":{"inputTokens":1200,"outputTokens":340,"cachedInputTokens":1000,"reasoningTokens":80},"estimatedCostUsd":0.00123,"model":"grok-4.5","result":"It is sunny.","durationMs":950}}"#
    );
    let without_turn = serde_json::to_string(&event(1, EventData::SessionWaiting(SessionWaiting {}))).unwrap();
    assert_eq!(
        without_turn,
        r#"{"type":"session.waiting","index":1,"sessionId":"ses_test","at":"2025-01-02T03:04:05.678Z","data":{}}"#
    );
}

#[test]
fn unknown_types_are_kept_verbatim() {
    let line = r#"{"type":"future.thing","index":7,"sessionId":"ses_x","at":"2025-01-02T03:04:05.000Z","data":{"a":[1,{"b":null}]}}"#;
    let event: Event = serde_json::from_str(line).unwrap();
    assert_eq!(event.event_type(), "future.thing");
    assert_eq!(
        event.data,
        EventData::Other { event_type: "future.thing".into(), data: json!({"a": [1, {"b": null}]}) }
    );
    assert_eq!(serde_json::to_string(&event).unwrap(), line);
}

#[test]
fn readers_tolerate_missing_data_extra_fields_and_offsets() {
    let line = r#"{"type":"session.waiting","index":3,"sessionId":"ses_x","turnId":null,"at":"2025-01-02T05:04:05+02:00","extra":1}"#;
    let event: Event = serde_json::from_str(line).unwrap();
    assert_eq!(event.data, EventData::SessionWaiting(SessionWaiting {}));
    assert_eq!(event.turn_id, None);
    assert_eq!(event.at, Utc.with_ymd_and_hms(2025, 1, 2, 3, 4, 5).unwrap());

    let newer = r#"{"type":"turn.queued","index":0,"sessionId":"ses_x","at":"2025-01-02T03:04:05Z","data":{"position":1,"addedLater":true}}"#;
    let event: Event = serde_json::from_str(newer).unwrap();
    assert_eq!(event.data, EventData::TurnQueued(TurnQueued { position: 1 }));
}

#[test]
fn known_types_with_bad_data_are_errors() {
    let line = r#"{"type":"turn.failed","index":0,"sessionId":"ses_x","at":"2025-01-02T03:04:05Z","data":{"status":"exploded","message":"x"}}"#;
    let err = serde_json::from_str::<Event>(line).unwrap_err().to_string();
    assert!(err.contains("invalid `turn.failed` data"), "{err}");
    let bad_id = r#"{"type":"session.waiting","index":0,"sessionId":"ses_../x","at":"2025-01-02T03:04:05Z"}"#;
    assert!(serde_json::from_str::<Event>(bad_id).is_err());
}

#[test]
fn timestamps_are_millisecond_precise() {
    let now = timestamp_now();
    assert_eq!(now.timestamp_subsec_nanos() % 1_000_000, 0);
}

/// The envelope's `at` is what chrono's RFC 3339 writer makes of it, milliseconds and `Z`,
/// for every day of the 4-digit years, any time of day, and the edges chrono alone can write.
#[test]
fn at_is_written_as_chrono_writes_it() {
    let chrono = |at: &DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Millis, true);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let secs = (next() % 253_402_300_800) as i64; // 1970 to the end of 9999
        let at = DateTime::from_timestamp(secs, (next() % 1_000_000_000) as u32).unwrap();
        let mut buf = [0u8; 24];
        assert_eq!(super::millis_utc(&at, &mut buf), Some(chrono(&at).as_str()), "{at:?}");
    }
    let edges = [
        Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap() + chrono::Duration::milliseconds(999),
        Utc.with_ymd_and_hms(2024, 2, 29, 12, 0, 0).unwrap(),
    ];
    for at in edges {
        let mut buf = [0u8; 24];
        assert_eq!(super::millis_utc(&at, &mut buf), Some(chrono(&at).as_str()));
    }
    // What the fixed shape cannot hold goes to chrono, in the envelope too.
    let outside = [
        Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(-1, 1, 1, 0, 0, 0).unwrap(),
        DateTime::from_timestamp(1_483_228_799, 1_500_000_000).unwrap(), // a leap second
    ];
    for at in outside {
        let mut buf = [0u8; 24];
        assert_eq!(super::millis_utc(&at, &mut buf), None, "{at:?}");
        let event =
            Event { index: 0, session_id: crate::SessionId::generate(), turn_id: None, at, data: samples().remove(0) };
        let line = serde_json::to_value(&event).unwrap();
        assert_eq!(line["at"], json!(chrono(&at)));
    }
}
