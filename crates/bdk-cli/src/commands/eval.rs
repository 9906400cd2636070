//! `bdk eval`: list, run or compare a project's evals. A run drives real turns through the
//! engine (`bdk-eval`), shows a live progress line on a terminal (plain lines otherwise), prints
//! a summary table (pass rate, tokens, cost and duration per case), saves the run under the
//! state directory (`evals/<runId>/run.json`), optionally writes JUnit XML, and exits 1 when any
//! case failed. `--compare A B` prints what changed between two saved runs, regressions first.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};
use bdk_eval::{Batch, CaseStatus, EvalSetup, Progress, RunSnapshot, RunStore};
use bdk_model::{ModelLayer, ModelProvider, Price};
use bdk_project::Project;
use bdk_project::diag::Code;
use bdk_server::mount;
use tokio_util::sync::CancellationToken;

use crate::Embed;
use crate::cli::EvalArgs;
use crate::exit::Exit;
use crate::report;

pub fn run(args: &EvalArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(std::slice::from_ref(&args.dir));
    if discovery.has_errors() {
        eprint!("{}", report::diagnostics_text(&discovery));
        eprintln!("error: not running evals: fix the errors above (`bdk validate` shows them too)");
        return Ok(Exit::ProjectErrors);
    }
    let mut projects = discovery.projects;
    if projects.len() != 1 {
        bail!("`bdk eval` needs exactly one project; {} holds {}", args.dir.display(), projects.len());
    }
    let project = projects.remove(0);
    let state_dir = mount::state_dir(&project, args.state_root.as_deref());
    let store = RunStore::new(state_dir.join("evals"));
    if let Some(pair) = &args.compare {
        let runtime = tokio::runtime::Builder::new_current_thread().build().context("starting the runtime")?;
        return runtime.block_on(compare(&store, &pair[0], &pair[1], args.json));
    }
    let Some(evals) = project.evals.as_ref() else {
        bail!("{} has no evals/ folder; add evals/evals.toml and a *.eval.toml file", project.dir.display());
    };
    let cases = bdk_eval::select::select(&evals.cases, &args.filters, &args.tags);
    if cases.is_empty() {
        bail!("no eval matches the selection ({} discovered; see `bdk eval --list`)", evals.cases.len());
    }
    if args.list {
        return list(&cases, args.json);
    }
    // Diagnostics before anything runs: a case naming a tool the agent lacks cannot pass or fail
    // for the reason it was written, so it stops the run.
    let mut blocked = false;
    for diagnostic in &project.diagnostics {
        eprintln!("{}", report::one_line(diagnostic));
        let about_selected = cases.iter().any(|c| diagnostic.file.as_deref() == Some(c.file.as_str()));
        blocked |= diagnostic.code == Code::UnknownToolReference.as_str() && about_selected;
    }
    if blocked {
        eprintln!("error: not running evals: fix the tool names above (`bdk info` lists the agent's tools)");
        return Ok(Exit::ProjectErrors);
    }
    let batch = Batch {
        cases,
        filter_ids: args.filters.clone(),
        tags: args.tags.clone(),
        iterations: args.iterations,
        max_concurrency: evals.max_concurrency,
        timeout: evals.timeout,
    };
    // Dropped (flushed) after the runtime, once every attempt has ended.
    let export = crate::otel::Export::from_env(&project.slug)?;
    let mut setup = setup(project, state_dir, embed)?;
    setup.telemetry = export.telemetry();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let run = runtime.block_on(run_batch(&setup, &store, batch));
    drop(runtime);
    drop(export);
    let run = run?;
    print_run(&run, args.json)?;
    if let Some(path) = &args.junit {
        write_junit(path, &run)?;
    }
    Ok(if run.all_passed() { Exit::Ok } else { Exit::ProjectErrors })
}

/// The agent's model, the judge's, and tools built on each run's own state.
fn setup(project: Project, state_dir: PathBuf, embed: &Embed) -> anyhow::Result<EvalSetup> {
    let (resolved, provider) = mount::provider(&project, ModelLayer::default());
    if let Some(problem) = &resolved.problem {
        eprintln!("warning: model calls will fail: {problem}");
    }
    Ok(eval_setup(Arc::new(project), state_dir, provider, resolved.price, embed))
}

