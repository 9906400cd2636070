//! The session event vocabulary: every `type` an NDJSON event line can carry, spelled exactly
//! as the reference spells it. Hooks subscribe to these names (or `*`).

/// Every event type, grouped by phase in the order the reference lists them.
pub const EVENT_TYPES: &[&str] = &[
    // Session
    "session.started",
    "ab.assigned",
    "session.waiting",
    "session.completed",
    "session.failed",
    // Agent
    "agent.bound",
    // Input
    "message.received",
    // Turn
    "turn.queued",
    "turn.started",
    "turn.completed",
    "turn.failed",
    // Steps
    "step.started",
    "step.completed",
    // Reasoning
    "reasoning.appended",
    "reasoning.completed",
    // Reply
    "message.appended",
    "message.completed",
    // Tools
    "actions.requested",
    "action.result",
    // Approvals
    "action.approval_requested",
    "action.approval_resolved",
    // Subagents
    "subagent.called",
    "subagent.completed",
    // Artifacts
    "artifact.tagged",
    // Conversation (BDK's own: long conversations are compacted)
    "conversation.compacted",
];

/// The wildcard a hook uses to receive every event.
pub const ALL_EVENTS: &str = "*";

/// Whether `name` is an event type or the wildcard.
pub fn is_known_event(name: &str) -> bool {
    name == ALL_EVENTS || EVENT_TYPES.contains(&name)
}
