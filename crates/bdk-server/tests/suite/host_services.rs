//! The host services a command reaches over HTTP (`BDK_HOST_URL` + `BDK_HOST_TOKEN`), through a
//! real turn on a real socket: a Python command tool (`probe`) makes the requests its input
//! lists with Python's urllib and returns the replies. Guards: kv and files of the calling
//! session; the agent-wide scope; no reach into another session's data; `send`; `callTool` (a
//! write from inside a running turn, bound to its session); host services of direct calls; the
//! token dies with its call; forged, absent and foreign tokens are 401; proxied requests 403;
//! path escapes 400; `send` never preempts a busy session, refuses another principal's key (403)
//! and keeps the caller's dry-run.

use std::time::Duration;

use bdk_model::ScriptStep;
use bdk_server::{AuthPolicy, BearerToken};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::support::{Builder, Host, host, within};

const PROBE_TOML: &str = r#"description = "Calls the host services as its input says."
effect = "read"
command = ["python3", "lib/probe.py"]
"#;

/// A write that answers with its input and the call facts it was given.
const STAMP_TOML: &str = r#"description = "Stamps its input."
effect = "write"
command = ["python3", "-c", "import json, os, sys; i = json.load(sys.stdin)['input']; json.dump({'input': i, 'sessionId': os.environ.get('BDK_SESSION_ID'), 'hasToken': 'BDK_HOST_TOKEN' in os.environ}, sys.stdout)"]

[input_schema]
type = "object"
required = ["n"]
properties = { n = { type = "integer" } }
"#;

/// Makes each request of `input.steps` (`{path, body?, method?, token?, swap?}`) against
/// `BDK_HOST_URL` with `BDK_HOST_TOKEN` (`swap: [from, to]` edits the URL), and prints the
/// replies with the credentials it had.
const PROBE_PY: &str = r#"import json, os, sys, urllib.error, urllib.request
request = json.load(sys.stdin)
url, token = os.environ.get("BDK_HOST_URL"), os.environ.get("BDK_HOST_TOKEN")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
out = {"url": url, "token": token, "sessionId": os.environ.get("BDK_SESSION_ID"), "replies": []}
for step in request["input"].get("steps", []):
    method = step.get("method", "POST")
    data = None if method == "GET" else json.dumps(step.get("body", {})).encode()
    headers = {"content-type": "application/json"}
    bearer = step.get("token", token)
    if bearer is not None:
        headers["authorization"] = "Bearer " + bearer
    target = (url or "") + step["path"]
    if "swap" in step:
        target = target.replace(step["swap"][0], step["swap"][1])
    req = urllib.request.Request(target, data=data, headers=headers, method=method)
    try:
        with opener.open(req, timeout=20) as resp:
            out["replies"].append({"status": resp.status, "body": json.loads(resp.read())})
    except urllib.error.HTTPError as error:
        out["replies"].append({"status": error.code, "body": json.loads(error.read() or b"null")})
json.dump(out, sys.stdout)
"#;

/// A host whose agents have the probe tool and whose model calls it once per entry of
/// `probes`, answering "done" after each (and "ok" to the turns of sessions `send` starts).
async fn probe_host(slugs: &[&str], probes: &[Value]) -> Host {
    let mut steps = Vec::new();
    for (i, steps_input) in probes.iter().enumerate() {
        steps.push(ScriptStep::tool_call(format!("c{i}"), "probe", json!({ "steps": steps_input })));
        steps.push(ScriptStep::text("done"));
    }
    steps.extend((0..4).map(|_| ScriptStep::text("ok")));
    probe_builder(slugs, steps).start().await
}

/// A host whose agents have the probe and stamp tools, answering with `steps` in order.
fn probe_builder(slugs: &[&str], steps: Vec<ScriptStep>) -> Builder {
    host()
        .agents(slugs)
        .file("bot/tools/probe.toml", PROBE_TOML)
        .file("bot/lib/probe.py", PROBE_PY)
        .file("bot/tools/stamp.toml", STAMP_TOML)
        .script(steps)
}

/// Starts a session, waits for its probe call, and returns (session id, the probe's output).
async fn run_probe(host: &Host) -> (String, Value) {
    let id = host.start_session("probe").await.session_id.to_string();
    (id.clone(), probe_output(host, &id).await)
}

