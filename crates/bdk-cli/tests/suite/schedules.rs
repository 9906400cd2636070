//! Schedules through `bdk serve` as a process, on the fake OpenAI server: a markdown schedule
//! dispatched under `--dev` runs a task session end to end and returns its id; the dev route is
//! absent without `--dev`; under `--no-control-plane` the internal fire route refuses requests
//! without the timed-work marker (and run the auth chain); `/v1/health` says whether the host
//! runs its own clock in each mode, and production serve fires a due reminder by itself (also
//! under `--no-schedules`); `bdk schedules`, `bdk info` and `/v1/info` show the next
//! firing and the last outcome; the `reminders_*` tools exist only behind `builtin_tools`.

use std::path::{Path, PathBuf};

use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
use serde_json::{Value, json};

use super::serve::{Server, client, within};
use super::serve_model::start_session;
use super::support::run;

/// A project with `schedules/heartbeat.md` whose model is the fake server at `url`.
fn write_project(root: &Path, url: &str) -> PathBuf {
    let bot = root.join("pulse").join("bot");
    std::fs::create_dir_all(bot.join("schedules")).unwrap();
    std::fs::write(
        bot.join("agent.toml"),
        format!(
            "name = \"pulse\"\n\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\nbase_url = \"{url}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(bot.join("instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(
        bot.join("schedules/heartbeat.md"),
        "---\ncron: \"0 9 * * 1-5\"\n---\nPull open incidents and post a summary.\n",
    )
    .unwrap();
    root.join("pulse")
}

fn answer(model: &FakeServer, text: &str) {
    model.push(Reply::sse(oa::text_reply(text, 10, 5)));
}

async fn post(url: String, marker: bool) -> (u16, Value) {
    let mut request = client().post(url);
    if marker {
        request = request.header("x-agent-serve-timed-work", "1");
    }
    let response = within("POST", request.send()).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Whether `/v1/health` says this host fires its schedules by itself.
async fn clock_runs(origin: &str) -> Value {
    let health: Value = client().get(format!("{origin}/v1/health")).send().await.unwrap().json().await.unwrap();
    health["schedules"]["clock"].clone()
}

/// Polls `/v1/info` until the schedule's last firing is settled.
async fn last_firing(origin: &str) -> Value {
    within("a settled lastFiring in /v1/info", async {
        loop {
            let info: Value = client().get(format!("{origin}/v1/info")).send().await.unwrap().json().await.unwrap();
            let last = info["schedules"][0]["lastFiring"].clone();
            if last["status"] == "completed" || last["status"] == "failed" {
                return last;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_markdown_schedule_dispatched_under_dev_runs_a_task_session_end_to_end() {
    let model = FakeServer::start().await;
    answer(&model, "No open incidents.");
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let state = root.path().join("state");
    let server = Server::start(&[
        "--dev",
        "--mode",
        "single",
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
    ]);

    let (status, body) = post(format!("{}/v1/dev/schedules/heartbeat", server.origin), false).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scheduleId"], json!("heartbeat"));
    let session = body["sessionIds"][0].as_str().unwrap_or_else(|| panic!("{body}")).to_owned();
    let last = last_firing(&server.origin).await;
    assert_eq!((&last["status"], &last["trigger"]), (&json!("completed"), &json!("dev")), "{last}");
    assert_eq!(last["sessionIds"], json!([session]));
    // The session belongs to the schedule's principal; --dev listings show every principal's.
    let listed: Value =
        client().get(format!("{}/v1/sessions", server.origin)).send().await.unwrap().json().await.unwrap();
    let row = listed["sessions"].as_array().unwrap().iter().find(|s| s["sessionId"] == json!(session)).cloned();
    let row = row.unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&row["mode"], &row["status"], &row["channel"]),
        (&json!("task"), &json!("completed"), &json!("schedule"))
    );

    // The body was the prompt the model got.
    let requests = model.wait_for_requests(1).await;
    let messages = requests[0].body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert!(user["content"].to_string().contains("Pull open incidents"), "{user}");

    // An unknown schedule is a 404 with a code.
    let (status, body) = post(format!("{}/v1/dev/schedules/nope", server.origin), false).await;
    assert_eq!((status, &body["error"]), (404, &json!("schedule_not_found")), "{body}");
    // Under --dev nothing fires by itself, so info shows no next firing.
    let info: Value = client().get(format!("{}/v1/info", server.origin)).send().await.unwrap().json().await.unwrap();
    assert!(info["schedules"][0].get("nextFireAt").is_none(), "{info}");
    assert_eq!(clock_runs(&server.origin).await, json!(false), "--dev runs no clock");
    drop(server);

    // `bdk schedules` reads the same record from the state directory.
    let (code, stdout, stderr) =
        run(&["schedules", "--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let row = &listed["agents"][0]["schedules"][0];
    assert_eq!((&row["id"], &row["lastFiring"]["status"]), (&json!("heartbeat"), &json!("completed")), "{row}");
    assert!(row["nextFireAt"].as_str().is_some(), "production serve would fire it: {row}");
    let (code, text, _) =
        run(&["schedules", "--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("heartbeat \"0 9 * * 1-5\" prompt") && text.contains("last: completed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dev_route_exists_only_under_dev() {
    let model = FakeServer::start().await;
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let server = Server::start(&["--mode", "single", "--no-schedules", "--dir", project.to_str().unwrap()]);
    let (status, body) = post(format!("{}/v1/dev/schedules/heartbeat", server.origin), false).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = post(format!("{}/v1/internal/schedules/heartbeat/fire", server.origin), true).await;
    assert_eq!(status, 404, "the internal routes exist only under --no-control-plane");
    // The reminder routes likewise: dev ones only under --dev, internal ones only under
    // --no-control-plane.
    let listed = within("GET", client().get(format!("{}/v1/dev/reminders", server.origin)).send()).await.unwrap();
    assert_eq!(listed.status().as_u16(), 404);
    let (status, _) = post(format!("{}/v1/dev/reminders/rem_x", server.origin), false).await;
    assert_eq!(status, 404);
    let (status, _) = post(format!("{}/v1/internal/reminders/rem_x/fire", server.origin), true).await;
    assert_eq!(status, 404);
    assert_eq!(clock_runs(&server.origin).await, json!(false), "--no-schedules runs no schedule clock");
    let info: Value = client().get(format!("{}/v1/info", server.origin)).send().await.unwrap().json().await.unwrap();
    assert!(info["schedules"][0].get("nextFireAt").is_none(), "{info}");
    assert!(model.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_fire_routes_refuse_unmarked_requests() {
    let model = FakeServer::start().await;
    answer(&model, "Summary posted.");
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let server = Server::start(&["--mode", "single", "--no-control-plane", "--dir", project.to_str().unwrap()]);
    let fire = format!("{}/v1/internal/schedules/heartbeat/fire", server.origin);

    let (status, body) = post(fire.clone(), false).await;
    assert_eq!((status, &body["error"]), (403, &json!("timed_work_marker_required")), "{body}");
    assert!(model.requests().is_empty(), "an unmarked request fires nothing");

    let (status, body) = post(fire, true).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sessionIds"].as_array().map(Vec::len), Some(1), "{body}");
    let (status, body) = post(format!("{}/v1/internal/schedules/nope/fire", server.origin), true).await;
    assert_eq!((status, &body["error"]), (404, &json!("schedule_not_found")), "{body}");
    // The dev route is not there: this is not --dev.
    let (status, _) = post(format!("{}/v1/dev/schedules/heartbeat", server.origin), false).await;
    assert_eq!(status, 404);
    assert_eq!(clock_runs(&server.origin).await, json!(false), "--no-control-plane starts no clock of its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_fire_routes_run_the_auth_chain_before_the_marker() {
    //! Guards: the marker alone admits nothing; the caller must also pass the host's auth chain.
    let model = FakeServer::start().await;
    answer(&model, "Summary posted.");
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    let server = Server::start(&[
        "--mode",
        "single",
        "--no-control-plane",
        "--bearer-token",
        "cron=s3cret",
        "--dir",
        project.to_str().unwrap(),
    ]);
    for path in ["/v1/internal/schedules/heartbeat/fire", "/v1/internal/reminders/rem_nope/fire"] {
        let (status, body) = post(format!("{}{path}", server.origin), true).await;
        assert_eq!((status, &body["error"]), (401, &json!("unauthorized")), "{path}: {body}");
    }
    assert!(model.requests().is_empty(), "an unauthenticated request fires nothing");
    let authed = |path: &str, marker: bool| {
        let mut request = client().post(format!("{}{path}", server.origin)).bearer_auth("s3cret");
        if marker {
            request = request.header("x-agent-serve-timed-work", "1");
        }
        request.send()
    };
    let response = within("POST", authed("/v1/internal/schedules/heartbeat/fire", false)).await.unwrap();
    assert_eq!(response.status().as_u16(), 403, "authenticated but unmarked");
    let response = within("POST", authed("/v1/internal/schedules/heartbeat/fire", true)).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["sessionIds"].as_array().map(Vec::len), Some(1), "{body}");
}

/// A project whose scripted model arms a reminder with the built-in tool, then answers twice.
fn write_reminder_project(root: &Path) -> PathBuf {
    write_reminder_project_with(root, true, "1h")
}

/// [`write_reminder_project`], with `builtin_tools.reminders` and the reminder's `delay` as given.
fn write_reminder_project_with(root: &Path, builtin: bool, delay: &str) -> PathBuf {
    let bot = root.join("watcher").join("bot");
    std::fs::create_dir_all(&bot).unwrap();
    std::fs::write(
        bot.join("agent.toml"),
        format!(
            r#"name = "watcher"

[builtin_tools]
reminders = {builtin}

[model]
id = "script"
provider = "scripted"

[[model.params.script]]
tool_calls = [{{ name = "reminders_create", arguments = {{ delay = "{delay}", prompt = "Re-check CI.", until = "CI is green" }} }}]

[[model.params.script]]
text = "Reminder set."

[[model.params.script]]
text = "Checked CI."
"#
        ),
    )
    .unwrap();
    std::fs::write(bot.join("instructions.md"), "Answer briefly.\n").unwrap();
    root.join("watcher")
}

/// The session's events once it has settled `n` times (`session.waiting`).
async fn events_after_waiting(origin: &str, session: &str, n: usize) -> Vec<Value> {
    within("session.waiting", async {
        loop {
            let url = format!("{origin}/v1/session/{session}/events?startIndex=0");
            let text = client().get(url).send().await.unwrap().text().await.unwrap();
            let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            if events.iter().filter(|e| e["type"] == "session.waiting").count() >= n {
                return events;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_arms_a_reminder_and_a_dev_dispatch_wakes_the_conversation() {
    let root = tempfile::tempdir().unwrap();
    let project = write_reminder_project(root.path());
    let server = Server::start(&["--dev", "--mode", "single", "--dir", project.to_str().unwrap()]);
    let session = start_session(&server.origin, "watch PR 42").await;
    let events = events_after_waiting(&server.origin, &session, 1).await;
    let result = events.iter().find(|e| e["type"] == "action.result").unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(result["data"]["isError"], json!(false), "{result}");
    let id = result["data"]["result"]["id"].as_str().unwrap_or_else(|| panic!("{result}")).to_owned();

    let listed: Value = client()
        .get(format!("{}/v1/dev/reminders?sessionId={session}", server.origin))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reminders = listed["reminders"].as_array().unwrap();
    assert_eq!(reminders.len(), 1, "{listed}");
    assert_eq!((&reminders[0]["id"], &reminders[0]["status"]), (&json!(id), &json!("active")));

    let (status, fired) = post(format!("{}/v1/dev/reminders/{id}", server.origin), false).await;
    assert_eq!((status, &fired["fired"]), (200, &json!(true)), "{fired}");
    let events = events_after_waiting(&server.origin, &session, 2).await;
    let woke =
        events.iter().filter(|e| e["type"] == "message.received").nth(1).unwrap_or_else(|| panic!("{events:#?}"));
    let text = woke["data"]["text"].as_str().unwrap();
    assert!(text.contains("Re-check CI.") && text.contains("CI is green"), "{text}");

    let (status, body) = post(format!("{}/v1/dev/reminders/rem_nope", server.origin), false).await;
    assert_eq!((status, &body["error"]), (404, &json!("reminder_not_found")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_builtin_tools_reminders_the_reminder_tools_are_unknown() {
    let root = tempfile::tempdir().unwrap();
    let project = write_reminder_project_with(root.path(), false, "1h");
    let server = Server::start(&["--dev", "--mode", "single", "--dir", project.to_str().unwrap()]);
    let session = start_session(&server.origin, "watch PR 42").await;
    let events = events_after_waiting(&server.origin, &session, 1).await;
    let result = events.iter().find(|e| e["type"] == "action.result").unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(result["data"]["isError"], json!(true), "{result}");
    assert!(result["data"]["result"].to_string().contains("reminders_create"), "{result}");
    let listed: Value =
        client().get(format!("{}/v1/dev/reminders", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["reminders"], json!([]), "nothing was armed: {listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_serve_runs_the_reminder_clock_even_without_schedules() {
    //! Guards: outside `--dev` and `--no-control-plane` the host fires a due reminder by itself
    //! (`--no-schedules` turns off only the schedule clock): the model arms a one-second
    //! reminder and its wake reaches the conversation with no request.
    let root = tempfile::tempdir().unwrap();
    let project = write_reminder_project_with(root.path(), true, "1s");
    let server = Server::start(&["--mode", "single", "--no-schedules", "--dir", project.to_str().unwrap()]);
    let session = start_session(&server.origin, "watch PR 42").await;
    // The first turn arms it; the wake is a second turn that settles the session again.
    let events = events_after_waiting(&server.origin, &session, 2).await;
    let woke =
        events.iter().filter(|e| e["type"] == "message.received").nth(1).unwrap_or_else(|| panic!("{events:#?}"));
    let text = woke["data"]["text"].as_str().unwrap();
    assert!(text.starts_with("[reminder rem_") && text.contains("Re-check CI."), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_internal_reminder_route_refuses_unmarked_requests() {
    let root = tempfile::tempdir().unwrap();
    let project = write_reminder_project(root.path());
    let server = Server::start(&["--mode", "single", "--no-control-plane", "--dir", project.to_str().unwrap()]);
    let fire = format!("{}/v1/internal/reminders/rem_nope/fire", server.origin);
    let (status, body) = post(fire.clone(), false).await;
    assert_eq!((status, &body["error"]), (403, &json!("timed_work_marker_required")), "{body}");
    let (status, body) = post(fire, true).await;
    assert_eq!((status, &body["error"]), (404, &json!("reminder_not_found")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_serve_runs_the_schedule_clock_and_fires_a_missed_firing_once() {
    let model = FakeServer::start().await;
    answer(&model, "Late summary.");
    answer(&model, "On-time summary.");
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), &model.url());
    std::fs::write(
        project.join("bot/schedules/heartbeat.md"),
        "---\ncron: \"* * * * *\"\n---\nPull open incidents and post a summary.\n",
    )
    .unwrap();
    // The schedule fired in this state directory before: a row from long ago.
    let state = root.path().join("state");
    let rows = state.join("pulse/timed/firings/schedule/heartbeat");
    std::fs::create_dir_all(&rows).unwrap();
    let old = json!({
        "kind": "schedule", "owner": "heartbeat", "dueAt": "2020-01-01T00:00:00Z", "trigger": "cron",
        "status": "completed", "sessionIds": [], "claimedAt": "2020-01-01T00:00:00Z"
    });
    std::fs::write(rows.join(format!("{:020}.json", 1_577_836_800_000u64)), old.to_string()).unwrap();

    let server = Server::start(&[
        "--mode",
        "single",
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
    ]);
    // At start the latest minute, missed while down, fires once through the production path.
    let missed = within("the missed firing", async {
        loop {
            let found = std::fs::read_dir(&rows)
                .unwrap()
                .filter_map(|e| std::fs::read(e.unwrap().path()).ok())
                .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
                .find(|r| r["trigger"] == "missed" && r["status"] != "claimed");
            if let Some(row) = found {
                return row;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(missed["status"], json!("completed"), "{missed}");
    assert_eq!(missed["sessionIds"].as_array().map(Vec::len), Some(1));
    let info: Value = client().get(format!("{}/v1/info", server.origin)).send().await.unwrap().json().await.unwrap();
    assert!(info["schedules"][0]["nextFireAt"].as_str().is_some(), "production serve fires it: {info}");
    assert_eq!(clock_runs(&server.origin).await, json!(true));
}

#[test]
fn bdk_info_shows_the_next_firing_and_the_last_outcome() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "http://127.0.0.1:9");
    // A firing recorded in the project's default state directory, as `serve` writes it.
    let rows = project.join(".bdk/timed/firings/schedule/heartbeat");
    std::fs::create_dir_all(&rows).unwrap();
    let row = json!({
        "kind": "schedule", "owner": "heartbeat", "dueAt": "2026-03-02T09:00:00Z", "trigger": "cron",
        "status": "failed", "sessionIds": [], "claimedAt": "2026-03-02T09:00:00Z",
        "finishedAt": "2026-03-02T09:00:05Z", "error": "the model was unavailable"
    });
    std::fs::write(rows.join(format!("{:020}.json", 1_772_442_000_000u64)), row.to_string()).unwrap();

    let (code, stdout, stderr) = run(&["info", "--dir", project.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let info: Value = serde_json::from_str(&stdout).unwrap();
    let schedule = &info["schedules"][0];
    assert!(schedule["nextFireAt"].as_str().is_some(), "{schedule}");
    assert_eq!(
        (&schedule["lastFiring"]["status"], &schedule["lastFiring"]["trigger"]),
        (&json!("failed"), &json!("cron"))
    );
    assert_eq!(schedule["lastFiring"]["error"], json!("the model was unavailable"), "{schedule}");
    let (code, text, _) = run(&["info", "--dir", project.to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = text.lines().find(|l| l.contains("heartbeat")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("next 20") && line.contains("last failed (due 2026-03-02T09:00:00.000Z)"), "{line}");
}

/// A schedule `run` command that uses its host services: `send` into a channel as
/// `schedule:poke`, then a reminder on that conversation (named by its continuation token), a
/// listing, and two refusals. It exits non-zero, naming the step, when a reply is not the
/// expected one, so the firing's outcome is the test's verdict.
const POKE_PY: &str = r#"import json, os, sys, urllib.error, urllib.request
json.load(sys.stdin)
url, token = os.environ["BDK_HOST_URL"], os.environ["BDK_HOST_TOKEN"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def post(path, body):
    headers = {"content-type": "application/json", "authorization": "Bearer " + token}
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with opener.open(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
def expect(reply, status, what):
    if reply[0] != status:
        sys.exit(f"{what}: expected {status}, got {reply}")
    return reply[1]
sent = expect(post("/send", {"channel": "ops", "message": "Any deploys stuck?", "continuationKey": "standup"}), 200, "send")
made = expect(post("/reminders/create", {"delay": "1h", "prompt": "Follow up on the standup.", "continuationToken": sent["continuationToken"]}), 200, "create")
if made["reminder"]["sessionId"] != sent["sessionId"]:
    sys.exit(f"armed on another conversation: {made}")
listed = expect(post("/reminders/list", {}), 200, "list")
if [r["id"] for r in listed["reminders"]] != [made["reminder"]["id"]]:
    sys.exit(f"list: {listed}")
expect(post("/reminders/create", {"delay": "1h", "prompt": "x"}), 400, "no conversation named")
expect(post("/reminders/create", {"delay": "1h", "prompt": "x", "continuationToken": "ops:nobody"}), 404, "an unknown conversation")
print(json.dumps({"reminderId": made["reminder"]["id"], "sessionId": sent["sessionId"]}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_schedule_sends_into_a_channel_and_arms_a_reminder_through_its_host_services() {
    //! Guards: a `run` command gets host services acting as `schedule:<id>`: `send` starts a
    //! conversation that principal owns, and `reminders/create` arms a reminder on it by its
    //! continuation token; the reminder then wakes that conversation.
    let root = tempfile::tempdir().unwrap();
    let project = super::serve::write_project(root.path(), "poker", &["text = \"Noted.\"", "text = \"Followed up.\""]);
    std::fs::create_dir_all(project.join("bot/schedules")).unwrap();
    std::fs::create_dir_all(project.join("bot/lib")).unwrap();
    std::fs::write(
        project.join("bot/schedules/poke.toml"),
        "cron = \"30 8 * * *\"\nrun = [\"python3\", \"lib/poke.py\"]\n",
    )
    .unwrap();
    std::fs::write(project.join("bot/lib/poke.py"), POKE_PY).unwrap();
    let server = Server::start(&["--dev", "--mode", "single", "--dir", project.to_str().unwrap()]);

    let (status, body) = post(format!("{}/v1/dev/schedules/poke", server.origin), false).await;
    assert_eq!((status, &body["sessionIds"]), (200, &json!([])), "{body}");
    let last = last_firing(&server.origin).await;
    assert_eq!(last["status"], json!("completed"), "{last}");

    let listed: Value =
        client().get(format!("{}/v1/dev/reminders", server.origin)).send().await.unwrap().json().await.unwrap();
    let reminders = listed["reminders"].as_array().unwrap();
    assert_eq!(reminders.len(), 1, "{listed}");
    let id = reminders[0]["id"].as_str().unwrap().to_owned();
    let session = reminders[0]["sessionId"].as_str().unwrap().to_owned();
    let sessions: Value =
        client().get(format!("{}/v1/sessions", server.origin)).send().await.unwrap().json().await.unwrap();
    let row = sessions["sessions"].as_array().unwrap().iter().find(|s| s["sessionId"] == json!(session)).cloned();
    let row = row.unwrap_or_else(|| panic!("{sessions}"));
    assert_eq!(row["channel"], json!("ops"), "{row}");

    let (status, fired) = post(format!("{}/v1/dev/reminders/{id}", server.origin), false).await;
    assert_eq!((status, &fired["firing"]["status"]), (200, &json!("completed")), "{fired}");
}
