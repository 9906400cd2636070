//! Process containment (decision 0013): every process a call starts is ended when the call
//! ends, including ones that `setsid` or double-fork out of the process group; a tool's result
//! comes when it exits even while an escaped grandchild holds its stdout; leftovers listed in
//! a process ledger by a killed host are ended at the next start; the global process cap holds.

use std::fs;
use std::time::Duration;

use bdk_tools::contain;
use bdk_tools::{ToolInvocation, ToolRegistry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Bot, call, error_text, is_dead, read_pid, time_out_after_pid_file, within};

/// Live (not zombie) processes whose environment holds `var=value`.
fn alive_with(var: &str, value: &str) -> Vec<u32> {
    let wanted = format!("{var}={value}").into_bytes();
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(environ) = fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|b| *b == 0).any(|v| v == wanted.as_slice()) && !is_dead(pid) {
            out.push(pid);
        }
    }
    out
}

/// The processes still running for `invocation`'s call (each inherits `BDK_TOOL_CALL_ID`).
fn left_by(invocation: &ToolInvocation) -> Vec<u32> {
    alive_with("BDK_TOOL_CALL_ID", invocation.call_id.as_ref())
}

#[tokio::test]
async fn a_setsid_grandchild_holding_stdout_neither_delays_the_result_nor_survives() {
    //! Guards: a tool that exits 0 while a `setsid` grandchild keeps its stdout open returns its
    //! result (not a timeout error: waiting for the grandchild's end of stdout would run into the
    //! 20 s timeout), and the grandchild is ended with the call.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("escaped.pid");
    let script = format!("setsid sleep 300 & echo $! > {}; echo done", pidfile.display());
    let mut tool = bot.command("escape", &["sh", "-c", &script]);
    tool.timeout = Duration::from_secs(20);
    let tools = bot.registry(vec![tool]);
    let invocation = bot.invocation("escape", json!({}));
    let probe = invocation.clone();
    let outcome = call(&tools, invocation).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert_eq!(outcome.result, json!("done"));
    let pid = read_pid(&pidfile).await;
    assert!(is_dead(pid), "the setsid grandchild {pid} survived the call");
    assert!(left_by(&probe).is_empty(), "{:?}", left_by(&probe));
}

#[tokio::test]
async fn a_setsid_fork_storm_leaves_no_process() {
    //! Guards: fifty `setsid` children plus a double-forking loop that keeps spawning orphans
    //! are all gone when the call returns.
    let bot = Bot::new();
    let script = "for i in $(seq 1 50); do setsid sleep 300 & done; \
                  (setsid sh -c 'while true; do (sleep 300 &); done' &); sleep 0.3; echo started";
    let tools = bot.registry(vec![bot.command("storm", &["sh", "-c", script])]);
    let invocation = bot.invocation("storm", json!({}));
    let probe = invocation.clone();
    let outcome = call(&tools, invocation).await;
    assert_eq!(outcome.result, json!("started"), "{outcome:?}");
    assert!(left_by(&probe).is_empty(), "left running: {:?}", left_by(&probe));
}

#[tokio::test]
async fn a_timeout_ends_a_setsid_grandchild() {
    //! Guards: a call that times out takes its escaped grandchildren with it.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("hung.pid");
    let script = format!("setsid sleep 300 & echo $! > {}; sleep 300", pidfile.display());
    // Every attempt uses the same call id, so `left_by` sees what any of them left.
    let probe = bot.invocation("hang", json!({}));
    let (_, pid) = time_out_after_pid_file(&pidfile, |ms| {
        let mut tool = bot.command("hang", &["sh", "-c", &script]);
        tool.timeout = Duration::from_millis(ms);
        let tools = bot.registry(vec![tool]);
        let invocation = probe.clone();
        async move { call(&tools, invocation).await }
    })
    .await;
    assert!(is_dead(pid), "the setsid grandchild {pid} survived the timeout");
    assert!(left_by(&probe).is_empty());
}