/// Waits for session `id`'s turn to settle and returns its probe call's output.
async fn probe_output(host: &Host, id: &str) -> Value {
    host.wait_for(id, "session.waiting", None).await;
    let events = host.events(id).await;
    let data = events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|e| e["type"] == json!("action.result") && e["data"]["toolName"] == json!("probe"))
        .expect("the probe's action.result")["data"]
        .clone();
    assert_eq!(data["isError"], json!(false), "{data}");
    data["result"].clone()
}

/// The `i`-th reply: asserts its status and returns its body.
fn reply(out: &Value, i: usize, status: u16) -> &Value {
    let reply = &out["replies"][i];
    assert_eq!(reply["status"], json!(status), "reply {i}: {reply}\nall: {out:#}");
    &reply["body"]
}

fn post(path: &str, body: Value) -> Value {
    json!({ "path": path, "body": body })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reaches_its_sessions_kv_and_files() {
    let steps = json!([
        { "path": "/session", "method": "GET" },
        post("/kv/put", json!({"key": "pr:acme/app#1", "value": {"agentId": "bc-1"}})),
        post("/kv/get", json!({"key": "pr:acme/app#1"})),
        post("/kv/get", json!({"key": "missing"})),
        post("/kv/put", json!({"key": "shared", "value": 7, "scope": "agent"})),
        post("/kv/list", json!({"prefix": "pr:"})),
        post("/files/write", json!({"path": "reports/today.md", "content": "# Today\n"})),
        post("/files/write", json!({"path": "blob.bin", "content": "AP8=", "encoding": "base64"})),
        post("/files/read", json!({"path": "reports/today.md"})),
        post("/files/read", json!({"path": "blob.bin"})),
        post("/files/list", json!({})),
        post("/kv/delete", json!({"key": "pr:acme/app#1"})),
        post("/files/delete", json!({"path": "blob.bin"})),
        post("/files/read", json!({"path": "blob.bin"})),
    ]);
    let host = probe_host(&["hello"], &[steps]).await;
    let (id, out) = run_probe(&host).await;
    assert_eq!(out["url"], json!(format!("{}/v1/host", host.base)));
    assert!(out["token"].as_str().is_some_and(|t| t.starts_with("bdkh_")), "{out}");
    assert_eq!(out["sessionId"], json!(id));

    let session = reply(&out, 0, 200);
    assert_eq!(session["sessionId"], json!(id));
    assert!(session["callId"].as_str().is_some_and(|c| c.starts_with("tool_probe_")), "{session}");
    assert_eq!(reply(&out, 1, 200)["ok"], json!(true));
    let got = reply(&out, 2, 200);
    assert_eq!((got["found"].clone(), got["value"].clone()), (json!(true), json!({"agentId": "bc-1"})));
    assert_eq!(reply(&out, 3, 200)["found"], json!(false));
    reply(&out, 4, 200);
    assert_eq!(reply(&out, 5, 200)["keys"], json!(["pr:acme/app#1"]));
    assert_eq!(reply(&out, 6, 200)["size"], json!(8));
    assert_eq!(reply(&out, 7, 200)["size"], json!(2));
    let text = reply(&out, 8, 200);
    assert_eq!((text["content"].clone(), text["encoding"].clone()), (json!("# Today\n"), json!("utf8")));
    let blob = reply(&out, 9, 200);
    assert_eq!((blob["content"].clone(), blob["encoding"].clone()), (json!("AP8="), json!("base64")));
    let listed = reply(&out, 10, 200)["files"].clone();
    assert_eq!(listed, json!([{"path": "blob.bin", "size": 2}, {"path": "reports/today.md", "size": 8}]));
    assert_eq!(reply(&out, 11, 200)["deleted"], json!(true));
    assert_eq!(reply(&out, 12, 200)["deleted"], json!(true));
    assert_eq!(reply(&out, 13, 200)["found"], json!(false));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_reaches_only_its_own_session_and_dies_with_its_call() {
    let writer = json!([
        post("/kv/put", json!({"key": "secret", "value": "a's"})),
        post("/files/write", json!({"path": "a.txt", "content": "a's file"})),
        post("/kv/put", json!({"key": "shared", "value": "everyone's", "scope": "agent"})),
    ]);
    // The reader names another session in two requests: whichever it is, that is 403.
    let reader = |other: &str| {
        json!([
            post("/kv/get", json!({"key": "secret"})),
            post("/files/read", json!({"path": "a.txt"})),
            post("/kv/list", json!({})),
            post("/files/list", json!({})),
            post("/kv/get", json!({"key": "shared", "scope": "agent"})),
            post("/kv/get", json!({"key": "secret", "sessionId": other})),
            post("/files/read", json!({"path": "a.txt", "sessionId": other})),
        ])
    };
    let host = probe_host(&["hello"], &[writer, reader("ses_someoneelse")]).await;
    let (a, out_a) = run_probe(&host).await;
    let (b, out_b) = run_probe(&host).await;
    assert_ne!(a, b);
    for i in 0..3 {
        reply(&out_a, i, 200);
    }
    assert_eq!(reply(&out_b, 0, 200)["found"], json!(false), "b cannot read a's kv");
    assert_eq!(reply(&out_b, 1, 200)["found"], json!(false), "b cannot read a's files");
    assert_eq!(reply(&out_b, 2, 200)["keys"], json!([]));
    assert_eq!(reply(&out_b, 3, 200)["files"], json!([]));
    assert_eq!(reply(&out_b, 4, 200)["value"], json!("everyone's"), "the agent scope is shared");
    assert_eq!(reply(&out_b, 5, 403)["error"], json!("forbidden"));
    assert_eq!(reply(&out_b, 6, 403)["error"], json!("forbidden"));

    // Both calls returned: their tokens are revoked.
    assert_eq!(host.state.host_tokens.live(), 0);
    let url = out_a["url"].as_str().unwrap();
    let token = out_a["token"].as_str().unwrap();
    let late = host
        .client
        .post(format!("{url}/kv/get"))
        .bearer_auth(token)
        .json(&json!({"key": "secret", "sessionId": a}))
        .send();
    let late = super::support::reply(within("a late host request", late).await.unwrap()).await;
    late.assert_error(401, "unauthorized");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_absent_foreign_and_proxied_tokens_are_refused() {
    // The probe tries its own token on the other agent's routes, then a forged one on its own.
    let forged = format!("bdkh_{}", "0".repeat(64));
    let steps = json!([
        { "path": "/kv/get", "body": {"key": "k"}, "swap": ["/one/v1/host", "/two/v1/host"] },
        { "path": "/kv/get", "body": {"key": "k"}, "token": forged },
        post("/kv/get", json!({"key": "k"})),
    ]);
    let host = probe_host(&["one", "two"], &[steps]).await;
    let (_, out) = run_probe(&host).await;
    assert_eq!(reply(&out, 0, 401)["error"], json!("unauthorized"), "a token is good for its own agent only");
    reply(&out, 1, 401);
    reply(&out, 2, 200);

    let url = host.url("/v1/host/kv/get");
    let absent = host.client.post(&url).json(&json!({"key": "k"})).send();
    let absent = super::support::reply(within("no token", absent).await.unwrap()).await;
    absent.assert_error(401, "unauthorized");
    assert_eq!(absent.headers["www-authenticate"], "Bearer");
    let wrong = host.client.post(&url).bearer_auth(&forged).json(&json!({"key": "k"})).send();
    super::support::reply(within("a forged token", wrong).await.unwrap()).await.assert_error(401, "unauthorized");
    let proxied =
        host.client.post(&url).bearer_auth(&forged).header("x-forwarded-for", "203.0.113.9").json(&json!({})).send();
    super::support::reply(within("a proxied request", proxied).await.unwrap()).await.assert_error(403, "forbidden");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_paths_that_leave_the_area_are_400() {
    let steps = json!([
        post("/files/write", json!({"path": "../kv/secret.json", "content": "x"})),
        post("/files/write", json!({"path": "/etc/passwd", "content": "x"})),
        post("/files/read", json!({"path": "a/../../b"})),
        post("/files/write", json!({"path": ".hidden", "content": "x"})),
        post("/files/write", json!({"path": "ok.txt", "content": "%%%", "encoding": "base64"})),
        post("/kv/put", json!({"key": "", "value": 1})),
        post("/kv/get", json!({"key": "k", "scope": "elsewhere"})),
    ]);
    let host = probe_host(&["hello"], &[steps]).await;
    let (_, out) = run_probe(&host).await;
    for i in 0..4 {
        assert_eq!(reply(&out, i, 400)["error"], json!("invalid_path"));
    }
    assert_eq!(reply(&out, 4, 400)["error"], json!("invalid_request"));
    assert_eq!(reply(&out, 5, 400)["error"], json!("invalid_key"));
    assert_eq!(reply(&out, 6, 400)["error"], json!("invalid_request"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_starts_then_resumes_a_channel_session() {
    let send = |message: &str| post("/send", json!({"channel": "ops", "message": message, "continuationKey": "inc-7"}));
    let steps = json!([
        send("page the on-call"),
        send("still down"),
        post("/send", json!({"channel": "ops", "message": ""})),
        post("/send", json!({"channel": "http", "message": "x", "continuationKey": "k"})),
    ]);
    let host = probe_host(&["hello"], &[steps]).await;
    let (caller, out) = run_probe(&host).await;
    let first = reply(&out, 0, 200).clone();
    let second = reply(&out, 1, 200);
    assert_eq!(first["created"], json!(true), "{first}");
    assert_eq!(second["created"], json!(false), "{second}");
    assert_eq!(first["sessionId"], second["sessionId"]);
    assert_eq!(first["continuationToken"], json!("ops:inc-7"));
    assert_ne!(first["sessionId"], json!(caller));
    assert_eq!(reply(&out, 2, 400)["error"], json!("invalid_request"));
    assert_eq!(reply(&out, 3, 400)["error"], json!("invalid_request"));

    let listed = host.get("/v1/sessions").await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let sessions = listed.body["sessions"].as_array().unwrap();
    let sent = sessions.iter().find(|s| s["sessionId"] == first["sessionId"]).unwrap();
    assert_eq!(sent["channel"], json!("ops"));
    assert_eq!(sent["principal"], json!("local"), "sent as the calling session's principal");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_never_preempts_a_busy_session() {
    // The probe sends twice to `ops:inc-8`; the session the first send starts is still in its
    // slow first turn when the second arrives (both sends are made within one tool call).
    let send = |message: &str| post("/send", json!({"channel": "ops", "message": message, "continuationKey": "inc-8"}));
    let mut steps = vec![ScriptStep::tool_call("c0", "probe", json!({"steps": [send("first"), send("second")]}))];
    steps.extend((0..3).map(|_| ScriptStep::text("answered").with_delay(Duration::from_secs(3))));
    let host = probe_builder(&["hello"], steps).start().await;
    let (_, out) = run_probe(&host).await;
    let first = reply(&out, 0, 200).clone();
    let second = reply(&out, 1, 200);
    assert_eq!(second["sessionId"], first["sessionId"]);
    assert!(first["turnId"].is_string(), "{first}");
    assert_eq!(second["turnId"], Value::Null, "joined the running turn's follow-ups: {second}");

    let sent = first["sessionId"].as_str().unwrap();
    let settled = host.wait_for(sent, "turn.completed", None).await;
    host.wait_for(sent, "turn.completed", Some(settled.index)).await;
    let events = host.events(sent).await;
    let kinds: Vec<String> = events.iter().map(|e| e.event_type().to_owned()).collect();
    assert!(!kinds.iter().any(|t| t == "turn.failed"), "nothing was preempted: {kinds:?}");
    let turns: Vec<_> = events.iter().filter(|e| e.event_type() == "turn.started").collect();
    assert_eq!(turns.len(), 2, "{kinds:?}");
    assert_eq!(turns[0].turn_id.as_ref().map(ToString::to_string), first["turnId"].as_str().map(str::to_owned));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_refuses_a_key_another_principal_owns() {
    let send = json!([post("/send", json!({"channel": "ops", "message": "mine", "continuationKey": "inc-9"}))]);
    let host = probe_builder(
        &["hello"],
        vec![
            ScriptStep::tool_call("c0", "probe", json!({"steps": send})),
            ScriptStep::text("done"),
            ScriptStep::text("ok"),
            ScriptStep::tool_call("c1", "probe", json!({"steps": send})),
            ScriptStep::text("done"),
        ],
    )
    .options(|o| {
        o.auth = AuthPolicy::from_flags(
            vec![BearerToken::parse("alice=alice-secret").unwrap(), BearerToken::parse("bob=bob-secret").unwrap()],
            false,
        )
    })
    .token("alice-secret")
    .start()
    .await;
    let (_, alice) = run_probe(&host).await;
    let owned = reply(&alice, 0, 200);
    let sent = owned["sessionId"].as_str().unwrap().to_owned();
    host.wait_for(&sent, "session.waiting", None).await;

    let bob = host.as_token(Some("bob-secret"));
    let (_, out) = run_probe(&bob).await;
    assert_eq!(reply(&out, 0, 403)["error"], json!("forbidden"), "{out}");
    let events = host.events(&sent).await;
    let received = events.iter().filter(|e| e.event_type() == "message.received").count();
    assert_eq!(received, 1, "bob's message never reached alice's session");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_sessions_sends_start_dry_run_sessions() {
    let steps = json!([post("/send", json!({"channel": "ops", "message": "rehearse", "continuationKey": "drill"}))]);
    let host = probe_host(&["hello"], &[steps]).await;
    let started = host.post("/v1/session", &json!({"message": "probe", "dryRun": true})).await;
    assert_eq!(started.status, StatusCode::OK, "{}", started.text);
    let caller = started.body["sessionId"].as_str().unwrap().to_owned();
    let out = probe_output(&host, &caller).await;
    let sent = reply(&out, 0, 200)["sessionId"].as_str().unwrap().to_owned();
    let first = serde_json::to_value(&host.events(&sent).await[0]).unwrap();
    assert_eq!(first["type"], json!("session.started"));
    assert_eq!(first["data"]["dryRun"], json!(true), "{first}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_tool_runs_a_tool_bound_to_the_calling_session() {
    let steps = json!([
        post("/call-tool", json!({"name": "stamp", "input": {"n": 1}})),
        post("/call-tool", json!({"name": "nope"})),
        post("/call-tool", json!({"name": "stamp", "input": {"n": "one"}})),
    ]);
    let host = probe_host(&["hello"], &[steps]).await;
    let (id, out) = run_probe(&host).await;
    // A write, called while the caller's own turn runs: part of that call, so not `session_busy`.
    let called = reply(&out, 0, 200);
    assert_eq!(called["toolName"], json!("stamp"));
    assert_eq!(called["isError"], json!(false), "{called}");
    assert_eq!(called["result"], json!({"input": {"n": 1}, "sessionId": id, "hasToken": true}));
    let unknown = reply(&out, 1, 404);
    assert_eq!(unknown["error"], json!("unknown_tool"));
    assert!(unknown["message"].as_str().unwrap().contains("stamp"), "{unknown}");
    assert_eq!(reply(&out, 2, 400)["error"], json!("invalid_tool_input"));

    // The nested call is on the session's stream, marked direct.
    let events = host.events(&id).await;
    let nested = events
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .find(|e| e["type"] == json!("action.result") && e["data"]["toolName"] == json!("stamp"));
    assert_eq!(nested.unwrap()["data"]["direct"], json!(true));
    assert_eq!(host.state.host_tokens.live(), 0);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_calls_get_host_services_too() {
    let host = probe_host(&["hello"], &[]).await;
    let steps = json!([
        post("/kv/get", json!({"key": "k"})),
        post("/kv/put", json!({"key": "k", "value": "direct", "scope": "agent"})),
        post("/call-tool", json!({"name": "stamp", "input": {"n": 2}})),
    ]);
    let called = host.post("/v1/tools/probe", &json!({"input": {"steps": steps}})).await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    let out = &called.body["result"];
    assert_eq!(reply(out, 0, 400)["error"], json!("no_session"), "an unbound call has no session data");
    reply(out, 1, 200);
    let stamped = reply(out, 2, 200);
    assert_eq!(stamped["result"]["sessionId"], Value::Null);

    // Bound to a session, the call reaches that session's data.
    let session = host.start_session("hi").await.session_id.to_string();
    host.wait_for(&session, "session.waiting", None).await;
    let steps = json!([
        post("/kv/put", json!({"key": "mine", "value": 1})),
        post("/kv/get", json!({"key": "k", "scope": "agent"})),
        { "path": "/session", "method": "GET" },
    ]);
    let bound = host.post("/v1/tools/probe", &json!({"input": {"steps": steps}, "sessionId": session})).await;
    assert_eq!(bound.status, StatusCode::OK, "{}", bound.text);
    let out = &bound.body["result"];
    reply(out, 0, 200);
    assert_eq!(reply(out, 1, 200)["value"], json!("direct"));
    assert_eq!(reply(out, 2, 200)["sessionId"], json!(session));
    assert_eq!(host.state.host_tokens.live(), 0);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_arms_lists_and_cancels_reminders_of_its_own_session() {
    let steps = json!([
        post("/reminders/create", json!({"delay": "2h", "prompt": "Re-check CI.", "purpose": "ci"})),
        post("/reminders/list", json!({})),
        post("/reminders/create", json!({"every": "100ms", "prompt": "too fast"})),
        post("/reminders/create", json!({"delay": "1h", "handler": "nope"})),
        post("/reminders/create", json!({"at": "2000-01-01T00:00:00Z", "prompt": "past"})),
        post("/reminders/cancel", json!({"id": "rem_unknown"})),
    ]);
    let host = probe_host(&["hello"], &[steps]).await;
    let (id, out) = run_probe(&host).await;
    let created = &reply(&out, 0, 200)["reminder"];
    assert_eq!((&created["sessionId"], &created["status"]), (&json!(id), &json!("active")), "{created}");
    let listed = &reply(&out, 1, 200)["reminders"];
    assert_eq!(listed[0]["id"], created["id"]);
    assert_eq!(reply(&out, 2, 400)["error"], json!("invalid_reminder"));
    assert_eq!(reply(&out, 3, 400)["error"], json!("unknown_handler"));
    assert_eq!(reply(&out, 4, 400)["error"], json!("invalid_reminder"));
    assert_eq!(reply(&out, 5, 404)["error"], json!("reminder_not_found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_route_refuses_unknown_fields_naming_them() {
    let routes = [
        "/kv/get",
        "/kv/put",
        "/kv/delete",
        "/kv/list",
        "/files/read",
        "/files/write",
        "/files/delete",
        "/files/list",
        "/send",
        "/call-tool",
        "/reminders/create",
        "/reminders/cancel",
        "/mcp/tools",
        "/mcp/call",
        "/artifacts/tag",
        "/artifacts/list",
        "/otel/metric",
        "/otel/tag",
    ];
    // A value of the wrong type is named by its field.
    let wrong_types = [
        ("/otel/metric", json!({"name": "orders", "value": "high"}), "field `value`"),
        ("/otel/metric", json!({"name": "orders", "value": 1, "kind": 5}), "field `kind`"),
        ("/otel/tag", json!({"key": 7, "value": "gold"}), "field `key`"),
        ("/artifacts/list", json!({"limit": "ten"}), "field `limit`"),
        ("/artifacts/tag", json!({"key": "k", "title": ["x"]}), "field `title`"),
    ];
    let mut steps: Vec<Value> = routes.iter().map(|route| post(route, json!({"bogusField": 1}))).collect();
    steps.extend(wrong_types.iter().map(|(route, body, _)| post(route, body.clone())));
    let host = probe_host(&["hello"], &[Value::Array(steps)]).await;
    let (_, out) = run_probe(&host).await;
    for (i, route) in routes.iter().enumerate() {
        let body = reply(&out, i, 400);
        assert_eq!(body["error"], json!("invalid_request"), "{route}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains("unknown field `bogusField`, expected"), "{route}: {message}");
    }
    for (j, (route, _, named)) in wrong_types.iter().enumerate() {
        let body = reply(&out, routes.len() + j, 400);
        assert_eq!(body["error"], json!("invalid_request"), "{route}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{route}: {named} in {message}");
    }
    host.shutdown().await;
}
