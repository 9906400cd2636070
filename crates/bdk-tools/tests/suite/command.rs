//! Command tools, one process per call (DESIGN.md §3): JSON and text stdout, non-zero exits with
//! the stderr tail, timeouts and cancellation that kill the whole process group, the output cap,
//! garbage output, the `BDK_*` environment, and tools that never read stdin.

use std::time::Duration;

use bdk_project::model::ToolBody;
use bdk_tools::command::Limits;
use bdk_tools::{HostAccess, ProjectTools, ToolRegistry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Bot, call, def, error_text, read_pid, time_out_after_pid_file, wait_dead, within};

const ECHO_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys
request = json.load(sys.stdin)
json.dump({"input": request["input"], "context": request["context"], "cwd": os.getcwd()}, sys.stdout)
"#;

#[tokio::test]
async fn json_stdout_is_the_result_with_input_and_context() {
    //! Guards: stdin carries `{"input", "context"}`, stdout JSON is the result, cwd is the bot folder.
    let bot = Bot::new();
    bot.script("lib/echo.py", ECHO_PY);
    let tools = bot.registry(vec![bot.command("echo", &["python3", "lib/echo.py"])]);
    let mut invocation = bot.invocation("echo", json!({"text": "hi"}));
    invocation.dry_run = false;
    let call_id = invocation.call_id.to_string();
    let outcome = call(&tools, invocation).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert!(!outcome.stubbed);
    let result = outcome.result;
    assert_eq!(result["input"], json!({"text": "hi"}));
    assert_eq!(result["context"]["callId"], json!(call_id));
    assert_eq!(result["context"]["dryRun"], json!(false));
    assert_eq!(result["context"]["workspaceDir"], json!(bot.workspace().display().to_string()));
    assert_eq!(result["context"]["stateRoot"], json!(bot.state().display().to_string()));
    assert_eq!(result["cwd"], json!(bot.bot().canonicalize().unwrap().display().to_string()));
}

#[tokio::test]
async fn text_stdout_passes_through() {
    //! Guards: stdout that is not JSON is the result as text (trimmed), from `/bin/sh` too.
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("hello", &["sh", "-c", "cat >/dev/null; echo hello world"])]);
    let outcome = call(&tools, bot.invocation("hello", json!({}))).await;
    assert_eq!(outcome.result, json!("hello world"));
    assert!(!outcome.is_error);
}

#[tokio::test]
async fn a_relative_program_path_resolves_in_the_bot_folder() {
    //! Guards: `command = ["lib/tool.py"]` runs the bot's own script, not one relative to the host cwd.
    let bot = Bot::new();
    bot.script("lib/tool.py", ECHO_PY);
    let tools = bot.registry(vec![bot.command("tool", &["lib/tool.py"])]);
    let outcome = call(&tools, bot.invocation("tool", json!({"a": 1}))).await;
    assert_eq!(outcome.result["input"], json!({"a": 1}), "{outcome:?}");
}

#[tokio::test]
async fn an_inline_server_script_runs_from_the_bot_folder() {
    //! Guards: a server tool with `script` is written out once and run with the bot folder as cwd.
    let bot = Bot::new();
    let script = "#!/bin/sh\ncat >/dev/null\npwd\n";
    let tools = bot.registry(vec![def("where", ToolBody::Script(script.into()), &bot.bot())]);
    let outcome = call(&tools, bot.invocation("where", json!({}))).await;
    assert_eq!(outcome.result, json!(bot.bot().canonicalize().unwrap().display().to_string()), "{outcome:?}");
    // Without a `#!` line it runs under sh.
    let tools = bot.registry(vec![def("plain", ToolBody::Script("echo plain".into()), &bot.bot())]);
    assert_eq!(call(&tools, bot.invocation("plain", json!({}))).await.result, json!("plain"));
}

