//! Several `bdk serve` processes on one PostgreSQL database (`BDK_TEST_DATABASE_URL`, a fresh
//! schema per test; skipped loudly without it): a session created on one replica is streamed
//! from a second and followed up on a third with the same events everywhere; fifty follow-ups
//! with one token spread over three replicas admit exactly one; a stop sent to one replica ends
//! the turn running on another; a replica SIGKILLed mid-turn has its turn closed by another
//! within the lease bound and the session takes follow-ups; a call parked for approval on one
//! replica is listed and approved through the others; a schedule due while three replicas run
//! fires once. Every wait has a timeout.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::serve::{Server, client, events, post, slow_step, stream_until, within, write_project};
use super::support::OutputWithin as _;

/// Three `bdk serve` replicas of `project` on the database at `url`, each with its own state root.
fn three_replicas(root: &Path, project: &Path, url: &str) -> Vec<Server> {
    three_replicas_with(root, project, url, &[])
}

/// [`three_replicas`] with `envs` set for each process.
fn three_replicas_with(root: &Path, project: &Path, url: &str, envs: &[(&str, &str)]) -> Vec<Server> {
    ["a", "b", "c"].iter().map(|name| replica(root, name, project, url, envs)).collect()
}

/// One `bdk serve` replica named `name` (its state root under `root`) of `project` on `url`.
fn replica(root: &Path, name: &str, project: &Path, url: &str, envs: &[(&str, &str)]) -> Server {
    let state = root.join(format!("state-{name}"));
    let mut command = super::support::bdk();
    command.args(["serve", "--port", "0", "--dir", project.to_str().unwrap(), "--state-root"]);
    // Small pools: several of these tests (and other suites) share the server's 100 connections.
    command.arg(&state).args(["--database-url", url, "--database-pool-size", "4"]);
    Server::launch(command, envs)
}

