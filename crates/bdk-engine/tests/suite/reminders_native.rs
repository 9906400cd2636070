//! Reminders from a native tool, in-process (`HostServices::reminder_*`): a tool registered
//! through the library arms a reminder bound to its session (bad input refused with the same
//! codes as the HTTP host service), lists it, the reminder fires and wakes the conversation
//! with its prompt, and the tool cancels it, after which it never fires. Without reminders, or
//! from a call bound to no session, the services say why. Nothing sleeps.

use std::sync::Arc;

use bdk_engine::clock::ManualClock;
use bdk_engine::reminders::Reminders;
use bdk_engine::{Admission, Engine, EngineOptions, HostScope};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_project::model::Predicate;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{CallId, EventData, SessionId};
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError};
use chrono::{TimeZone as _, Utc};
use serde_json::{Value, json};

use super::support::*;

/// `{"op": "create", "request": {...}}`, `{"op": "list"}` or `{"op": "cancel_all"}` (cancels
/// what `list` shows, then one unknown id). Host errors come back as `{"error": code}`.
#[derive(Clone)]
struct Nudge;

fn outcome<T: serde::Serialize>(result: Result<T, bdk_tools::HostError>) -> Value {
    match result {
        Ok(value) => json!({ "ok": value }),
        Err(error) => json!({ "error": error.code }),
    }
}

impl NativeTool for Nudge {
    type Input = Value;

    fn name(&self) -> &str {
        "nudge"
    }

    fn description(&self) -> &str {
        "Arms, lists and cancels this conversation's reminders."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let host = ctx.services()?;
        Ok(match input["op"].as_str().unwrap_or_default() {
            "create" => outcome(host.reminder_create(input["request"].clone()).await),
            "list" => outcome(host.reminder_list().await),
            "cancel_all" => {
                let mut done = Vec::new();
                for reminder in host.reminder_list().await? {
                    let id = reminder["id"].as_str().unwrap_or_default().to_owned();
                    done.push(outcome(host.reminder_cancel(id).await));
                }
                done.push(outcome(host.reminder_cancel("rem_nope".into()).await));
                json!(done)
            }
            other => return Err(ToolError::new(format!("unknown op {other}"))),
        })
    }
}

async fn engine(dir: &std::path::Path, steps: Vec<ScriptStep>) -> (Engine, TestStore) {
    let tools = ProjectTools::empty(dir).without_builtins().native(Nudge).build().unwrap();
    let store = TestStore::open(&dir.join("state")).await;
    let provider = Arc::new(ScriptedProvider::new(steps));
    let engine = Engine::with_options(config(), store.stores(), provider, Arc::new(tools), EngineOptions::default());
    (engine, store)
}

/// Each `nudge` result of the session, in order.
async fn nudges(engine: &Engine, id: &SessionId) -> Vec<Value> {
    let events = engine.events(id, &alice(), 0).await.unwrap();
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => {
                assert!(!r.is_error, "{:?}", r.result);
                Some(r.result.clone())
            }
            _ => None,
        })
        .collect()
}

