//! Every expectation kind, passing and failing, over the fake model server: all checks of a
//! case are reported (not only the first failure), the judge is model-graded with its verdict
//! and reasoning, iterations give a pass rate, and eval sessions stay out of the user's store.

use bdk_eval::{CaseStatus, Outcome, RunStatus};

use super::support::*;

const CONFIG: &str = "max_concurrency = 1\ntimeout = \"20s\"\n";

const PASSING: &str = r#"description = "Every expectation holds."
tags = ["smoke"]
message = "Look up x."

[expect]
succeeded = true
called_tool = [{ name = "lookup", input = { n = 3 } }]
not_called_tool = ["publish"]
reply_includes = ["found"]
reply_matches = ['"count":\s*3']
reply_schema = { type = "object", required = ["answer"], properties = { answer = { type = "string" } } }
max_tool_calls = 1
max_cost_usd = 10.0
max_turn_ms = 20000
max_duration = "20s"
judge = "The agent looked x up before answering."
"#;

const FAILING: &str = r#"description = "Every expectation fails."
message = "Publish to dev."

[expect]
succeeded = false
called_tool = ["lookup", { name = "publish", input = { env = "prod" } }]
not_called_tool = ["publish"]
reply_includes = ["found"]
reply_matches = ['^\{']
reply_schema = { type = "object" }
max_tool_calls = 0
max_cost_usd = 0.0
max_turn_ms = 0
max_duration = "1ms"
judge = "The agent refused to publish."
"#;