/// Creates a session on `base`; returns its id and token.
async fn create(base: &str, message: &str) -> (String, String) {
    let (status, started) = post(format!("{base}/v1/session"), json!({ "message": message })).await;
    assert_eq!(status, 200, "{started}");
    (started["sessionId"].as_str().unwrap().to_owned(), started["continuationToken"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_moves_across_replicas() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_session").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "relay", &["text = \"first answer\"", "text = \"second answer\""]);
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let base = |i: usize| format!("{}/relay", replicas[i].origin);

    // Created on a, followed live on b.
    let (status, started) = post(format!("{}/v1/session", base(0)), json!({"message": "hello"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let token = started["continuationToken"].as_str().unwrap().to_owned();
    let live = stream_until(format!("{}/v1/session/{id}/stream", base(1)), "session.waiting").await;
    let text = live.iter().find(|e| e["type"] == "message.completed").unwrap();
    assert_eq!(text["data"]["text"], json!("first answer"));

    // Followed up on c (a, which holds the session's lease, runs it); a stale token is refused.
    let (status, reply) =
        post(format!("{}/v1/session/{id}", base(2)), json!({"continuationToken": token, "message": "more"})).await;
    assert_eq!(status, 200, "{reply}");
    let rotated = reply["continuationToken"].as_str().unwrap().to_owned();
    assert_ne!(rotated, token);
    let (status, stale) =
        post(format!("{}/v1/session/{id}", base(2)), json!({"continuationToken": token, "message": "again"})).await;
    assert_eq!(status, 409, "{stale}");
    let tail =
        stream_until(format!("{}/v1/session/{id}/stream?startIndex={}", base(1), live.len()), "session.waiting").await;
    // a's scripted model served the follow-up (its second step): the turn ran where the lease is.
    let text = tail.iter().find(|e| e["type"] == "message.completed").unwrap();
    assert_eq!(text["data"]["text"], json!("second answer"));

    // Every replica reads the same log: dense, identical.
    let all: Vec<Vec<Value>> = {
        let mut out = Vec::new();
        for i in 0..3 {
            out.push(events(format!("{}/v1/session/{id}/events", base(i))).await);
        }
        out
    };
    assert_eq!(all[0], all[1]);
    assert_eq!(all[1], all[2]);
    for (i, event) in all[0].iter().enumerate() {
        assert_eq!(event["index"], json!(i));
    }
    assert_eq!(all[0].iter().filter(|e| e["type"] == "turn.completed").count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_follow_ups_with_one_token_across_three_replicas_admit_exactly_one() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_race").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "race", &["text = \"one\"", "text = \"two\"", "text = \"three\""]);
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/race", r.origin)).collect();
    let (id, token) = create(&bases[0], "hello").await;
    stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "session.waiting").await;

    let mut racers = Vec::new();
    for i in 0..50 {
        let url = format!("{}/v1/session/{id}", bases[i % 3]);
        let body = json!({ "continuationToken": token, "message": format!("racer {i}") });
        racers.push(tokio::spawn(post(url, body)));
    }
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.unwrap());
    }
    let accepted: Vec<_> = answers.iter().filter(|(status, _)| *status == 200).collect();
    let stale = answers.iter().filter(|(status, body)| *status == 409 && body["error"] == "stale_continuation_token");
    assert_eq!(accepted.len(), 1, "{answers:?}");
    assert_eq!(stale.count(), 49, "{answers:?}");

    // One turn ran for the race: two in all, each closed (read from a replica that ran neither).
    let deadline = Instant::now() + Duration::from_secs(20);
    let log = loop {
        let log = events(format!("{}/v1/session/{id}/events", bases[2])).await;
        let closed = log.iter().filter(|e| e["type"] == "session.waiting").count();
        if closed >= 2 {
            break log;
        }
        assert!(Instant::now() < deadline, "the accepted follow-up's turn never ended: {log:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(log.iter().filter(|e| e["type"] == "turn.started").count(), 2, "{log:#?}");
    assert_eq!(log.iter().filter(|e| e["type"] == "message.received").count(), 2, "{log:#?}");
    assert_eq!(log.iter().filter(|e| e["type"] == "turn.completed").count(), 2, "{log:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_preempt_on_one_replica_reach_the_turn_running_on_another() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_stop").await else { return };
    let root = tempfile::tempdir().unwrap();
    let slow = slow_step(100, 100);
    let project = write_project(root.path(), "stopper", &[&slow, &slow, "text = \"fresh\""]);
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/stopper", r.origin)).collect();

    // A ten-second turn on a; stopped through c once b sees it stream.
    let (id, token) = create(&bases[0], "talk slowly").await;
    stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "message.appended").await;
    let (status, stopped) = post(format!("{}/v1/session/{id}/stop", bases[2]), json!({})).await;
    assert_eq!(status, 200, "{stopped}");
    // The stop reached the turn: it ended cancelled, never completed (a stop that got lost
    // would leave the turn running to its end).
    let seen = stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "session.waiting").await;
    let failed = seen.iter().find(|e| e["type"] == "turn.failed").expect("the turn failed");
    assert_eq!(failed["data"]["status"], json!("cancelled"), "{failed}");
    assert!(seen.iter().all(|e| e["type"] != "turn.completed"), "{seen:#?}");

    // A second slow turn (followed up on b), preempted by a follow-up sent to c.
    let (status, reply) =
        post(format!("{}/v1/session/{id}", bases[1]), json!({"continuationToken": token, "message": "again"})).await;
    assert_eq!(status, 200, "{reply}");
    let token = reply["continuationToken"].as_str().unwrap().to_owned();
    let from = seen.len();
    stream_until(format!("{}/v1/session/{id}/stream?startIndex={from}", bases[0]), "message.appended").await;
    let (status, reply) =
        post(format!("{}/v1/session/{id}", bases[2]), json!({"continuationToken": token, "message": "stop that"}))
            .await;
    assert_eq!(status, 200, "{reply}");
    let tail = stream_until(format!("{}/v1/session/{id}/stream?startIndex={from}", bases[1]), "turn.completed").await;
    let failed = tail.iter().find(|e| e["type"] == "turn.failed").expect("the second turn was preempted");
    assert_eq!(failed["data"]["status"], json!("cancelled"), "{failed}");
    let done = tail.iter().find(|e| e["type"] == "message.completed").unwrap();
    assert_eq!(done["data"]["text"], json!("fresh"), "the preempting message ran on a, where the lease is");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_turn_is_taken_over_within_the_lease() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_kill").await else { return };
    let root = tempfile::tempdir().unwrap();
    let slow = slow_step(60, 100);
    let project = write_project(root.path(), "phoenix", &[&slow, "text = \"back again\""]);
    let url = db.url();
    let mut replicas = three_replicas_with(root.path(), &project, &url, &[("BDK_SESSION_LEASE_MS", "1500")]);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/phoenix", r.origin)).collect();

    let (id, token) = create(&bases[0], "take your time").await;
    let before = stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "message.appended").await;
    replicas.remove(0).kill();
    let killed = Instant::now();

    // b or c claims the expired lease and closes the turn as a restart would.
    let seen =
        stream_until(format!("{}/v1/session/{id}/stream?startIndex={}", bases[1], before.len()), "session.waiting")
            .await;
    let took = killed.elapsed();
    // Lease 1.5 s + a sweep every 0.75 s, with room for a loaded machine.
    assert!(took < Duration::from_secs(10), "the dead replica's turn was closed after {took:?}");
    let failed = seen.iter().find(|e| e["type"] == "turn.failed").expect("the turn was closed");
    assert_eq!(failed["data"]["status"], json!("failed"), "{failed}");
    assert_eq!(failed["data"]["error"], json!("host_restarted"), "{failed}");

    // A follow-up works, sent to either survivor.
    let (status, reply) =
        post(format!("{}/v1/session/{id}", bases[2]), json!({"continuationToken": token, "message": "still there?"}))
            .await;
    assert_eq!(status, 200, "{reply}");
    let from = before.len() + seen.len();
    let tail = stream_until(format!("{}/v1/session/{id}/stream?startIndex={from}", bases[1]), "session.waiting").await;
    assert!(tail.iter().any(|e| e["type"] == "turn.completed"), "{tail:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_on_one_replica_is_approved_through_another() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_approval").await else { return };
    let root = tempfile::tempdir().unwrap();
    let call = "tool_calls = [{ name = \"deploy\", arguments = { service = \"web\" } }]";
    let project = write_project(root.path(), "gate", &[call, "text = \"Deployed web.\""]);
    std::fs::create_dir_all(project.join("bot/tools")).unwrap();
    std::fs::write(
        project.join("bot/tools/deploy.toml"),
        r#"description = "Deploy a service."
effect = "write"
needs_approval = true
command = ["python3", "-c", "import json,sys; i=json.load(sys.stdin)['input']; print(json.dumps({'deployed': i['service']}))"]

[input_schema]
type = "object"
required = ["service"]
properties = { service = { type = "string" } }
"#,
    )
    .unwrap();
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/gate", r.origin)).collect();

    let (id, _token) = create(&bases[0], "deploy web").await;
    let parked = stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "action.approval_requested").await;
    let requested = parked.last().unwrap();
    let call_id = requested["data"]["callId"].as_str().unwrap().to_owned();

    // Listed through c, approved through b; the call runs on a, where the turn is.
    let listing =
        within("approvals", async { client().get(format!("{}/v1/session/{id}/approvals", bases[2])).send().await })
            .await
            .unwrap();
    assert_eq!(listing.status(), 200);
    let listing: Value = listing.json().await.unwrap();
    assert!(listing.to_string().contains(&call_id), "{listing}");
    let (status, resolved) =
        post(format!("{}/v1/session/{id}/approvals/{call_id}", bases[1]), json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{resolved}");
    let (status, again) =
        post(format!("{}/v1/session/{id}/approvals/{call_id}", bases[2]), json!({"decision": "deny"})).await;
    assert_eq!(status, 404, "a call is decided once: {again}");
    let rest =
        stream_until(format!("{}/v1/session/{id}/stream?startIndex={}", bases[2], parked.len()), "session.waiting")
            .await;
    let result = rest.iter().find(|e| e["type"] == "action.result").expect("the approved call ran");
    assert!(result.to_string().contains("deployed"), "{result}");
    assert!(rest.iter().any(|e| e["type"] == "turn.completed"), "{rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_due_while_three_replicas_run_fires_once() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_schedule").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "cron", &["text = \"tick\""]);
    std::fs::create_dir_all(project.join("bot/schedules")).unwrap();
    std::fs::write(project.join("bot/schedules/tick.toml"), "cron = \"* * * * *\"\nprompt = \"Tick.\"\n").unwrap();
    let url = db.url();
    let _replicas = three_replicas(root.path(), &project, &url);

    let (client_db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    // The next minute boundary is at most 60 s away; then give the losers time to (not) fire.
    let deadline = Instant::now() + Duration::from_secs(90);
    let fired_at = loop {
        let rows = client_db
            .query("SELECT due_at FROM bdk_firings WHERE agent = 'cron' AND kind = 'schedule' AND owner = 'tick'", &[])
            .await
            .unwrap();
        if let Some(row) = rows.first() {
            break row.get::<_, chrono::DateTime<chrono::Utc>>(0);
        }
        assert!(Instant::now() < deadline, "the schedule never fired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let firings = client_db
        .query_one(
            "SELECT count(*) FROM bdk_firings WHERE agent = 'cron' AND owner = 'tick' AND due_at = $1",
            &[&fired_at],
        )
        .await
        .unwrap();
    assert_eq!(firings.get::<_, i64>(0), 1);
    let sessions = client_db.query("SELECT record FROM bdk_sessions WHERE agent = 'cron'", &[]).await.unwrap();
    let records: Vec<String> = sessions.iter().map(|r| r.get(0)).collect();
    let all = client_db.query("SELECT record FROM bdk_firings", &[]).await.unwrap();
    let all: Vec<String> = all.iter().map(|r| r.get(0)).collect();
    assert_eq!(records.len(), 1, "one firing started one session, not one per replica: {records:#?} {all:#?}");

    // `bdk schedules` reads the firing from the database the replicas share, not from a state
    // directory (none of theirs is the project's default one).
    let listed = super::support::bdk()
        .args(["schedules", "--json", "--dir", project.to_str().unwrap(), "--database-url", &url])
        .output_within();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let last = &listed["agents"][0]["schedules"][0]["lastFiring"];
    assert_eq!(
        last["dueAt"].as_str().map(|d| d.starts_with(&fired_at.format("%Y-%m-%dT%H:%M").to_string())),
        Some(true),
        "{listed:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_running_turns_holds_for_three_replicas_together() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_slots").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "busy", &[&slow_step(50, 100)]);
    let toml = std::fs::read_to_string(project.join("bot/agent.toml")).unwrap();
    let toml = toml.replacen("\n\n[model]", "\nmax_running_turns = 1\n\n[model]", 1);
    std::fs::write(project.join("bot/agent.toml"), toml).unwrap();
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/busy", r.origin)).collect();

    // A five-second turn runs on a (seen streaming from b); then one session each on b and c.
    let (first, _) = create(&bases[0], "one").await;
    stream_until(format!("{}/v1/session/{first}/stream", bases[1]), "message.appended").await;
    let (second, _) = create(&bases[1], "two").await;
    let (third, _) = create(&bases[2], "three").await;

    // The limit is the group's: both later turns queue behind the running one, in one queue.
    let mut positions = Vec::new();
    let mut logs = Vec::new();
    for (i, id) in [&first, &second, &third].into_iter().enumerate() {
        let log = stream_until(format!("{}/v1/session/{id}/stream", bases[(i + 1) % 3]), "session.waiting").await;
        assert!(log.iter().any(|e| e["type"] == "turn.completed"), "{log:#?}");
        positions.extend(log.iter().filter(|e| e["type"] == "turn.queued").map(|e| e["data"]["position"].clone()));
        logs.push(log);
    }
    assert!(logs[0].iter().all(|e| e["type"] != "turn.queued"), "{:#?}", logs[0]);
    positions.sort_by_key(|p| p.as_u64());
    assert_eq!(positions, vec![json!(1), json!(2)], "{logs:#?}");
    // One at a time: each queued turn started after the turn before it had finished streaming.
    let at = |log: &[Value], kind: &str| -> String {
        log.iter().find(|e| e["type"] == kind).unwrap()["at"].as_str().unwrap().to_owned()
    };
    let mut spans: Vec<(String, String)> =
        logs.iter().map(|log| (at(log, "turn.started"), at(log, "message.completed"))).collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "two turns ran at once: {spans:?}");
    }

    // Every slot was given back.
    let (client_db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left: i64 = client_db.query_one("SELECT count(*) FROM bdk_turn_slots", &[]).await.unwrap().get(0);
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} turn slots were never released");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_with_sigterm_hands_its_sessions_over_at_once() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_sigterm").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "handover", &["text = \"first\"", "text = \"second\""]);
    let url = db.url();
    // A lease far longer than the test may take: waiting for it to expire would fail the test.
    let mut replicas = three_replicas_with(root.path(), &project, &url, &[("BDK_SESSION_LEASE_MS", "600000")]);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/handover", r.origin)).collect();

    let (id, token) = create(&bases[0], "hello").await;
    let before = stream_until(format!("{}/v1/session/{id}/stream", bases[1]), "session.waiting").await;
    let a = replicas.remove(0);
    let status = std::process::Command::new("kill").args(["-TERM", &a.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (exit, stderr) = a.wait();
    assert!(exit.success(), "{stderr}");
    assert!(stderr.contains("released this replica's session leases"), "{stderr}");

    // b takes the follow-up itself (a's lease was released, not left to expire in ten minutes).
    let (status, reply) =
        post(format!("{}/v1/session/{id}", bases[1]), json!({"continuationToken": token, "message": "more"})).await;
    assert_eq!(status, 200, "{reply}");
    let tail =
        stream_until(format!("{}/v1/session/{id}/stream?startIndex={}", bases[2], before.len()), "session.waiting")
            .await;
    let text = tail.iter().find(|e| e["type"] == "message.completed").expect("the follow-up ran");
    // b's scripted model answered (its first step): the turn ran on b.
    assert_eq!(text["data"]["text"], json!("first"), "{tail:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_on_a_killed_replica_is_restored_and_approved_through_another() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_parked_kill").await else { return };
    let root = tempfile::tempdir().unwrap();
    let tool = r#"description = "Deploy a service."
effect = "write"
needs_approval = true
command = ["python3", "-c", "import json,sys; i=json.load(sys.stdin)['input']; print(json.dumps({'deployed': i['service']}))"]

[input_schema]
type = "object"
required = ["service"]
properties = { service = { type = "string" } }
"#;
    // a's model asks for the call; the survivors' models answer after it (each process replays
    // its own script from the start).
    let call = "tool_calls = [{ name = \"deploy\", arguments = { service = \"web\" } }]";
    let on_a = write_project(&root.path().join("a"), "gate", &[call]);
    let on_bc = write_project(&root.path().join("bc"), "gate", &["text = \"Deployed web.\""]);
    for project in [&on_a, &on_bc] {
        std::fs::create_dir_all(project.join("bot/tools")).unwrap();
        std::fs::write(project.join("bot/tools/deploy.toml"), tool).unwrap();
    }
    let url = db.url();
    let envs = [("BDK_SESSION_LEASE_MS", "1500")];
    let a = replica(root.path(), "a", &on_a, &url, &envs);
    let replicas = [replica(root.path(), "b", &on_bc, &url, &envs), replica(root.path(), "c", &on_bc, &url, &envs)];
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/gate", r.origin)).collect();

    let (id, _token) = create(&format!("{}/gate", a.origin), "deploy web").await;
    let parked = stream_until(format!("{}/v1/session/{id}/stream", bases[0]), "action.approval_requested").await;
    let call_id = parked.last().unwrap()["data"]["callId"].as_str().unwrap().to_owned();
    a.kill();

    // Once a's lease expires, b or c takes the session over and the call is parked there again
    // (until then b answers 503: the replica holding the lease does not answer).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listing =
            within("approvals", async { client().get(format!("{}/v1/session/{id}/approvals", bases[0])).send().await })
                .await
                .unwrap();
        let (status, body) = (listing.status().as_u16(), listing.text().await.unwrap_or_default());
        if status == 200 && body.contains(&call_id) {
            break;
        }
        assert!(Instant::now() < deadline, "the parked call never came back: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, resolved) =
        post(format!("{}/v1/session/{id}/approvals/{call_id}", bases[0]), json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{resolved}");
    let rest =
        stream_until(format!("{}/v1/session/{id}/stream?startIndex={}", bases[1], parked.len()), "session.waiting")
            .await;
    assert!(rest.iter().all(|e| e["data"]["decision"] != "expired"), "{rest:#?}");
    let result = rest.iter().find(|e| e["type"] == "action.result").expect("the approved call ran");
    assert!(result.to_string().contains("deployed"), "{result}");
    let done = rest.iter().find(|e| e["type"] == "message.completed").expect("the turn went on");
    assert_eq!(done["data"]["text"], json!("Deployed web."));
    assert!(rest.iter().any(|e| e["type"] == "turn.completed"), "{rest:#?}");
    assert_eq!(rest.iter().filter(|e| e["type"] == "turn.started").count(), 0, "the same turn goes on: {rest:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_write_on_another_replica_runs_where_the_session_is_held() {
    let Some(db) = bdk_test_support::postgres::fresh("replicas_direct").await else { return };
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "scribe", &[&slow_step(30, 100), "text = \"done\""]);
    std::fs::create_dir_all(project.join("bot/tools")).unwrap();
    std::fs::write(
        project.join("bot/tools/note.toml"),
        r#"description = "Write a note into the session workspace."
effect = "write"
command = ["python3", "-c", "import json,os,sys; i=json.load(sys.stdin)['input']; open(os.path.join(os.environ['BDK_WORKSPACE_DIR'], 'note.txt'), 'w').write(i['text']); print(json.dumps({'wrote': i['text']}))"]

[input_schema]
type = "object"
required = ["text"]
properties = { text = { type = "string" } }
"#,
    )
    .unwrap();
    let url = db.url();
    let replicas = three_replicas(root.path(), &project, &url);
    let bases: Vec<String> = replicas.iter().map(|r| format!("{}/scribe", r.origin)).collect();
    let note = |i: usize, id: &str, text: &str| {
        post(format!("{}/v1/tools/note", bases[i]), json!({"sessionId": id, "input": {"text": text}}))
    };

    // While a's turn runs, a write sent to b is busy (a decides, as one process would).
    let (id, _token) = create(&bases[0], "write slowly").await;
    let before = stream_until(format!("{}/v1/session/{id}/stream", bases[2]), "message.appended").await;
    let (status, busy) = note(1, &id, "too early").await;
    assert_eq!(status, 409, "{busy}");
    assert_eq!(busy["error"], json!("session_busy"), "{busy}");
    let settled = stream_until(format!("{}/v1/session/{id}/stream", bases[2]), "session.waiting").await;
    assert!(settled.len() >= before.len());

    // Once it is idle, the same write sent to b runs on a (a still holds the lease), in a's
    // workspace, and is recorded on the session's stream.
    let (status, wrote) = note(1, &id, "hello").await;
    assert_eq!(status, 200, "{wrote}");
    assert_eq!(wrote["isError"], json!(false), "{wrote}");
    assert_eq!(wrote["result"]["wrote"], json!("hello"), "{wrote}");
    let found = |name: &str| {
        let mut dirs = vec![root.path().join(format!("state-{name}"))];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n == "note.txt") {
                    return std::fs::read_to_string(path).ok();
                }
            }
        }
        None
    };
    assert_eq!(found("a").as_deref(), Some("hello"), "the call ran in a's workspace");
    assert_eq!(found("b"), None, "nothing ran on b");
    let log = events(format!("{}/v1/session/{id}/events", bases[2])).await;
    let result = log.iter().find(|e| e["type"] == "action.result" && e["data"]["direct"] == json!(true));
    assert!(result.is_some_and(|r| r.to_string().contains("hello")), "{log:#?}");
}