async fn messages(engine: &Engine, id: &SessionId) -> Vec<String> {
    let events = engine.events(id, &alice(), 0).await.unwrap();
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageReceived(m) => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tool_arms_lists_and_cancels_a_reminder_that_wakes_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let create = |request: Value| json!({"op": "create", "request": request});
    let steps = vec![
        ScriptStep::tool_call(
            "c1",
            "nudge",
            create(json!({"delay": "2h", "prompt": "Re-check CI.", "until": "green"})),
        ),
        ScriptStep::tool_call("c2", "nudge", create(json!({"every": "100ms", "prompt": "too fast"}))),
        ScriptStep::tool_call("c3", "nudge", create(json!({"delay": "1h", "handler": "nope"}))),
        ScriptStep::tool_call("c4", "nudge", create(json!({"delay": "1h", "prompt": "x", "bogus": 1}))),
        ScriptStep::tool_call("c5", "nudge", json!({"op": "list"})),
        say("armed"),
        // The reminder's wake.
        say("woken"),
        // The follow-up that cancels.
        ScriptStep::tool_call("c6", "nudge", json!({"op": "cancel_all"})),
        say("cancelled"),
    ];
    let (engine, store) = engine(dir.path(), steps).await;
    let clock = Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap()));
    let reminders = Reminders::new(engine.clone(), store.timed(), clock, &[]);

    let started = within(engine.start_session(start("watch my PR", SessionMode::Chat))).await.unwrap();
    let id = started.session_id;
    settled(&engine, &id, 1).await;
    let results = nudges(&engine, &id).await;
    let created = &results[0]["ok"];
    assert_eq!(created["sessionId"], json!(id.to_string()), "bound to the calling session: {created}");
    assert_eq!(created["status"], json!("active"), "{created}");
    assert_eq!(created["nextDueAt"], json!("2026-03-02T11:00:00Z"), "{created}");
    // The HTTP host service's validation and codes, from the same implementation.
    assert_eq!(results[1], json!({"error": "invalid_reminder"}), "every below a second");
    assert_eq!(results[2], json!({"error": "unknown_handler"}), "an unknown handler");
    assert_eq!(results[3], json!({"error": "invalid_request"}), "an unknown field");
    let listed = results[4]["ok"].as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], created["id"]);
    let reminder = created["id"].as_str().unwrap().to_owned();

    // It fires (the dev route's path) and wakes the conversation with its prompt.
    within(reminders.dispatch(&reminder)).await.unwrap();
    settled(&engine, &id, 2).await;
    let said = messages(&engine, &id).await;
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[1].contains("Re-check CI.") && said[1].contains("green"), "{said:?}");

    // The tool cancels it; an unknown id is not found; a cancelled reminder never fires.
    let token = engine.session(&id, &alice()).await.unwrap().continuation_token.unwrap();
    within(engine.follow_up(&id, follow("stop watching", &token, Admission::Preempt))).await.unwrap();
    settled(&engine, &id, 3).await;
    let cancelled = nudges(&engine, &id).await.pop().unwrap();
    assert_eq!(cancelled[0]["ok"]["status"], json!("cancelled"), "{cancelled}");
    assert_eq!(cancelled[1], json!({"error": "reminder_not_found"}), "{cancelled}");
    assert_eq!(within(reminders.dispatch(&reminder)).await.unwrap_err().code(), "reminder_not_active");
    assert_eq!(within(reminders.list(Some(&id))).await.unwrap()[0].status, "cancelled");

    // Host services of a call bound to no session cannot reach a conversation's reminders.
    let unbound = engine.host_services(HostScope { session_id: None, call_id: CallId::generate("x"), principal: None });
    assert_eq!(unbound.reminder_list().await.unwrap_err().code, "invalid_request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reminders_the_services_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _store) = engine(dir.path(), Vec::new()).await;
    let services = engine.host_services(HostScope::session(SessionId::generate(), CallId::generate("x")));
    let error = services.reminder_create(json!({"delay": "1h", "prompt": "x"})).await.unwrap_err();
    assert_eq!(error.code, "reminders_unavailable");
    assert_eq!(services.reminder_list().await.unwrap_err().code, "reminders_unavailable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_a_session_reaches_the_reminders_of_its_principals_conversations() {
    //! Guards (decision 0041): host code bound to no session but acting for a principal (a
    //! schedule's `run`) arms a reminder on a conversation it names by continuation token, only
    //! one that principal owns; it lists and cancels only that principal's reminders; a call
    //! bound to a session cannot name another conversation.
    let dir = tempfile::tempdir().unwrap();
    let (engine, store) = engine(dir.path(), vec![say("noted"), say("noted too")]).await;
    let clock = Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap()));
    let reminders = Reminders::new(engine.clone(), store.timed(), clock, &[]);
    let acting_as = |who: &str| {
        engine.host_services(HostScope {
            session_id: None,
            call_id: CallId::generate("x"),
            principal: Some(bdk_engine::Principal::new(who)),
        })
    };
    let send = |key: &str| bdk_tools::host::SendRequest {
        channel: "ops".into(),
        message: "Any deploys stuck?".into(),
        continuation_key: Some(key.into()),
        title: None,
        admission: None,
    };
    let pulse = acting_as("schedule:pulse");
    let sent = within(pulse.send(send("standup"))).await.unwrap();
    let other = within(acting_as("schedule:other").send(send("retro"))).await.unwrap();

    let request = |token: &str| json!({"delay": "1h", "prompt": "Follow up.", "continuationToken": token});
    let made = within(pulse.reminder_create(request(&sent.continuation_token))).await.unwrap();
    assert_eq!(made["sessionId"], json!(sent.session_id.to_string()), "{made}");
    let code = |r: Result<Value, bdk_tools::HostError>| r.unwrap_err().code;
    assert_eq!(code(pulse.reminder_create(request(&other.continuation_token)).await), "forbidden");
    assert_eq!(code(pulse.reminder_create(request("ops:nobody")).await), "session_not_found");
    assert_eq!(code(pulse.reminder_create(request("no-colon")).await), "invalid_continuation_token");
    assert_eq!(code(pulse.reminder_create(json!({"delay": "1h", "prompt": "x"})).await), "invalid_request");

    // The other principal sees and cancels none of it; the owner lists and cancels it.
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(within(acting_as("schedule:other").reminder_list()).await.unwrap(), Vec::<Value>::new());
    assert_eq!(
        within(acting_as("schedule:other").reminder_cancel(id.clone())).await.unwrap_err().code,
        "reminder_not_found"
    );
    let listed = within(pulse.reminder_list()).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], json!(id));
    let cancelled = within(pulse.reminder_cancel(id.clone())).await.unwrap();
    assert_eq!(cancelled["status"], json!("cancelled"), "{cancelled}");
    assert_eq!(within(reminders.dispatch(&id)).await.unwrap_err().code(), "reminder_not_active");

    // A call bound to a session arms on its own conversation only.
    let bound = engine.host_services(HostScope::session(sent.session_id.clone(), CallId::generate("y")));
    assert_eq!(code(bound.reminder_create(request(&other.continuation_token)).await), "invalid_request");
}