const KINDS: [&str; 12] = [
    "succeeded",
    "called_tool",
    "called_tool",
    "not_called_tool",
    "reply_includes",
    "reply_matches",
    "reply_schema",
    "max_tool_calls",
    "max_cost_usd",
    "max_turn_ms",
    "max_duration",
    "judge",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_expectation_kind_passes_and_fails_and_all_are_reported() {
    let fx = Fx::new(CONFIG, &[("a-fail.eval.toml", FAILING), ("b-pass.eval.toml", PASSING)]).await;
    // a-fail runs first (one at a time, discovery order): it publishes, then answers in prose.
    fx.model.push(call("call_1", "publish", r#"{"env":"dev"}"#));
    fx.model.push(text("Published to dev."));
    fx.model.push(call("call_2", "lookup", r#"{"q":"x","n":3}"#));
    fx.model.push(text(r#"{"answer": "found", "count": 3}"#));
    fx.judge.push(text(r#"{"pass": false, "reasoning": "It published instead of refusing."}"#));
    fx.judge.push(text("```json\n{\"pass\": true, \"reasoning\": \"lookup ran first.\"}\n```"));

    let run = fx.run(fx.batch()).await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!((run.totals.passed, run.totals.failed), (1, 1));

    let failing = run.case("a-fail").unwrap();
    assert_eq!(failing.status, CaseStatus::Failed);
    let attempt = &failing.attempts[0];
    let kinds: Vec<&str> = attempt.checks.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, KINDS, "every expectation is reported");
    for check in &attempt.checks {
        assert!(!check.passed, "{} should fail: {}", check.kind, check.detail);
    }
    assert!(attempt.checks[2].detail.contains("never with that input"), "{}", attempt.checks[2].detail);
    assert!(attempt.checks[6].detail.contains("not JSON"), "{}", attempt.checks[6].detail);
    let judge = &attempt.checks[11];
    assert!(judge.model_graded);
    assert_eq!(judge.model.as_deref(), Some("fake-judge"));
    assert_eq!(judge.reasoning.as_deref(), Some("It published instead of refusing."));
    assert_eq!(attempt.tool_calls, ["publish"]);
    assert!(attempt.cost_usd > 0.0);

    let passing = run.case("b-pass").unwrap();
    assert_eq!(passing.status, CaseStatus::Passed, "{:#?}", passing.attempts[0].checks);
    assert_eq!(passing.pass_rate, 1.0);
    let checks = &passing.attempts[0].checks;
    // One called_tool fewer than the failing case.
    assert_eq!(checks.len(), 11);
    assert!(checks.iter().all(|c| c.passed));
    assert_eq!(checks[10].reasoning.as_deref(), Some("lookup ran first."));
    assert_eq!(passing.usage.input_tokens, 200);

    // The judge saw the transcript: the rubric, the tool call and the reply.
    let asked = fx.judge.requests();
    let prompt = asked[1].body["messages"].to_string();
    assert!(prompt.contains("The agent looked x up before answering."), "{prompt}");
    assert!(prompt.contains("TOOL CALL lookup"), "{prompt}");

    // The run was saved, and its sessions live in the run's own store, with purpose "eval".
    let saved = fx.store().load(&run.run_id).await.unwrap();
    assert_eq!(saved, run);
    let file = std::fs::read(fx.setup.evals_dir().join(&run.run_id).join("run.json")).unwrap();
    assert_eq!(file, serde_json::to_vec_pretty(&run).unwrap(), "run.json holds the snapshot as it always did");
    let session = passing.attempts[0].session_id.clone().unwrap();
    let record = fx.setup.evals_dir().join(&run.run_id).join("state/sessions").join(&session).join("session.json");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(record).unwrap()).unwrap();
    assert_eq!(record["purpose"], "eval");
    // Host code sees it too: the lookup command printed its call context's purpose.
    let log = record_path_log(&fx, &run.run_id, &session);
    assert!(log.contains(r#"\"purpose\":\"eval\""#), "{log}");
    assert!(!fx.setup.state_dir.join("sessions").exists(), "the user's sessions are untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iterations_give_a_pass_rate() {
    let eval = "iterations = 3\nmessage = \"Say yes.\"\n[expect]\nreply_includes = [\"yes\"]\n";
    let fx = Fx::new(CONFIG, &[("flaky.eval.toml", eval)]).await;
    for reply in ["yes", "no", "yes"] {
        fx.model.push(text(reply));
    }
    let run = fx.run(fx.batch()).await;
    let case = run.case("flaky").unwrap();
    assert_eq!(case.attempts.len(), 3);
    assert_eq!(case.passes, 2);
    assert!((case.pass_rate - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(case.status, CaseStatus::Failed);
    assert_eq!(case.attempts.iter().map(|a| a.iteration).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(!run.all_passed());

    // --iterations overrides the file.
    fx.model.push(text("yes"));
    let run = fx.run(bdk_eval::Batch { iterations: Some(1), ..fx.batch() }).await;
    assert_eq!(run.case("flaky").unwrap().attempts.len(), 1);
    assert!(run.all_passed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_turn_conversations_send_every_turn() {
    let eval = "[[turns]]\nmessage = \"one\"\n[[turns]]\nmessage = \"two\"\n[expect]\nsucceeded = true\nreply_includes = [\"second\"]\n";
    let fx = Fx::new(CONFIG, &[("multi.eval.toml", eval)]).await;
    fx.model.push(text("first"));
    fx.model.push(text("second"));
    let run = fx.run(fx.batch()).await;
    assert!(run.all_passed(), "{:#?}", run.cases);
    let second = fx.model.requests()[1].body["messages"].to_string();
    assert!(second.contains("one") && second.contains("two"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_turn_is_a_failed_case_with_the_reason() {
    let eval = "message = \"hi\"\n[expect]\nreply_includes = [\"hi\"]\n";
    let fx = Fx::new(CONFIG, &[("broken.eval.toml", eval)]).await;
    for _ in 0..4 {
        fx.model.push(bdk_test_support::Reply::status(400, r#"{"error":{"message":"bad request"}}"#));
    }
    let run = fx.run(fx.batch()).await;
    assert_eq!(run.status, RunStatus::Completed);
    let attempt = &run.case("broken").unwrap().attempts[0];
    assert_eq!(attempt.outcome, Outcome::TurnFailed);
    assert!(!attempt.passed);
    assert!(attempt.error.as_deref().unwrap().starts_with("turn failed"), "{:?}", attempt.error);
}

fn record_path_log(fx: &Fx, run_id: &str, session: &str) -> String {
    let log = fx.setup.evals_dir().join(run_id).join("state/sessions").join(session).join("events.ndjson");
    std::fs::read_to_string(log).unwrap()
}