#[tokio::test]
async fn a_non_zero_exit_is_an_error_with_the_stderr_tail() {
    //! Guards: exit 3 → isError naming the status and carrying the end of stderr (about 4 KiB).
    let bot = Bot::new();
    let script = "import sys\nfor i in range(2000): print('noise', i, file=sys.stderr)\n\
                  print('the real reason', file=sys.stderr)\nsys.exit(3)\n";
    bot.script("lib/fail.py", script);
    let tools = bot.registry(vec![bot.command("fail", &["python3", "lib/fail.py"])]);
    let text = error_text(&call(&tools, bot.invocation("fail", json!({}))).await);
    assert!(text.contains("exited with status 3"), "{text}");
    assert!(text.ends_with("the real reason"), "{text}");
    assert!(!text.contains("noise 0\n"), "only the tail is kept");
    assert!(text.len() < 4096 + 200, "{} bytes", text.len());
}

#[tokio::test]
async fn a_crash_is_an_error_naming_the_signal() {
    //! Guards: a tool killed by a signal (here SIGSEGV sent to itself) is an error result.
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("crash", &["sh", "-c", "kill -SEGV $$"])]);
    let text = error_text(&call(&tools, bot.invocation("crash", json!({}))).await);
    assert!(text.contains("killed by signal 11"), "{text}");
}

#[tokio::test]
async fn a_missing_program_is_an_error() {
    //! Guards: a command that cannot start is an error result, not a panic.
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("ghost", &["./no-such-program"])]);
    let text = error_text(&call(&tools, bot.invocation("ghost", json!({}))).await);
    assert!(text.contains("could not start"), "{text}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    //! Guards: past `timeout` the call ends with an error naming the timeout, and a grandchild
    //! (`sleep` started in the background) dies with the group.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("grandchild.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let (_, pid) = time_out_after_pid_file(&pidfile, |ms| {
        let mut tool = bot.command("hang", &["sh", "-c", &script]);
        tool.timeout = Duration::from_millis(ms);
        let tools = bot.registry(vec![tool]);
        let invocation = bot.invocation("hang", json!({}));
        async move { call(&tools, invocation).await }
    })
    .await;
    wait_dead(pid).await;
}

#[tokio::test]
async fn cancellation_stops_the_call_and_its_processes() {
    //! Guards: firing the call's token ends it promptly with an error, killing the group.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("sleeper.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let tools = bot.registry(vec![bot.command("slow", &["sh", "-c", &script])]);
    let cancel = CancellationToken::new();
    let running = tools.call(bot.invocation("slow", json!({})), cancel.clone());
    let handle = tokio::spawn(running);
    let pid = read_pid(&pidfile).await;
    cancel.cancel();
    let outcome = within(handle).await.unwrap();
    assert!(error_text(&outcome).contains("cancelled"));
    wait_dead(pid).await;
}

#[tokio::test]
async fn dropping_the_call_kills_its_processes() {
    //! Guards: an aborted call future (the engine dropping a task) leaves no process behind.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("orphan.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let tools = bot.registry(vec![bot.command("slow", &["sh", "-c", &script])]);
    let handle = tokio::spawn(tools.call(bot.invocation("slow", json!({})), CancellationToken::new()));
    let pid = read_pid(&pidfile).await;
    handle.abort();
    let _ = handle.await;
    wait_dead(pid).await;
}

#[tokio::test]
async fn a_normal_exit_ends_the_processes_it_left_behind() {
    //! Guards: a tool that succeeds while a background child it started keeps running (its
    //! output sent elsewhere, so nothing holds the tool's stdout) answers at once, and the
    //! child is ended with the call.
    let bot = Bot::new();
    let pidfile = bot.dir.path().join("leftover.pid");
    let script = format!("sleep 300 > /dev/null 2>&1 & echo $! > {}; echo '{{\"done\": true}}'", pidfile.display());
    let tools = bot.registry(vec![bot.command("quick", &["sh", "-c", &script])]);
    let outcome = call(&tools, bot.invocation("quick", json!({}))).await;
    assert!(!outcome.is_error, "the result did not wait for the leftover: {:?}", outcome.result);
    assert_eq!(outcome.result, json!({"done": true}));
    let pid = read_pid(&pidfile).await;
    wait_dead(pid).await;
}

#[tokio::test]
async fn an_output_flood_is_cut_off() {
    //! Guards: stdout past the cap kills the tool at once and is an error naming the limit.
    let bot = Bot::new();
    let tools = ProjectTools::empty(bot.bot())
        .without_builtins()
        .limits(Limits { max_output: 64 * 1024, ..Limits::default() })
        .tool(bot.command("flood", &["yes", "flood"]))
        .build()
        .unwrap();
    // Not cut off, `yes` would run into the 60 s default timeout, past `call`'s 30 s wait.
    let text = error_text(&call(&tools, bot.invocation("flood", json!({}))).await);
    assert!(text.contains("output exceeded 64 KiB"), "{text}");
}

