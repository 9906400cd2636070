//! The example projects' evals pass against the scripted model: each conversation gets the
//! script a well-behaved model would follow (chosen by its message), and runs with the
//! examples' real tools (dry-run where the eval says so) on a run's own state.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_eval::{EvalSetup, RunStatus};
use bdk_model::{Message, ModelProvider, ModelRequest, ModelStream, ProviderInfo, ScriptStep, ScriptedProvider};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::*;

/// Scripts by conversation: the first script whose key the first user message contains; the
/// step is the number of model calls the conversation already made.
#[derive(Debug)]
struct ByConversation {
    scripts: Vec<(&'static str, Vec<ScriptStep>)>,
}

impl ModelProvider for ByConversation {
    fn info(&self) -> ProviderInfo {
        ProviderInfo { provider: "scripted".into(), model: "by-conversation".into(), base_url: None }
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let first = request.messages.iter().find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        });
        let calls = request.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
        let step = first
            .and_then(|first| self.scripts.iter().find(|(key, _)| first.contains(key)))
            .and_then(|(_, steps)| steps.get(calls).cloned())
            .unwrap_or_else(|| ScriptStep::text("(no script for this conversation)"));
        ScriptedProvider::new(vec![step]).stream(request, cancel)
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn call(name: &str, input: serde_json::Value) -> ScriptStep {
    ScriptStep::tool_call(format!("call_{name}"), name, input)
}

async fn run_example(name: &str, scripts: Vec<(&'static str, Vec<ScriptStep>)>) {
    let mut discovery = bdk_project::discover(&[example(name)]);
    let project = discovery.projects.remove(0);
    // Only the parts this build does not run yet may warn (ops-bot's channel and artifacts).
    assert!(project.diagnostics.iter().all(|d| d.code == "not_run_yet"), "{:?}", project.diagnostics);
    let state = tempfile::tempdir().unwrap();
    let provider: Arc<dyn ModelProvider> = Arc::new(ByConversation { scripts });
    let setup = EvalSetup {
        tools: tools_factory(&project),
        telemetry: Default::default(),
        project: Arc::new(project),
        state_dir: state.path().join(name),
        judge: provider.clone(),
        provider,
        price: None,
    };
    let evals = setup.project.evals.as_ref().unwrap();
    let batch = bdk_eval::Batch {
        cases: evals.cases.clone(),
        filter_ids: Vec::new(),
        tags: Vec::new(),
        iterations: None,
        max_concurrency: evals.max_concurrency,
        timeout: evals.timeout,
    };
    let store = bdk_eval::RunStore::new(setup.evals_dir());
    let shared = std::sync::Arc::new(std::sync::Mutex::new(batch.snapshot(bdk_eval::RunStore::new_run_id(), name)));
    let run = within(bdk_eval::run_batch(&setup, &store, batch, shared, CancellationToken::new(), &|_, _| {})).await;
    assert_eq!(run.status, RunStatus::Completed);
    for case in &run.cases {
        let failed: Vec<_> = case.attempts.iter().flat_map(|a| a.checks.iter().filter(|c| !c.passed)).collect();
        assert!(
            failed.is_empty() && case.passes == case.iterations,
            "{name}/{}: {failed:#?} {:#?}",
            case.id,
            case.attempts
        );
    }
    assert!(run.all_passed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_evals_pass() {
    let text = "the quick brown fox jumps";
    run_example(
        "hello",
        vec![("quick brown fox", vec![call("word_count", json!({"text": text})), ScriptStep::text("5 words.")])],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pr_reviewer_evals_pass() {
    let pr = |n: u32| format!("https://github.com/acme/checkout/pull/{n}");
    run_example(
        "pr-reviewer",
        vec![
            (
                "pull/42",
                vec![
                    call("inspect_pr", json!({"pr_url": pr(42), "additions": 3, "deletions": 1, "changed_files": 1})),
                    ScriptStep::text("A trivial change; approving."),
                ],
            ),
            (
                "pull/9",
                vec![call("inspect_pr", json!({"pr_url": pr(9)})), ScriptStep::text("How many lines does it change?")],
            ),
            (
                "pull/7",
                vec![
                    call(
                        "inspect_pr",
                        json!({"pr_url": pr(7), "additions": 5, "deletions": 2, "changed_files": 1, "draft": true}),
                    ),
                    ScriptStep::text("It is a draft; I will review it once it is ready."),
                ],
            ),
            (
                "pull/8",
                vec![
                    call(
                        "inspect_pr",
                        json!({"pr_url": pr(8), "additions": 1, "deletions": 0, "changed_files": 1, "draft": true}),
                    ),
                    ScriptStep::text("Drafts are not approved; mark it ready first."),
                ],
            ),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_bot_evals_pass() {
    let now = chrono::Utc::now();
    let since = (now - chrono::Duration::hours(1)).to_rfc3339();
    let until = now.to_rfc3339();
    run_example(
        "ops-bot",
        vec![
            (
                "checkout-api healthy",
                vec![
                    call("service_status", json!({"service": "checkout-api"})),
                    ScriptStep::text("checkout-api is healthy."),
                ],
            ),
            (
                "write the postmortem",
                vec![
                    call("task", json!({"agent": "postmortem", "message": "Draft the checkout-api postmortem."})),
                    ScriptStep::text("The postmortem is drafted."),
                ],
            ),
            (
                "error rate is above 4%",
                vec![
                    call("service_status", json!({"service": "checkout-api"})),
                    call(
                        "query_metrics",
                        json!({"service": "checkout-api", "metric": "error_rate", "since": since, "until": until}),
                    ),
                    call(
                        "page_oncall",
                        json!({"service": "checkout-api", "severity": "sev2", "summary": "Error rate above 4%."}),
                    ),
                    ScriptStep::text("Paged the on-call engineer (sev2)."),
                ],
            ),
            (
                "search feels slow",
                vec![
                    call("service_status", json!({"service": "search"})),
                    ScriptStep::text("search is healthy; no page needed."),
                ],
            ),
        ],
    )
    .await;
}
