//! Reminders: runtime wakes bound to one conversation. This module owns creating, listing and
//! cancelling them, when each is due (the reminder clock) and firing one; cadence arithmetic is
//! `cadence.rs`, the model's `reminders_*` tools are `tools.rs`. It depends on the engine core
//! and the timed-work store; the core knows nothing of it.
//!
//! A prompt reminder wakes its session with a follow-up carrying the prompt (and its `until`
//! condition, which the model enforces by cancelling). A named-handler reminder runs
//! `reminders/<name>.toml`'s command with its JSON args; the handler wakes the session only when
//! it answers `{"followup": "..."}`, and ends the reminder with `{"action": "stop"}`.
//! Reminders are durable records in the [`TimedStore`], so they stay armed across restarts; each
//! due time is claimed once before it fires, and a cancelled reminder is never fired.

mod cadence;
pub mod tools;

use std::sync::Arc;

use bdk_project::model::ReminderDef;
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use bdk_store::{FiringRecord, FiringStatus, ReminderRecord, TimedKind, TimedStore};
use bdk_tools::ReminderCaller;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;

pub use cadence::{Cadence, MIN_EVERY};

use crate::api::Engine;
use crate::clock::Clock;
use crate::timed_command::{self, TimedCommand};
use crate::timed_error::TimedError;
use crate::types::{Admission, FollowUp, Principal};

/// `createReminder`'s input: exactly one of `delay`, `every`, `cron`, `at`, and exactly one of
/// `prompt` and `handler`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateReminder {
    /// A short label (e.g. "ci_recheck").
    #[serde(default)]
    pub purpose: Option<String>,
    /// Fire once after this long ("90s", "2h").
    #[serde(default)]
    pub delay: Option<String>,
    /// Fire repeatedly at this interval ("30m"; at least one second).
    #[serde(default)]
    pub every: Option<String>,
    /// Fire on this 5-field UTC cron expression.
    #[serde(default)]
    pub cron: Option<String>,
    /// Fire once at this RFC 3339 time (in the future).
    #[serde(default)]
    pub at: Option<String>,
    /// The message that wakes the conversation.
    #[serde(default)]
    pub prompt: Option<String>,
    /// When the reminder should stop; the model cancels it once this holds.
    #[serde(default)]
    pub until: Option<String>,
    /// A named handler (`reminders/<name>.toml`) to run instead of a prompt.
    #[serde(default)]
    pub handler: Option<String>,
    /// JSON args for the handler.
    #[serde(default)]
    pub args: Value,
    /// Host code bound to no session (a schedule's `run`) names the conversation to arm it on:
    /// its continuation token (`<channel>:<key>`, as `send` answers). The caller's principal
    /// must own that conversation. Not for calls bound to a session, nor the model's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub continuation_token: Option<String>,
}

/// What started a reminder firing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReminderTrigger {
    /// The reminder clock, at its due time.
    Due,
    /// `POST /v1/dev/reminders/:id`: fire now, leaving the cadence as it was.
    Dev,
}

#[derive(Debug)]
struct Inner {
    engine: Engine,
    store: Arc<dyn TimedStore>,
    clock: Arc<dyn Clock>,
    handlers: Vec<ReminderDef>,
    /// Serializes firing, cancelling and creating, so a cancel never races a firing.
    lock: Mutex<()>,
    wake: Notify,
    cancel: CancellationToken,
}

/// One agent's reminders. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Reminders {
    inner: Arc<Inner>,
}

impl Reminders {
    pub fn new(engine: Engine, store: Arc<dyn TimedStore>, clock: Arc<dyn Clock>, handlers: &[ReminderDef]) -> Self {
        // A refused write shows in `/v1/health` like a refused event append.
        let store = engine.core().store_health.timed(store);
        let inner = Inner {
            engine,
            store,
            clock,
            handlers: handlers.to_vec(),
            lock: Mutex::new(()),
            wake: Notify::new(),
            cancel: CancellationToken::new(),
        };
        let reminders = Self { inner: Arc::new(inner) };
        // The host services of this engine's tool calls reach these reminders (the latest
        // created, should there be several).
        let access: Arc<dyn bdk_tools::ReminderAccess> = Arc::new(Access(Arc::downgrade(&reminders.inner)));
        *reminders.inner.engine.core().reminders.lock().unwrap_or_else(|p| p.into_inner()) = Some(access);
        reminders
    }