fn eval_setup(
    project: Arc<Project>,
    state_dir: PathBuf,
    provider: Arc<dyn ModelProvider>,
    price: Option<Price>,
    embed: &Embed,
) -> EvalSetup {
    let judge = bdk_eval::judge_provider(&project, &provider);
    let tools_embed = embed.clone();
    let tools_project = project.clone();
    EvalSetup {
        project,
        state_dir,
        provider,
        price,
        judge,
        telemetry: bdk_telemetry::Telemetry::disabled(),
        tools: Arc::new(move |state: &Path| tools_embed.registry(&tools_project, state).map_err(|e| e.to_string())),
    }
}

/// The eval service `serve` mounts for `project` (the `/v1/dev/evals...` routes), its runs
/// saved in `runs` (the agent's backend).
pub(super) async fn service(
    project: &Project,
    state_dir: &Path,
    runs: Arc<dyn bdk_store::EvalRunStore>,
    provider: Arc<dyn ModelProvider>,
    price: Option<Price>,
    embed: &Embed,
    telemetry: bdk_telemetry::Telemetry,
) -> anyhow::Result<Arc<bdk_eval::EvalService>> {
    let mut setup = eval_setup(Arc::new(project.clone()), state_dir.to_path_buf(), provider, price, embed);
    setup.telemetry = telemetry;
    let store = RunStore::with_backend(setup.evals_dir(), runs);
    bdk_eval::EvalService::open(setup, store)
        .await
        .with_context(|| format!("{}: reading saved eval runs", project.slug))
}

async fn run_batch(setup: &EvalSetup, store: &RunStore, batch: Batch) -> anyhow::Result<RunSnapshot> {
    let shared = Arc::new(Mutex::new(batch.snapshot(RunStore::new_run_id(), &setup.project.slug)));
    let cancel = CancellationToken::new();
    // Ctrl-C cancels the batch: running sessions are stopped and the run is saved as cancelled.
    let on_signal = cancel.clone();
    let signal = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    let progress = ProgressLine::new();
    let observe = |event: Progress<'_>, snapshot: &RunSnapshot| progress.show(event, snapshot);
    let run = bdk_eval::run_batch(setup, store, batch, shared, cancel, &observe).await;
    progress.finish();
    signal.abort();
    Ok(run)
}

/// Progress on stderr: one line redrawn in place on a terminal, a line per attempt otherwise.
struct ProgressLine {
    tty: bool,
    drawn: Mutex<bool>,
}

impl ProgressLine {
    fn new() -> Self {
        Self { tty: std::io::stderr().is_terminal(), drawn: Mutex::new(false) }
    }

    fn show(&self, event: Progress<'_>, snapshot: &RunSnapshot) {
        let totals = &snapshot.totals;
        let mut err = std::io::stderr().lock();
        if self.tty {
            const WIDTH: usize = 24;
            let filled = (totals.attempts_done * WIDTH).checked_div(totals.attempts).unwrap_or(0);
            let what = match event {
                Progress::Started { case, iteration } => format!("running {case} #{iteration}"),
                Progress::Finished { case, attempt } => {
                    format!("{} {case} #{}", if attempt.passed { "passed" } else { "FAILED" }, attempt.iteration)
                }
            };
            let _ = write!(
                err,
                "\r\x1b[2K[{}{}] {}/{} attempts, {} failed  {}",
                "#".repeat(filled),
                "-".repeat(WIDTH - filled),
                totals.attempts_done,
                totals.attempts,
                snapshot.cases.iter().filter(|c| c.status == CaseStatus::Failed).count(),
                what
            );
            if let Ok(mut drawn) = self.drawn.lock() {
                *drawn = true;
            }
        } else if let Progress::Finished { case, attempt } = event {
            let verdict = if attempt.passed { "PASS" } else { "FAIL" };
            let _ = writeln!(
                err,
                "{verdict} {case} #{} ({} ms) [{}/{}]",
                attempt.iteration, attempt.duration_ms, totals.attempts_done, totals.attempts
            );
        }
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.drawn.lock().is_ok_and(|d| *d) {
            eprintln!();
        }
    }
}

