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

/// Three `bdk serve` replicas of `project` on the database at `url`, each with its own state root.
fn three_replicas(root: &Path, project: &Path, url: &str) -> Vec<Server> {
    three_replicas_with(root, project, url, &[])
}

/// [`three_replicas`] with `envs` set for each process.
fn three_replicas_with(root: &Path, project: &Path, url: &str, envs: &[(&str, &str)]) -> Vec<Server> {
    ["a", "b", "c"]
        .iter()
        .map(|name| {
            let state = root.join(format!("state-{name}"));
            let mut command = super::support::bdk();
            command.args(["serve", "--port", "0", "--dir", project.to_str().unwrap(), "--state-root"]);
            // Small pools: several of these tests (and other suites) share the server's 100 connections.
            command.arg(&state).args(["--database-url", url, "--database-pool-size", "4"]);
            Server::launch(command, envs)
        })
        .collect()
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
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("BDK_TEST_UNSET_DB_URL is not set"), "{stderr}");
}