    /// Arms a reminder for host code bound to no session that acts as `principal`: on the
    /// conversation whose continuation token `request.continuation_token` is, which `principal`
    /// must own (another's is `forbidden`, none is `session_not_found`).
    pub async fn create_for(&self, principal: &str, mut request: CreateReminder) -> Result<ReminderRecord, TimedError> {
        let Some(token) = request.continuation_token.take() else {
            return Err(TimedError::invalid(
                "invalid_request",
                "this call has no session: name the conversation with `continuationToken` (`<channel>:<key>`)",
            ));
        };
        if crate::tokens::split(&token).is_none() {
            return Err(crate::EngineError::InvalidContinuationToken(
                "a continuation token is `<channelId>:<key>` (as /v1/sessions lists it)".into(),
            )
            .into());
        }
        let core = self.inner.engine.core();
        let Some(record) = core.direct_tokens.find(core, &token).await? else {
            return Err(TimedError::UnknownConversation(token));
        };
        if record.principal != principal {
            return Err(crate::EngineError::Forbidden(record.id).into());
        }
        self.create(&record.id, request).await
    }

    /// The reminders of every conversation `principal` owns, oldest first.
    pub async fn list_for(&self, principal: &str) -> Result<Vec<ReminderRecord>, TimedError> {
        let _guard = self.inner.lock.lock().await;
        let all = self.inner.store.reminders().await?;
        Ok(all.into_iter().filter(|r| r.principal == principal).collect())
    }

    /// Cancels `id` when it belongs to a conversation `principal` owns.
    pub async fn cancel_for(&self, id: &str, principal: &str) -> Result<ReminderRecord, TimedError> {
        let _guard = self.inner.lock.lock().await;
        match self.inner.store.reminder(id).await? {
            Some(record) if record.principal == principal => self.cancel_locked(record).await,
            _ => Err(TimedError::UnknownReminder(id.to_owned())),
        }
    }

    /// Arms a reminder on `session`'s conversation.
    pub async fn create(&self, session: &SessionId, request: CreateReminder) -> Result<ReminderRecord, TimedError> {
        let inner = &self.inner;
        if request.continuation_token.is_some() {
            return Err(TimedError::invalid(
                "invalid_request",
                "`continuationToken` is only for host code bound to no session; this reminder is armed on the calling conversation",
            ));
        }
        let now = inner.clock.now();
        let bad = |message: &str| TimedError::invalid("invalid_reminder", message);
        let cadences: Vec<(&str, &String)> =
            [("delay", &request.delay), ("every", &request.every), ("cron", &request.cron), ("at", &request.at)]
                .into_iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
                .collect();
        let [(kind, value)] = cadences[..] else {
            return Err(bad("give exactly one of `delay`, `every`, `cron` and `at`"));
        };
        let cadence = Cadence::parse(kind, value, now)?;
        let prompt = request.prompt.filter(|p| !p.trim().is_empty());
        match (&prompt, &request.handler) {
            (Some(_), None) => {}
            (None, Some(name)) => {
                if !inner.handlers.iter().any(|h| &h.name == name) {
                    let known: Vec<&str> = inner.handlers.iter().map(|h| h.name.as_str()).collect();
                    return Err(TimedError::invalid(
                        "unknown_handler",
                        format!("no reminder handler `{name}` (reminders/<name>.toml); known: [{}]", known.join(", ")),
                    ));
                }
            }
            _ => return Err(bad("give exactly one of `prompt` (non-empty) and `handler`")),
        }
        let core = inner.engine.core();
        let record = core.stores.sessions.get(session).await?;
        let record = record.ok_or_else(|| TimedError::Engine(crate::EngineError::SessionNotFound(session.clone())))?;
        if record.mode == SessionMode::Task {
            return Err(bad("a task session takes no follow-ups, so a reminder cannot wake it"));
        }
        let id = format!("rem_{}", &SessionId::generate().as_str()[SessionId::PREFIX.len()..]);
        let reminder = ReminderRecord {
            id,
            session_id: session.clone(),
            continuation_token: record.continuation_token.clone().filter(|t| !t.starts_with("http:")),
            principal: record.principal.clone(),
            purpose: request.purpose,
            cadence: kind.to_owned(),
            cadence_value: value.clone(),
            prompt,
            until: request.until,
            handler: request.handler,
            args: request.args,
            status: "active".into(),
            next_due_at: cadence.first(now),
            created_at: now,
            fired: 0,
        };
        let _guard = inner.lock.lock().await;
        inner.store.put_reminder(reminder.clone()).await?;
        inner.wake.notify_one();
        Ok(reminder)
    }