fn list(cases: &[bdk_project::model::EvalCase], json: bool) -> anyhow::Result<Exit> {
    if json {
        let rows: Vec<_> = cases
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id, "file": c.file, "description": c.description, "tags": c.tags,
                    "turns": c.turns.len(), "expectations": c.expect.count(), "iterations": c.iterations,
                    "dryRun": c.dry_run,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(Exit::Ok);
    }
    let width = cases.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for case in cases {
        let tags = if case.tags.is_empty() { String::new() } else { format!(" [{}]", case.tags.join(", ")) };
        let description = case.description.as_deref().map(|d| format!("  {d}")).unwrap_or_default();
        out.push_str(&format!("{:width$}{tags}{description}\n", case.id));
    }
    out.push_str(&format!("{} eval(s)\n", cases.len()));
    report::emit(&out);
    Ok(Exit::Ok)
}

fn print_run(run: &RunSnapshot, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(run)?);
        return Ok(());
    }
    report::emit(&summary(run));
    Ok(())
}

/// The summary table, then the failed checks of every failed attempt.
fn summary(run: &RunSnapshot) -> String {
    let width = run.cases.iter().map(|c| c.id.len()).max().unwrap_or(4).max(4);
    let mut out =
        format!("{:width$}  {:9}  {:>6}  {:>9}  {:>10}  {:>9}\n", "case", "status", "pass", "tokens", "cost", "time");
    for case in &run.cases {
        let status = format!("{:?}", case.status).to_lowercase();
        let rate = format!("{}/{}", case.passes, case.attempts.len());
        let tokens = case.usage.input_tokens + case.usage.output_tokens;
        out.push_str(&format!(
            "{:width$}  {status:9}  {rate:>6}  {tokens:>9}  {:>10}  {:>9}\n",
            case.id,
            format!("${:.4}", case.cost_usd),
            format!("{:.1}s", case.duration_ms as f64 / 1000.0)
        ));
    }
    for case in run.cases.iter().filter(|c| c.status == CaseStatus::Failed) {
        for attempt in case.attempts.iter().filter(|a| !a.passed) {
            out.push_str(&format!("\n{} #{}:\n", case.id, attempt.iteration));
            if let Some(error) = &attempt.error {
                out.push_str(&format!("  {error}\n"));
            }
            for check in attempt.checks.iter().filter(|c| !c.passed) {
                let graded = if check.model_graded { " (model-graded)" } else { "" };
                out.push_str(&format!("  x {}{graded} {}: {}\n", check.kind, check.expected, check.detail));
                if let Some(reasoning) = &check.reasoning {
                    out.push_str(&format!("      judge: {reasoning}\n"));
                }
            }
        }
    }
    let t = &run.totals;
    out.push_str(&format!(
        "\n{} passed, {} failed, {} unfinished of {} case(s); {} attempt(s); {} tokens; ${:.4}; run {} ({})\n",
        t.passed,
        t.failed,
        t.unfinished,
        t.cases,
        t.attempts_done,
        t.usage.input_tokens + t.usage.output_tokens,
        t.cost_usd,
        run.run_id,
        format!("{:?}", run.status).to_lowercase()
    ));
    out
}

fn write_junit(path: &Path, run: &RunSnapshot) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, bdk_eval::junit::to_xml(run)).with_context(|| format!("writing {}", path.display()))
}

/// A run by id from the store, or a `run.json` file by path.
async fn load(store: &RunStore, which: &str) -> anyhow::Result<RunSnapshot> {
    let path = Path::new(which);
    if path.is_file() {
        let bytes = std::fs::read(path).with_context(|| format!("reading {which}"))?;
        return Ok(bdk_eval::store::read(path, &bytes)?);
    }
    store.load(which).await.with_context(|| format!("loading eval run {which} from {}", store.dir().display()))
}

async fn compare(store: &RunStore, a: &str, b: &str, json: bool) -> anyhow::Result<Exit> {
    let (before, after) = (load(store, a).await?, load(store, b).await?);
    let comparison = bdk_eval::compare::compare(&before, &after);
    if json {
        println!("{}", serde_json::to_string_pretty(&comparison)?);
    } else {
        report::emit(&bdk_eval::compare::to_text(&comparison));
    }
    Ok(if comparison.has_regressions() { Exit::ProjectErrors } else { Exit::Ok })
}
