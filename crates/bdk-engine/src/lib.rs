//! The session engine: one actor per live session, the turn loop against a model provider and a
//! tool registry, admission (preempt / coalesce), `max_running_turns`, continuation tokens,
//! ownership, and recovery after a restart. Everything that happens is an event appended to the
//! session's log before anyone is told; the conversation is rebuilt from that log.
//!
//! The engine holds its providers, tools and stores as trait objects and never names a concrete
//! one. Servers and the CLI drive it through [`Engine`].
//!
//! Cancellation is a tree of `CancellationToken`s: engine (drain) → session (actor) → turn
//! (stop, preempt) → model call and each tool call.

mod ab;
mod accepting;
mod access;
mod actor;
mod admission;
mod api;
mod approvals;
pub mod artifacts;
mod capabilities;
mod channel_send;
pub mod clock;
mod compaction;
mod conversation;
mod cost;
mod defs;
mod direct;
mod dispatch;
mod emit;
mod engine;
mod error;
mod failure;
mod hooks;
mod host;
mod joined;
mod local_cwd;
mod recovery;
pub mod reminders;
mod remote;
mod result_gate;
mod resume;
pub mod schedules;
mod setup;
mod skills;
mod status;
mod store_health;
pub mod stored_text;
mod stream;
mod subagents;
mod telemetry;
mod timed_command;
pub use timed_command::TimedCommand as HostCommand;
mod timed_error;
mod tokens;
mod trajectory;
mod turn;
mod turn_log;
mod types;
mod workspace;

pub use ab::{AbReport, ArmReport, Assignment, ExperimentReport};
pub use api::*;
pub use approvals::{DENIED, EXPIRED, PendingApproval};
pub use capabilities::{AbArmSpec, AbSpec, ArtifactKindSpec, ArtifactsSpec, DEFAULT_ARTIFACTS_MAX, ResultGateSpec};
pub use capabilities::{Capabilities, CompactionSpec, HookSinkSpec, HookSpec, SkillSpec, SubagentModel, SubagentSpec};
pub use channel_send::ChannelSend;
pub use cost::cost_report;
pub use defs::Definitions;
pub use direct::{DirectCall, DirectOutcome};
pub use error::{EngineError, Result};
pub use hooks::HookStatus;
pub use host::{HostAuthority, HostScope, MAX_CALL_DEPTH};
pub use recovery::RESTARTED;
pub use resume::INTERRUPTED_BY_RESTART;
pub use setup::{DEFAULT_IDLE_TIMEOUT, capabilities, model_input, model_layer};
pub use store_health::{PROBE_EVERY as STORE_PROBE_EVERY, StoreStatus};
pub use subagents::NESTED as NESTED_TASK;
pub use timed_error::TimedError;
pub use trajectory::{Trajectory, TrajectoryCall};
pub use turn::{INTERRUPTED, SHUTTING_DOWN};