#[tokio::test]
async fn cancelling_ends_a_double_forked_process() {
    //! Guards: cancellation ends a process that double-forked out of the group.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("daemon.pid");
    let script = format!("(setsid sh -c 'echo $$ > {}; exec sleep 300' &); sleep 300", pidfile.display());
    let tools = bot.registry(vec![bot.command("daemon", &["sh", "-c", &script])]);
    let invocation = bot.invocation("daemon", json!({}));
    let probe = invocation.clone();
    let cancel = CancellationToken::new();
    let handle = tokio::spawn(tools.call(invocation, cancel.clone()));
    let pid = read_pid(&pidfile).await;
    cancel.cancel();
    let outcome = within(handle).await.unwrap();
    assert!(error_text(&outcome).contains("cancelled"));
    assert!(is_dead(pid), "the daemon {pid} survived cancellation");
    assert!(left_by(&probe).is_empty());
}

#[tokio::test]
async fn the_shell_tool_ends_what_it_started() {
    //! Guards: the built-in `shell` is contained the same way (its result comes when `sh`
    //! exits: waiting for the grandchild would run into the 20 s `timeout_ms`).
    let bot = Bot::new();
    let tools = bdk_tools::ProjectTools::empty(bot.bot()).build().unwrap();
    let pidfile = bot.dir.path().join("shell.pid");
    let command = format!("setsid sleep 300 & echo $! > {}; echo ok", pidfile.display());
    let outcome = call(&tools, bot.invocation("shell", json!({"command": command, "timeout_ms": 20_000}))).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert!(is_dead(read_pid(&pidfile).await));
}

#[tokio::test]
async fn leftovers_in_the_ledger_are_ended_at_the_next_start() {
    //! Guards: a process a killed host left running (its tag noted in the ledger) is ended by
    //! the next start's sweep, and the ledger is emptied.
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("processes");
    fs::create_dir_all(&ledger).unwrap();
    let tag = format!("test-leftover-{}", std::process::id());
    let mut child =
        std::process::Command::new("setsid").args(["sleep", "300"]).env(contain::TAG_VAR, &tag).spawn().unwrap();
    fs::write(ledger.join(&tag), b"").unwrap();
    // Wait until the process runs under its tag (setsid may fork first).
    within(async {
        while alive_with(contain::TAG_VAR, &tag).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let ended = contain::sweep_ledger(&ledger).unwrap();
    assert!(ended >= 1, "{ended}");
    assert!(alive_with(contain::TAG_VAR, &tag).is_empty());
    assert_eq!(fs::read_dir(&ledger).unwrap().count(), 0);
    // Reaped, without blocking: the sweep ended it (or `setsid` forked and exited at once).
    within(async {
        while child.try_wait().unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_global_process_cap_bounds_concurrent_tool_processes() {
    //! Guards: far more calls than the cap never run more processes at once than the cap.
    let bot = Bot::new();
    let cap = contain::max_processes();
    let live = bot.dir.path().join("live");
    fs::create_dir_all(&live).unwrap();
    let seen = bot.dir.path().join("seen");
    fs::create_dir_all(&seen).unwrap();
    let script = format!(
        "touch {live}/$BDK_TOOL_CALL_ID; sleep 0.3; ls {live} | wc -l > {seen}/$BDK_TOOL_CALL_ID; rm {live}/$BDK_TOOL_CALL_ID",
        live = live.display(),
        seen = seen.display()
    );
    let tools = bot.registry(vec![bot.command("busy", &["sh", "-c", &script])]);
    let handles: Vec<_> = (0..cap + 12)
        .map(|_| tokio::spawn(tools.call(bot.invocation("busy", json!({})), CancellationToken::new())))
        .collect();
    let mut outcomes = Vec::new();
    for handle in handles {
        outcomes.push(within(handle).await.unwrap());
    }
    assert!(outcomes.iter().all(|o| !o.is_error), "{outcomes:?}");
    let most = fs::read_dir(&seen)
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap().trim().parse::<usize>().unwrap())
        .max()
        .unwrap();
    assert!(most <= cap, "{most} tool processes ran at once; the cap is {cap}");
}
