//! The model's built-in reminder tools (`builtin_tools.reminders = true` in `agent.toml`):
//! `reminders_create`, `reminders_list` and `reminders_cancel`, each acting on the calling
//! session's conversation only. They are native tools registered on the agent's registry; the
//! registry is built before the engine, so they reach the [`Reminders`] through a slot filled
//! once the engine exists.

use std::sync::{Arc, OnceLock};

use bdk_project::model::Predicate;
use bdk_protocol::SessionId;
use bdk_tools::{NativeTool, ProjectToolsBuilder, ToolContext, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CreateReminder, Reminders};

/// Where the tools find the agent's reminders once they exist.
pub type ReminderSlot = Arc<OnceLock<Reminders>>;

/// Adds the three tools to `builder`.
pub fn register(builder: ProjectToolsBuilder, slot: &ReminderSlot) -> ProjectToolsBuilder {
    builder.native(CreateTool(slot.clone())).native(ListTool(slot.clone())).native(CancelTool(slot.clone()))
}

fn parts<'a>(slot: &'a ReminderSlot, ctx: &ToolContext) -> Result<(&'a Reminders, SessionId), ToolError> {
    let reminders = slot.get().ok_or_else(|| ToolError::new("reminders are not available on this host"))?;
    let session = ctx
        .session_id
        .clone()
        .ok_or_else(|| ToolError::new("reminders belong to a conversation; this call has none"))?;
    Ok((reminders, session))
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

struct CreateTool(ReminderSlot);

impl NativeTool for CreateTool {
    type Input = CreateReminder;

    fn name(&self) -> &str {
        "reminders_create"
    }

    fn description(&self) -> &str {
        "Arm a reminder that wakes this conversation later. Give exactly one of delay (\"2h\"), every \
         (\"30m\"), cron (5-field UTC) or at (RFC 3339), and a prompt (or a named handler with args). \
         Keep the prompt generic so you re-read live state when it fires; put the stop condition in until."
    }

    async fn call(&self, input: CreateReminder, ctx: ToolContext) -> Result<Value, ToolError> {
        let (reminders, session) = parts(&self.0, &ctx)?;
        let record = reminders.create(&session, input).await.map_err(|e| ToolError::new(e.to_string()))?;
        Ok(to_value(&record))
    }
}

/// No input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Nothing {}

struct ListTool(ReminderSlot);

impl NativeTool for ListTool {
    type Input = Nothing;

    fn name(&self) -> &str {
        "reminders_list"
    }

    fn description(&self) -> &str {
        "List this conversation's reminders: id, cadence, prompt, status and next due time."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, _input: Nothing, ctx: ToolContext) -> Result<Value, ToolError> {
        let (reminders, session) = parts(&self.0, &ctx)?;
        let list = reminders.list(Some(&session)).await.map_err(|e| ToolError::new(e.to_string()))?;
        Ok(json!({ "reminders": to_value(&list) }))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelInput {
    /// The reminder's id (`rem_...`).
    id: String,
}

struct CancelTool(ReminderSlot);

impl NativeTool for CancelTool {
    type Input = CancelInput;

    fn name(&self) -> &str {
        "reminders_cancel"
    }

    fn description(&self) -> &str {
        "Cancel one of this conversation's reminders by id, e.g. once its stop condition holds."
    }

    async fn call(&self, input: CancelInput, ctx: ToolContext) -> Result<Value, ToolError> {
        let (reminders, session) = parts(&self.0, &ctx)?;
        let record = reminders.cancel(&input.id, Some(&session)).await.map_err(|e| ToolError::new(e.to_string()))?;
        Ok(to_value(&record))
    }
}
