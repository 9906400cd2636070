//! Guards real disk faults: the state root is a 2 MiB tmpfs. Filled while a turn streams: writes
//! are refused with 503 `store_unavailable`, reads (listing, events, stream replay, cost, info)
//! still answer, `/v1/health` says `degraded` with the reason; once the filler is deleted the turn
//! closes by itself (`turn.failed`, error `storage`), health is `ok` again, no acknowledged event
//! is lost, no torn line is left in the log and the next message works. Read-only: Linux refuses
//! to remount a file system read-only while files on it are open for writing (a running host's
//! logs are), so a host is started on a state root already read-only, then remounted writable.
//! Needs root (to mount); elsewhere it prints SKIPPED and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bdk_model::ScriptStep;
use bdk_protocol::{Event, EventData};
use serde_json::json;

use super::support::*;
use bdk_test_support::process::{COMMAND_TIMEOUT, OutputWithin as _};

/// A tmpfs mounted on a temp folder, unmounted (lazily, files may still be open) on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (after a loud SKIPPED line) where mounting is not allowed.
    fn mount(test: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(dir.path())
            .try_output_until(COMMAND_TIMEOUT)
            .map_err(|e| e.to_string())
            .map(|out| out.unwrap_or_else(|_| panic!("mount ran past {COMMAND_TIMEOUT:?}")))
            .and_then(|out| {
                out.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
            });
        match mounted {
            Ok(()) => Some(Tmpfs { dir }),
            Err(why) => {
                eprintln!("\n*** SKIPPED ({test}): cannot mount a tmpfs (needs root): {}\n", why.trim());
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount(&self, mode: &str) {
        let out = Command::new("mount").args(["-o", &format!("remount,{mode}")]).arg(self.path()).output_within();
        assert!(out.status.success(), "remount {mode}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Fills the file system with a filler file; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).try_output_until(COMMAND_TIMEOUT);
    }
}

/// Polls `/v1/health` until its `status` is `want`; returns the body.
async fn health_until(host: &Host, want: &str) -> serde_json::Value {
    within(&format!("health {want}"), async {
        loop {
            let reply = host.get("/v1/health").await;
            assert_eq!(reply.status.as_u16(), 200, "health is liveness: {}", reply.text);
            if reply.body["status"] == json!(want) {
                return reply.body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

fn turn_failed_error(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.data {
        EventData::TurnFailed(f) => Some(f.error.map(|c| c.as_str().to_owned()).unwrap_or_default()),
        _ => None,
    })
}

#[tokio::test]
async fn a_state_root_that_fills_up_mid_turn_degrades_and_recovers() {
    if filesystem_only("a_state_root_that_fills_up_mid_turn_degrades_and_recovers", "a full or read-only state root") {
        return;
    }
    let Some(tmpfs) = Tmpfs::mount("a_state_root_that_fills_up_mid_turn_degrades_and_recovers") else { return };
    let reason = "No space left on device";
    let host = host()
        .state_root(tmpfs.path())
        .script(vec![slow_text(2000, Duration::from_millis(5)), ScriptStep::text("after the fix")])
        .start()
        .await;
    let session = host.start_session("stream a long answer").await;
    let id = session.session_id.to_string();
    let mut stream = host.stream(&id, 0).await;
    let acknowledged = stream.until("message.appended").await;

    let filler = tmpfs.fill();
    let health = health_until(&host, "degraded").await;
    assert_eq!(health["store"]["writable"], json!(false), "{health}");
    let error = health["store"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(reason), "{health}");
    assert!(!error.contains(tmpfs.path().to_str().unwrap()), "no path in an unauthenticated answer: {health}");

    // Writes are refused with a retryable code; reads answer.
    host.follow_up(&id, &session.continuation_token, "more").await.assert_error(503, "store_unavailable");
    host.post("/v1/session", &json!({"message": "new"})).await.assert_error(503, "store_unavailable");
    assert_eq!(host.get("/v1/sessions").await.status.as_u16(), 200);
    assert_eq!(host.get(&format!("/v1/session/{id}/cost")).await.status.as_u16(), 200);
    assert_eq!(host.get("/v1/info").await.status.as_u16(), 200);
    let during = host.events(&id).await;
    assert_dense(&during, 0);
    assert_eq!(during[..acknowledged.len()], acknowledged[..]);
    let mut replay = host.stream(&id, 0).await;
    assert_eq!(replay.next().await.map(|e| e.index), Some(0));
    drop(replay);

    // Fixed: the turn closes by itself, health is ok, the next message works.
    std::fs::remove_file(filler).unwrap();
    let rest = stream.until("session.waiting").await;
    assert_eq!(turn_failed_error(&rest).as_deref(), Some("storage"), "{:?}", types(&rest));
    let health = health_until(&host, "ok").await;
    assert!(health.get("store").is_none(), "{health}");
    let all = host.events(&id).await;
    assert_dense(&all, 0);
    assert_eq!(all[..acknowledged.len()], acknowledged[..]);
    let reply = host.follow_up(&id, &session.continuation_token, "more").await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text);
    let next = stream.until("session.waiting").await;
    assert!(appended_text(&next).contains("after the fix"), "{:?}", types(&next));
    // Every line of the log on disk parses: nothing torn was left in it.
    let log = std::fs::read_to_string(tmpfs.path().join("hello/sessions").join(&id).join("events.ndjson")).unwrap();
    assert_dense(&parse_lines(&log), 0);
    host.shutdown().await;
}

#[tokio::test]
async fn a_host_on_a_read_only_state_root_serves_reads_and_recovers_when_writable() {
    if filesystem_only(
        "a_host_on_a_read_only_state_root_serves_reads_and_recovers_when_writable",
        "a full or read-only state root",
    ) {
        return;
    }
    let Some(tmpfs) = Tmpfs::mount("a_host_on_a_read_only_state_root_serves_reads_and_recovers_when_writable") else {
        return;
    };
    // A session written on an ordinary disk, then copied onto the tmpfs, made read-only (while
    // no file on it is open for writing).
    let elsewhere = tempfile::tempdir().unwrap();
    let first = host().state_root(elsewhere.path()).start().await;
    let session = first.start_session("before").await;
    let id = session.session_id.to_string();
    first.wait_for(&id, "session.waiting", None).await;
    let before = first.events(&id).await;
    first.shutdown().await;
    let copied = Command::new("cp").arg("-a").arg(elsewhere.path().join("hello")).arg(tmpfs.path()).output_within();
    assert!(copied.status.success(), "{}", String::from_utf8_lossy(&copied.stderr));
    tmpfs.remount("ro");

    let host = host().state_root(tmpfs.path()).script(vec![ScriptStep::text("after the fix")]).start().await;
    let health = health_until(&host, "degraded").await;
    assert!(health["store"]["error"].as_str().unwrap_or_default().contains("Read-only file system"), "{health}");
    assert_eq!(host.events(&id).await, before, "reads work on a read-only state root");
    let mut replay = host.stream(&id, 0).await;
    assert_eq!(replay.next().await.map(|e| e.index), Some(0));
    drop(replay);
    assert_eq!(host.get("/v1/info").await.status.as_u16(), 200);
    host.follow_up(&id, &session.continuation_token, "more").await.assert_error(503, "store_unavailable");
    host.post("/v1/session", &json!({"message": "new"})).await.assert_error(503, "store_unavailable");

    tmpfs.remount("rw");
    health_until(&host, "ok").await;
    let reply = host.follow_up(&id, &session.continuation_token, "more").await;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text);
    let last = host.wait_for(&id, "session.waiting", Some(before.len() as u64)).await;
    let all = host.events(&id).await;
    assert_dense(&all, 0);
    assert_eq!(all[..before.len()], before[..]);
    assert!(appended_text(&all[before.len()..]).contains("after the fix"), "{last:?}");
    host.shutdown().await;
}