    /// Reminders, oldest first: all of them, or one session's.
    pub async fn list(&self, session: Option<&SessionId>) -> Result<Vec<ReminderRecord>, TimedError> {
        // Under the lock: never a firing half-recorded.
        let _guard = self.inner.lock.lock().await;
        let all = self.inner.store.reminders().await?;
        Ok(all.into_iter().filter(|r| session.is_none_or(|s| &r.session_id == s)).collect())
    }

    /// Cancels `id` (only `session`'s when given). A cancelled reminder never fires again.
    pub async fn cancel(&self, id: &str, session: Option<&SessionId>) -> Result<ReminderRecord, TimedError> {
        let _guard = self.inner.lock.lock().await;
        let record = self.owned(id, session).await?;
        self.cancel_locked(record).await
    }

    /// Cancels `record` (an active one; others are answered as they are). Call under the lock.
    async fn cancel_locked(&self, mut record: ReminderRecord) -> Result<ReminderRecord, TimedError> {
        let inner = &self.inner;
        if record.status == "active" {
            record.status = "cancelled".into();
            record.next_due_at = None;
            inner.store.put_reminder(record.clone()).await?;
            inner.wake.notify_one();
        }
        Ok(record)
    }

    async fn owned(&self, id: &str, session: Option<&SessionId>) -> Result<ReminderRecord, TimedError> {
        match self.inner.store.reminder(id).await? {
            Some(r) if session.is_none_or(|s| &r.session_id == s) => Ok(r),
            _ => Err(TimedError::UnknownReminder(id.to_owned())),
        }
    }

    /// Fires `id` now, by hand (dev mode). Its cadence is left as it was.
    pub async fn dispatch(&self, id: &str) -> Result<FiringRecord, TimedError> {
        let now = self.inner.clock.now();
        let mut due = now;
        loop {
            match self.fire(id, due, ReminderTrigger::Dev).await? {
                Some(row) => return Ok(row),
                None => due += chrono::Duration::milliseconds(1),
            }
        }
    }

    /// Fires `id` for an external clock (`--no-control-plane`): its current due time, then its
    /// cadence advances as the reminder clock would. `None` when that due time was already fired
    /// (a retried request).
    pub async fn fire_due(&self, id: &str) -> Result<Option<FiringRecord>, TimedError> {
        let reminder = self.owned(id, None).await?;
        let due = reminder.next_due_at.unwrap_or_else(|| self.inner.clock.now());
        self.fire(id, due, ReminderTrigger::Due).await
    }

    /// Claims `(id, due)` and fires it. `None` when that due time was already claimed.
    async fn fire(
        &self,
        id: &str,
        due: DateTime<Utc>,
        trigger: ReminderTrigger,
    ) -> Result<Option<FiringRecord>, TimedError> {
        let inner = &self.inner;
        let _guard = inner.lock.lock().await;
        let mut reminder = self.owned(id, None).await?;
        if reminder.status != "active" {
            return Err(TimedError::invalid("reminder_not_active", format!("reminder {id} is {}", reminder.status)));
        }
        let now = inner.clock.now();
        let mut row = FiringRecord {
            kind: TimedKind::Reminder,
            owner: id.to_owned(),
            due_at: due,
            trigger: match trigger {
                ReminderTrigger::Due => "due",
                ReminderTrigger::Dev => "dev",
            }
            .into(),
            status: FiringStatus::Claimed,
            session_ids: vec![reminder.session_id.clone()],
            claimed_at: now,
            finished_at: None,
            error: None,
        };
        let claimed = inner.store.claim_firing(row.clone()).await?;
        let mut stop = false;
        if claimed {
            let result = self.wake(&reminder, due).await;
            row.finished_at = Some(inner.clock.now());
            match result {
                Ok(stopped) => {
                    row.status = FiringStatus::Completed;
                    stop = stopped;
                }
                Err(message) => {
                    tracing::warn!(reminder = %id, error = %message, "reminder firing failed");
                    row.status = FiringStatus::Failed;
                    row.error = Some(message);
                }
            }
            inner.store.update_firing(row.clone()).await?;
            reminder.fired += 1;
        }
        if trigger == ReminderTrigger::Due {
            let cadence = Cadence::parse(&reminder.cadence, &reminder.cadence_value, reminder.created_at);
            reminder.next_due_at = cadence.ok().and_then(|c| c.after(due, inner.clock.now()));
        }
        if stop || reminder.next_due_at.is_none() {
            reminder.status = "done".into();
            reminder.next_due_at = None;
        }
        inner.store.put_reminder(reminder).await?;
        Ok(claimed.then_some(row))
    }

