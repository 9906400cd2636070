//! Persistent command tools: many calls served by one process over NDJSON, concurrent calls
//! served by a small pool of processes, an error response, results and envelopes as sent,
//! restarts after the process dies (between calls and during one), hangs that time out, and the
//! process killed when the registry goes away.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Bot, call, error_text, is_dead, wait_dead};
use bdk_tools::ToolRegistry;

const SERVER_PY: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
for line in sys.stdin:
    request = json.loads(line)
    given = request["input"]
    if given.get("die"):
        print("dying on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    if given.get("hang"):
        time.sleep(300)
    if given.get("meet"):
        # Wait (briefly) until `count` processes have arrived in the folder `meet`.
        open(os.path.join(given["meet"], str(os.getpid())), "w").close()
        deadline = time.time() + 8
        while len(os.listdir(given["meet"])) < given["count"] and time.time() < deadline:
            time.sleep(0.005)
        met = len(os.listdir(given["meet"]))
        print(json.dumps({"id": request["id"], "result": {"pid": os.getpid(), "met": met}}), flush=True)
        continue
    if given.get("fail"):
        print(json.dumps({"id": request["id"], "error": "bad input"}), flush=True)
        continue
    if given.get("envelope"):
        content = [{"type": "text", "text": "no such row"}]
        print(json.dumps({"id": request["id"], "result": {"content": content, "isError": True}}), flush=True)
        continue
    if given.get("echo"):
        print(json.dumps({"id": request["id"], "result": {"keys": list(request), "input": given}}), flush=True)
        continue
    print("a log line, not a response", flush=True)
    result = {"pid": os.getpid(), "n": given.get("n"), "callId": request["context"]["callId"]}
    print(json.dumps({"id": request["id"], "result": result}), flush=True)
"#;

/// The persistent tool with a timeout generous enough for interpreter start-up and a queue of
/// calls on a loaded machine (only the hang test wants it short: [`server_with_timeout`]).
fn server(bot: &Bot) -> bdk_tools::ProjectTools {
    server_with_timeout(bot, Duration::from_secs(60))
}

fn server_with_timeout(bot: &Bot, timeout: Duration) -> bdk_tools::ProjectTools {
    bot.script("lib/server.py", SERVER_PY);
    let mut tool = bot.command("hot", &["python3", "lib/server.py"]);
    tool.persistent = true;
    tool.timeout = timeout;
    bot.registry(vec![tool])
}

fn pid(result: &Value) -> u64 {
    result["pid"].as_u64().unwrap_or_else(|| panic!("no pid in {result}"))
}

#[tokio::test]
async fn many_calls_share_one_process() {
    //! Guards: twenty calls are answered by one process, each with its own id and context.
    let bot = Bot::new();
    let tools = server(&bot);
    assert_eq!(tools.lookup("hot").unwrap().kind, bdk_tools::ToolKind::Persistent);
    let mut pids = Vec::new();
    for n in 0..20 {
        let invocation = bot.invocation("hot", json!({"n": n}));
        let call_id = invocation.call_id.to_string();
        let outcome = call(&tools, invocation).await;
        assert!(!outcome.is_error, "{outcome:?}");
        assert_eq!(outcome.result["n"], json!(n));
        assert_eq!(outcome.result["callId"], json!(call_id));
        pids.push(pid(&outcome.result));
    }
    pids.dedup();
    assert_eq!(pids.len(), 1, "one process served every call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_get_their_own_answer() {
    //! Guards: calls issued together each get their own answer (requests never interleave).
    let bot = Bot::new();
    let tools = server(&bot);
    let mut handles = Vec::new();
    for n in 0..10 {
        let future = tools.call(bot.invocation("hot", json!({"n": n})), Default::default());
        handles.push(tokio::spawn(future));
    }
    for (n, handle) in handles.into_iter().enumerate() {
        let outcome = super::within(handle).await.unwrap();
        assert_eq!(outcome.result["n"], json!(n), "{outcome:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_run_in_parallel_on_a_small_pool() {
    //! Guards: three calls issued together are served by three processes at the same time
    //! (each waits until all three have arrived, which one process serving calls in turn never
    //! lets happen), and a burst larger than the pool never starts more than its processes.
    let bot = Bot::new();
    bot.script("lib/server.py", SERVER_PY);
    let mut tool = bot.command("hot", &["python3", "lib/server.py"]);
    tool.persistent = true;
    tool.timeout = Duration::from_secs(15);
    let tools = bot.registry(vec![tool]);
    let meet = tempfile::tempdir().unwrap();
    let burst = |calls: usize, count: usize| {
        (0..calls)
            .map(|_| {
                let input = json!({"meet": meet.path(), "count": count});
                tokio::spawn(tools.call(bot.invocation("hot", input), Default::default()))
            })
            .collect::<Vec<_>>()
    };
    let mut pids = Vec::new();
    for handle in burst(3, 3) {
        let outcome = super::within(handle).await.unwrap();
        assert!(!outcome.is_error, "{outcome:?}");
        assert_eq!(outcome.result["met"], json!(3), "the calls did not run together: {outcome:?}");
        pids.push(pid(&outcome.result));
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 3, "three processes served the three calls");

    for handle in burst(12, 4) {
        let outcome = super::within(handle).await.unwrap();
        assert!(!outcome.is_error, "{outcome:?}");
        pids.push(pid(&outcome.result));
    }
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), bdk_tools::persistent::DEFAULT_PROCESSES, "{pids:?}");
    assert_eq!(tools.persistent("hot").unwrap().pids().await.len(), bdk_tools::persistent::DEFAULT_PROCESSES);
}

#[tokio::test]
async fn an_error_response_is_an_error_result() {
    //! Guards: `{"id", "error"}` is an isError outcome, and the process keeps serving.
    let bot = Bot::new();
    let tools = server(&bot);
    let first = call(&tools, bot.invocation("hot", json!({"n": 1}))).await;
    assert_eq!(error_text(&call(&tools, bot.invocation("hot", json!({"fail": true}))).await), "bad input");
    let after = call(&tools, bot.invocation("hot", json!({"n": 2}))).await;
    assert_eq!(pid(&first.result), pid(&after.result));
}

#[tokio::test]
async fn results_are_taken_as_sent_and_envelopes_carry_the_error_flag() {
    //! Guards: the request line is `{"id", "input", "context"}` in that order with the input as
    //! given; a `{"content", "isError"}` result is an envelope (error flag lifted out), and any
    //! other result is the tool's value unchanged.
    let bot = Bot::new();
    let tools = server(&bot);
    let input = json!({"echo": true, "nested": {"list": [1, 2.5, "three", null], "text": "a\"b\nc"}});
    let echoed = call(&tools, bot.invocation("hot", input.clone())).await;
    assert!(!echoed.is_error, "{echoed:?}");
    assert_eq!(echoed.result, json!({"keys": ["id", "input", "context"], "input": input}));
    let enveloped = call(&tools, bot.invocation("hot", json!({"envelope": true}))).await;
    assert!(enveloped.is_error, "{enveloped:?}");
    assert_eq!(enveloped.result, json!({"content": [{"type": "text", "text": "no such row"}]}));
}

#[tokio::test]
async fn a_killed_process_is_restarted() {
    //! Guards: after the process is killed from outside, the next call starts a new one.
    let bot = Bot::new();
    let tools = server(&bot);
    let first = pid(&call(&tools, bot.invocation("hot", json!({}))).await.result);
    std::process::Command::new("kill").arg("-9").arg(first.to_string()).status().unwrap();
    wait_dead(first as u32).await;
    let outcome = call(&tools, bot.invocation("hot", json!({}))).await;
    assert!(!outcome.is_error, "{outcome:?}");
    assert_ne!(pid(&outcome.result), first);
}

#[tokio::test]
async fn dying_mid_call_is_an_error_then_a_restart() {
    //! Guards: the call in flight when the process exits gets an error with its status and
    //! stderr; the next call is served by a fresh process.
    let bot = Bot::new();
    let tools = server(&bot);
    let first = pid(&call(&tools, bot.invocation("hot", json!({}))).await.result);
    let text = error_text(&call(&tools, bot.invocation("hot", json!({"die": true}))).await);
    assert!(text.contains("exited with status 3") && text.contains("dying on purpose"), "{text}");
    let outcome = call(&tools, bot.invocation("hot", json!({}))).await;
    assert_ne!(pid(&outcome.result), first);
}

#[tokio::test]
async fn a_hang_times_out_and_the_tool_recovers() {
    //! Guards: a call that never answers times out (the process is killed) and the next call
    //! works on a new process.
    let bot = Bot::new();
    // The timeout also bounds each call that starts the interpreter (the first, and the one
    // after the kill), which takes seconds on a loaded machine: 15 s, not less.
    let tools = server_with_timeout(&bot, Duration::from_secs(15));
    let first = pid(&call(&tools, bot.invocation("hot", json!({}))).await.result);
    let text = error_text(&call(&tools, bot.invocation("hot", json!({"hang": true}))).await);
    assert!(text.contains("timed out after 15s"), "{text}");
    wait_dead(first as u32).await;
    let outcome = call(&tools, bot.invocation("hot", json!({"n": 5}))).await;
    assert_eq!(outcome.result["n"], json!(5));
}

#[tokio::test]
async fn dropping_the_registry_kills_the_process() {
    //! Guards: the persistent process dies with the registry (process group killed on drop).
    let bot = Bot::new();
    let tools = server(&bot);
    let first = pid(&call(&tools, bot.invocation("hot", json!({}))).await.result) as u32;
    assert!(!is_dead(first));
    drop(tools);
    wait_dead(first).await;
}

#[tokio::test]
async fn per_call_host_access_travels_in_the_context() {
    //! Guards: a persistent process (whose environment is fixed) gets each call's own
    //! `hostUrl`/`hostToken` in `context`, and none when the call has no host access.
    let bot = Bot::new();
    bot.script(
        "lib/host.py",
        "#!/usr/bin/env python3\nimport json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    \
         c = r['context']\n    print(json.dumps({'id': r['id'], 'result': [c.get('hostUrl'), c.get('hostToken')]}), \
         flush=True)\n",
    );
    let mut tool = bot.command("hosted", &["python3", "lib/host.py"]);
    tool.persistent = true;
    let tools = bot.registry(vec![tool]);
    for token in ["tok-1", "tok-2"] {
        let mut invocation = bot.invocation("hosted", json!({}));
        invocation.host = Some(bdk_tools::HostAccess { url: "http://127.0.0.1:9/v1/host".into(), token: token.into() });
        let outcome = call(&tools, invocation).await;
        assert_eq!(outcome.result, json!(["http://127.0.0.1:9/v1/host", token]), "{outcome:?}");
    }
    let outcome = call(&tools, bot.invocation("hosted", json!({}))).await;
    assert_eq!(outcome.result, json!([null, null]));
}