#[test]
fn serve_refuses_an_unreachable_database_naming_it_without_the_password() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "down", &["text = \"x\""]);
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://bdk:hunter2@127.0.0.1:{port}/bdk");
    let state = root.path().join("state");
    let (code, stdout, stderr) = super::support::run(&[
        "serve",
        "--port",
        "0",
        "--dir",
        project.to_str().unwrap(),
        "--state-root",
        state.to_str().unwrap(),
        "--database-url",
        &url,
    ]);
    assert_ne!(code, 0, "{stdout}");
    assert!(!stdout.contains("listening on"), "{stdout}");
    assert!(stderr.contains(&format!("postgres://bdk:***@127.0.0.1:{port}/bdk")), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn a_postgres_storage_toml_without_its_url_variable_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "pgagent", &["text = \"x\""]);
    std::fs::write(project.join("bot/storage.toml"), "backend = \"postgres\"\nurl_env = \"BDK_TEST_UNSET_DB_URL\"\n")
        .unwrap();
    let state = root.path().join("state");
    let output = super::support::bdk()
        .args(["serve", "--port", "0", "--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap()])
        .env_remove("BDK_DATABASE_URL")
        .env_remove("BDK_TEST_UNSET_DB_URL")
        .output_within();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("BDK_TEST_UNSET_DB_URL is not set"), "{stderr}");
}