#[tokio::test]
async fn garbage_stdout_is_text_not_a_failure() {
    //! Guards: invalid JSON and invalid UTF-8 on stdout come back as (lossy) text.
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("junk", &["sh", "-c", r"printf '{not json \377\376 ]]'"])]);
    let outcome = call(&tools, bot.invocation("junk", json!({}))).await;
    assert!(!outcome.is_error, "{outcome:?}");
    let text = outcome.result.as_str().unwrap();
    assert!(text.starts_with("{not json"), "{text}");
}

#[tokio::test]
async fn the_bdk_environment_is_set() {
    //! Guards: BDK_SESSION_ID, BDK_WORKSPACE_DIR, BDK_STATE_ROOT, BDK_TOOL_CALL_ID, and
    //! BDK_HOST_URL / BDK_HOST_TOKEN only when the call carries host access.
    let bot = Bot::new();
    let script = "#!/usr/bin/env python3\nimport json, os, sys\nsys.stdin.read()\n\
                  json.dump({k: v for k, v in os.environ.items() if k.startswith('BDK_')}, sys.stdout)\n";
    bot.script("lib/env.py", script);
    let tools = bot.registry(vec![bot.command("env", &["lib/env.py"])]);
    let mut invocation = bot.invocation("env", json!({}));
    let session = bdk_protocol::SessionId::generate();
    invocation.session_id = Some(session.clone());
    invocation.host = Some(HostAccess { url: "http://127.0.0.1:9/host".into(), token: "tok".into() });
    let call_id = invocation.call_id.to_string();
    let env = call(&tools, invocation).await.result;
    assert_eq!(env["BDK_SESSION_ID"], json!(session.to_string()));
    assert_eq!(env["BDK_WORKSPACE_DIR"], json!(bot.workspace().display().to_string()));
    assert_eq!(env["BDK_STATE_ROOT"], json!(bot.state().display().to_string()));
    assert_eq!(env["BDK_TOOL_CALL_ID"], json!(call_id));
    assert_eq!(env["BDK_HOST_URL"], json!("http://127.0.0.1:9/host"));
    assert_eq!(env["BDK_HOST_TOKEN"], json!("tok"));

    let env = call(&tools, bot.invocation("env", json!({}))).await.result;
    assert!(env.get("BDK_HOST_TOKEN").is_none(), "{env}");
    assert!(env.get("BDK_SESSION_ID").is_none(), "{env}");
}

#[tokio::test]
async fn a_tool_that_never_reads_stdin_still_answers() {
    //! Guards: a large request to a tool that ignores stdin is not a failure (broken pipe ignored).
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("deaf", &["echo", "{\"ok\": true}"])]);
    let big = "x".repeat(2 * 1024 * 1024);
    let outcome = call(&tools, bot.invocation("deaf", json!({"blob": big}))).await;
    assert_eq!(outcome.result, json!({"ok": true}), "{outcome:?}");
}

#[tokio::test]
async fn an_envelope_sets_the_error_flag() {
    //! Guards: the reference's `{content, isError}` envelope marks the outcome as an error.
    let bot = Bot::new();
    let out = r#"{"content": [{"type": "text", "text": "quota exceeded"}], "isError": true}"#;
    let tools = bot.registry(vec![bot.command("env", &["echo", out])]);
    let outcome = call(&tools, bot.invocation("env", json!({}))).await;
    assert!(outcome.is_error);
    assert_eq!(outcome.result["content"][0]["text"], json!("quota exceeded"));
}

#[tokio::test]
async fn unknown_tools_list_the_available_names() {
    //! Guards: calling a name the registry lacks is an error naming what exists.
    let bot = Bot::new();
    let tools = bot.registry(vec![bot.command("a", &["true"]), bot.command("b", &["true"])]);
    let text = error_text(&call(&tools, bot.invocation("nope", json!({}))).await);
    assert!(text.contains("unknown tool `nope`") && text.contains("a, b"), "{text}");
    assert!(tools.validate_input("nope", &json!({})).is_err());
}