    /// Wakes the conversation (or runs the handler). `Ok(true)`: the handler asked to stop.
    async fn wake(&self, reminder: &ReminderRecord, due: DateTime<Utc>) -> Result<bool, String> {
        if let Some(prompt) = &reminder.prompt {
            let mut message = format!("[reminder {}] {prompt}", reminder.id);
            if let Some(until) = &reminder.until {
                message.push_str(&format!(
                    "\nStop condition: {until}\nWhen it holds, cancel this reminder with reminders_cancel (id \"{}\").",
                    reminder.id
                ));
            }
            return self.follow_up(reminder, message).await.map(|()| false);
        }
        let name = reminder.handler.as_deref().unwrap_or_default();
        let Some(def) = self.inner.handlers.iter().find(|h| h.name == name) else {
            return Err(format!("the handler `{name}` no longer exists"));
        };
        let command = TimedCommand {
            name: format!("reminder-{name}"),
            argv: def.command.clone(),
            cwd: def.cwd.clone(),
            timeout: def.timeout,
            session_id: Some(reminder.session_id.clone()),
            principal: Principal::new(reminder.principal.clone()),
            extension: bdk_project::formats::namespace_of(&def.name, def.source).map(str::to_owned),
        };
        let input = json!({
            "reminderId": reminder.id,
            "purpose": reminder.purpose,
            "args": reminder.args,
            "sessionId": reminder.session_id,
            "dueAt": due.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        let outcome = timed_command::run(self.inner.engine.core(), &command, &input).await;
        if outcome.is_error {
            return Err(match outcome.result {
                Value::String(text) => text,
                other => other.to_string(),
            });
        }
        let followup = match outcome.result.get("followup") {
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => other.get("message").and_then(Value::as_str).map(str::to_owned),
            None => None,
        };
        if let Some(message) = followup {
            self.follow_up(reminder, message).await?;
        }
        Ok(outcome.result.get("action").and_then(Value::as_str) == Some("stop"))
    }

    /// A follow-up into the reminder's session as its owner, with the session's current token.
    async fn follow_up(&self, reminder: &ReminderRecord, message: String) -> Result<(), String> {
        let core = self.inner.engine.core();
        let record = match core.stores.sessions.get(&reminder.session_id).await {
            Ok(Some(record)) => record,
            Ok(None) => return Err(format!("session {} no longer exists", reminder.session_id)),
            Err(error) => return Err(error.to_string()),
        };
        let request = FollowUp {
            message,
            principal: Principal::new(record.principal.clone()),
            continuation_token: record.continuation_token.clone().unwrap_or_default(),
            // Never interrupt a running turn: the wake waits for it.
            admission: Admission::Coalesce,
            workspace_files: Vec::new(),
        };
        core.follow_up(&reminder.session_id, request).await.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Closes firings a previous process claimed and did not finish (they are not re-run: a
    /// wake may already have reached the conversation). Returns how many. Runs under the firing
    /// lock: a firing of this process (a dispatch racing start-up) holds it from claim to
    /// outcome, so an open row read here is always a previous process's.
    pub async fn recover(&self) -> Result<usize, TimedError> {
        let _guard = self.inner.lock.lock().await;
        let open = self.inner.store.open_firings().await?;
        let mut closed = 0;
        for mut row in open.into_iter().filter(|r| r.kind == TimedKind::Reminder) {
            row.status = FiringStatus::Failed;
            row.error = Some("interrupted by a restart; not fired again".into());
            row.finished_at = Some(self.inner.clock.now());
            self.inner.store.update_firing(row).await?;
            closed += 1;
        }
        Ok(closed)
    }

    /// The reminder clock: fires every active reminder whose due time has come (late ones once,
    /// at start-up), then sleeps until the next due time or a change. Runs until
    /// [`Reminders::shutdown`].
    pub async fn run(&self) {
        let inner = &self.inner;
        loop {
            let changed = inner.wake.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let active = match inner.store.reminders().await {
                Ok(all) => all.into_iter().filter(|r| r.status == "active").collect::<Vec<_>>(),
                Err(error) => {
                    tracing::error!(%error, "reading reminders failed");
                    Vec::new()
                }
            };
            let now = inner.clock.now();
            let mut fired_any = false;
            for reminder in active.iter().filter(|r| r.next_due_at.is_some_and(|due| due <= now)) {
                let due = reminder.next_due_at.unwrap_or(now);
                match self.fire(&reminder.id, due, ReminderTrigger::Due).await {
                    Ok(_) => fired_any = true,
                    Err(error) => tracing::warn!(reminder = %reminder.id, %error, "reminder not fired"),
                }
            }
            if fired_any {
                continue;
            }
            let next = active.iter().filter_map(|r| r.next_due_at).min();
            let sleep = async {
                match next {
                    Some(at) => inner.clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = inner.cancel.cancelled() => return,
                () = &mut changed => {}
                () = sleep => {}
            }
        }
    }

    /// Stops the reminder clock.
    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
    }
}

/// [`Reminders`] as the host services reach them ([`bdk_tools::ReminderAccess`]): the one
/// implementation behind native tools' `reminder_*` and `POST /v1/host/reminders/*`. Weak, so
/// the engine core holding it does not keep the reminders alive.
#[derive(Debug)]
struct Access(std::sync::Weak<Inner>);

impl Access {
    fn reminders(&self) -> bdk_tools::host::HostResult<Reminders> {
        self.0.upgrade().map(|inner| Reminders { inner }).ok_or_else(bdk_tools::host::reminders_unavailable)
    }
}

impl bdk_tools::ReminderAccess for Access {
    fn create(
        &self,
        caller: ReminderCaller,
        request: Value,
    ) -> bdk_tools::BoxFuture<'_, bdk_tools::host::HostResult<Value>> {
        Box::pin(async move {
            let reminders = self.reminders()?;
            let request: CreateReminder = serde_json::from_value(request)
                .map_err(|e| bdk_tools::HostError::invalid("invalid_request", format!("invalid reminder: {e}")))?;
            let record = match caller {
                ReminderCaller::Session(session) => reminders.create(&session, request).await,
                ReminderCaller::Principal(principal) => reminders.create_for(&principal, request).await,
            };
            to_value(&record.map_err(host_error)?)
        })
    }

    fn list(&self, caller: ReminderCaller) -> bdk_tools::BoxFuture<'_, bdk_tools::host::HostResult<Vec<Value>>> {
        Box::pin(async move {
            let reminders = self.reminders()?;
            let all = match caller {
                ReminderCaller::Session(session) => reminders.list(Some(&session)).await,
                ReminderCaller::Principal(principal) => reminders.list_for(&principal).await,
            };
            all.map_err(host_error)?.iter().map(to_value).collect()
        })
    }

    fn cancel(
        &self,
        caller: ReminderCaller,
        id: String,
    ) -> bdk_tools::BoxFuture<'_, bdk_tools::host::HostResult<Value>> {
        Box::pin(async move {
            let reminders = self.reminders()?;
            let record = match caller {
                ReminderCaller::Session(session) => reminders.cancel(&id, Some(&session)).await,
                ReminderCaller::Principal(principal) => reminders.cancel_for(&id, &principal).await,
            };
            to_value(&record.map_err(host_error)?)
        })
    }
}

fn to_value(record: &ReminderRecord) -> bdk_tools::host::HostResult<Value> {
    serde_json::to_value(record).map_err(|e| {
        bdk_tools::HostError::new(bdk_tools::host::HostErrorKind::Internal, "internal_error", e.to_string())
    })
}

/// The status a reminder failure maps to, with its stable code.
fn host_error(error: TimedError) -> bdk_tools::HostError {
    use bdk_tools::host::HostErrorKind;
    let kind = match error {
        TimedError::UnknownSchedule(_) | TimedError::UnknownReminder(_) | TimedError::UnknownConversation(_) => {
            HostErrorKind::NotFound
        }
        TimedError::Invalid { .. } => HostErrorKind::Invalid,
        TimedError::Engine(engine) => return crate::host::engine_error(engine),
        TimedError::Store(detail) => {
            tracing::error!(error = %detail, "reminder storage failure");
            return bdk_tools::HostError::new(
                HostErrorKind::Internal,
                "internal_error",
                "internal error; see the server log",
            );
        }
    };
    bdk_tools::HostError::new(kind, error.code(), error.to_string())
}
