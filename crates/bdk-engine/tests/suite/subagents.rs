//! Subagents end to end through the fake model server: the `task` tool lists each subagent's
//! routing description; two `task` calls in one step run their children at once; the parent's
//! stream records `subagent.called` / `subagent.completed` around each call's `action.result`,
//! and each child's own events are in the child session `subagent.called` names; the children's
//! usage counts in the parent turn; stopping the parent cancels running children; a child cannot
//! call `task`, and an unknown subagent is a tool error. A child runs its own model (or the
//! parent's when it has none) on the parent's tools and workspace.

use bdk_protocol::event::{SubagentCalled, SubagentCompleted};
use bdk_protocol::{Event, EventData, SessionId};
use bdk_test_support::Reply;

use super::folder::*;
use super::support::*;

const RESEARCHER: &str = "description = \"Background research: records and history.\"\n";
const WRITER: &str = "description = \"Writes summaries for people.\"\n";

fn folder_files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("subagents/researcher/agent.toml", RESEARCHER),
        ("subagents/researcher/instructions.md", "You are the researcher.\n"),
        ("subagents/writer/agent.toml", WRITER),
    ]
}

fn called(events: &[Event]) -> Vec<SubagentCalled> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::SubagentCalled(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn completed(events: &[Event]) -> Vec<SubagentCompleted> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::SubagentCompleted(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn child_of(call: &SubagentCalled) -> SessionId {
    call.child_session_id.clone().expect("subagent.called names the child session")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_subagents_run_at_once_and_their_usage_counts_in_the_parent_turn() {
    let folder = Folder::new(&folder_files()).await;
    folder.model.push(calls(
        &[
            ("c1", "task", r#"{"subagent": "researcher", "prompt": "Find the record."}"#),
            ("c2", "task", r#"{"subagent": "writer", "prompt": "Write it up."}"#),
        ],
        (100, 10),
    ));
    // The two children take these in whichever order they ask.
    folder.model.push(text("child answer", (7, 3)));
    folder.model.push(text("child answer", (7, 3)));
    folder.model.push(text("Both done.", (200, 20)));

    let started = folder.start("Research and write.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    let keep = ["actions.requested", "subagent.called", "subagent.completed", "action.result", "turn.completed"];
    let order: Vec<&str> = types(&events).into_iter().filter(|t| keep.contains(t)).collect();
    assert_eq!(
        order,
        [
            "actions.requested",
            "subagent.called",
            "subagent.called",
            "subagent.completed",
            "action.result",
            "subagent.completed",
            "action.result",
            "turn.completed",
        ]
    );
    // Each `subagent.completed` comes right before its call's `action.result`.
    for (i, event) in events.iter().enumerate() {
        if let EventData::SubagentCompleted(done) = &event.data {
            assert!(!done.is_error, "{done:?}");
            assert_eq!(done.result, "child answer");
            match &events[i + 1].data {
                EventData::ActionResult(result) => assert_eq!(result.call_id, done.call_id),
                other => panic!("expected the call's action.result, got {other:?}"),
            }
        }
    }

    // Both children ran: their own sessions hold their events, with their own prompts.
    let calls = called(&events);
    assert_eq!(calls.iter().map(|c| c.subagent.as_str()).collect::<Vec<_>>(), ["researcher", "writer"]);
    for call in &calls {
        let child = folder.events(&child_of(call)).await;
        assert_eq!(
            shape(&child),
            [
                "session.started",
                "message.received",
                "turn.started",
                "step.started",
                "message.appended",
                "message.completed",
                "step.completed",
                "turn.completed",
                "session.completed"
            ]
        );
        assert_eq!(child[2].turn_id, call.child_turn_id);
    }

    // The researcher ran its own instructions; the writer, having none, the parent's. Neither
    // was offered `task`.
    let requests = folder.model.requests();
    assert_eq!(requests.len(), 4);
    let parent_tools = tools_of(&requests[0].body);
    assert!(parent_tools.contains(&"task".to_owned()));
    let task_spec =
        requests[0].body["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "task").unwrap().clone();
    let description = task_spec["function"]["description"].as_str().unwrap();
    assert!(description.contains("`researcher`: Background research: records and history."), "{description}");
    assert!(description.contains("`writer`: Writes summaries for people."), "{description}");
    let mut child_prompts: Vec<String> = requests[1..3].iter().map(|r| system_of(&r.body)).collect();
    child_prompts.sort();
    assert_eq!(child_prompts, ["You are the parent agent.", "You are the researcher."]);
    for request in &requests[1..3] {
        assert!(!tools_of(&request.body).contains(&"task".to_owned()));
    }

    // Usage: the parent's two steps plus both children's.
    let done = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnCompleted(done) => Some(done.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(done.usage.input_tokens, 100 + 200 + 7 + 7);
    assert_eq!(done.usage.output_tokens, 10 + 20 + 3 + 3);
    let children: u64 = completed(&events).iter().map(|c| c.usage.unwrap().input_tokens).sum();
    assert_eq!(children, 14);
    // $1 per million input tokens, $2 per million output tokens, children included.
    let expected = (314.0 * 1.0 + 36.0 * 2.0) / 1e6;
    assert!((done.estimated_cost_usd.unwrap() - expected).abs() < 1e-12, "{:?}", done.estimated_cost_usd);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopping_the_parent_cancels_children_that_run_at_the_same_time() {
    let folder = Folder::new(&folder_files()).await;
    folder.model.push(calls(
        &[
            ("c1", "task", r#"{"subagent": "researcher", "prompt": "Dig."}"#),
            ("c2", "task", r#"{"subagent": "writer", "prompt": "Write."}"#),
        ],
        (10, 1),
    ));
    // Neither child ever gets an answer: both must be in their first step at once.
    folder.model.push(Reply::Hang);
    folder.model.push(Reply::Hang);

    let started = folder.start("Go.").await;
    let parent = started.session_id.clone();
    let both = until(
        &folder.engine,
        &parent,
        |e| matches!(e.data, EventData::SubagentCalled(ref c) if c.subagent == "writer"),
    )
    .await;
    let calls = called(&both);
    assert_eq!(calls.len(), 2);
    for call in &calls {
        let child = child_of(call);
        until(&folder.engine, &child, |e| matches!(e.data, EventData::StepStarted(_))).await;
    }

    within(folder.engine.stop(&parent, &alice())).await.unwrap();
    let events = settled(&folder.engine, &parent, 1).await;
    let done = completed(&events);
    assert_eq!(done.len(), 2, "{:?}", types(&events));
    assert!(done.iter().all(|d| d.is_error), "{done:?}");
    assert_eq!(count(&events, "turn.failed"), 1);

    for call in &calls {
        let child = child_of(call);
        let child_events = until(&folder.engine, &child, |e| matches!(e.data, EventData::SessionFailed(_))).await;
        let failed = child_events
            .iter()
            .find_map(|e| match &e.data {
                EventData::TurnFailed(f) => Some(f.clone()),
                _ => None,
            })
            .expect("the child turn failed");
        assert_eq!(failed.status, bdk_protocol::event::TurnFailStatus::Cancelled);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_cannot_delegate_and_an_unknown_one_is_a_tool_error() {
    let folder = Folder::new(&folder_files()).await;
    folder.model.push(calls(
        &[
            ("c1", "task", r#"{"subagent": "nobody", "prompt": "x"}"#),
            ("c2", "task", r#"{"subagent": "researcher", "prompt": "Delegate further."}"#),
        ],
        (1, 1),
    ));
    folder.model.push(calls(&[("n1", "task", r#"{"subagent": "writer", "prompt": "nested"}"#)], (1, 1)));
    folder.model.push(text("I could not delegate.", (1, 1)));
    folder.model.push(text("Done.", (1, 1)));

    let started = folder.start("Go.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    let results: Vec<(bool, String)> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => Some((r.is_error, r.result.as_str().unwrap_or_default().to_owned())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].0 && results[0].1.contains("there is no subagent `nobody`"), "{results:?}");
    assert_eq!(results[1], (false, "I could not delegate.".to_owned()));
    assert_eq!(called(&events).len(), 1, "a refused call starts no child");

    let child = folder.events(&child_of(&called(&events)[0])).await;
    let nested = child
        .iter()
        .find_map(|e| match &e.data {
            EventData::ActionResult(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(nested.is_error);
    assert_eq!(nested.result.as_str().unwrap(), bdk_engine::NESTED_TASK);
    assert_eq!(count(&child, "subagent.called"), 0);
}

/// A command tool of the parent's: prints a fixed answer.
const STAMP: &str = "description = \"Stamps.\"\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; echo STAMPED\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_runs_its_own_model_or_the_parents_on_the_parents_tools_and_workspace() {
    let researcher = format!("{RESEARCHER}\n[model]\nid = \"fake-model-b\"\n");
    let folder = Folder::new(&[
        ("subagents/researcher/agent.toml", researcher.as_str()),
        ("subagents/writer/agent.toml", WRITER),
        ("tools/stamp.toml", STAMP),
        ("sandbox/workspace/notes.txt", "SEEDED-NOTE\n"),
    ])
    .await;
    // One child at a time, so the requests come in a known order.
    folder.model.push(calls(&[("c1", "task", r#"{"subagent": "researcher", "prompt": "Read the notes."}"#)], (1, 1)));
    folder.model.push(calls(&[("r1", "read", r#"{"path": "notes.txt"}"#), ("r2", "stamp", "{}")], (1, 1)));
    folder.model.push(text("The notes say SEEDED-NOTE.", (1, 1)));
    folder.model.push(calls(&[("c2", "task", r#"{"subagent": "writer", "prompt": "Write it."}"#)], (1, 1)));
    folder.model.push(text("Written.", (1, 1)));
    folder.model.push(text("Done.", (1, 1)));

    let started = folder.start("Go.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.completed"), 1, "{:?}", types(&events));
    let done = completed(&events);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|d| !d.is_error), "{done:?}");

    let requests = folder.model.requests();
    let models: Vec<&str> = requests.iter().map(|r| r.body["model"].as_str().unwrap()).collect();
    // Parent, researcher (its own model) twice, parent, writer (the parent's), parent.
    assert_eq!(models, ["fake-model", "fake-model-b", "fake-model-b", "fake-model", "fake-model", "fake-model"]);
    let child_tools = tools_of(&requests[1].body);
    for tool in ["read", "stamp"] {
        assert!(child_tools.contains(&tool.to_owned()), "{child_tools:?}");
    }
    let results = tool_results_of(&requests[2].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].1.contains("SEEDED-NOTE"), "the child read the parent's workspace: {results:?}");
    assert!(results[1].1.contains("STAMPED"), "the child called the parent's tool: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_fails_is_an_error_result_the_parent_reads() {
    let folder = Folder::new(&folder_files()).await;
    folder.model.push(calls(&[("c1", "task", r#"{"subagent": "writer", "prompt": "Write."}"#)], (1, 1)));
    // The child's model refuses its request (not retried).
    folder.model.push(Reply::status(400, r#"{"error": {"message": "bad request"}}"#));
    folder.model.push(text("The writer failed.", (1, 1)));

    let started = folder.start("Go.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.completed"), 1, "the parent goes on: {:?}", types(&events));
    let done = completed(&events);
    assert_eq!(done.len(), 1);
    assert!(done[0].is_error, "{done:?}");
    assert!(done[0].result.contains("subagent `writer` failed"), "{}", done[0].result);
    let results = tool_results_of(&folder.model.requests()[2].body);
    assert!(results[0].1.contains("subagent `writer` failed"), "{results:?}");
    let child = folder.events(&child_of(&called(&events)[0])).await;
    assert_eq!(count(&child, "turn.failed"), 1);
    assert_eq!(count(&child, "session.failed"), 1);
}
