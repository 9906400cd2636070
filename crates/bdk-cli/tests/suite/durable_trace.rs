//! Durability proven against what reaches the disk: `bdk serve` runs under `strace`, and its
//! syscall trace shows that every event a client is sent on a stream was `fdatasync`ed into its
//! session's log before the socket write began, and that each POST acknowledging a message was
//! sent only after that message's `message.received` was synced. (The store's own tests reopen
//! the log in the same process, where the page cache would hide a missing sync.)

use std::collections::{HashMap, HashSet};
use std::process::Command;

use regex::Regex;
use serde_json::{Value, json};

use super::serve::{Server, client, within, write_project};
use super::support::bdk;

/// What the trace proved.
#[derive(Debug, Default)]
struct Checked {
    stream_events: usize,
    acks: usize,
}

/// Replays an `strace -f -y` trace: file writes to `events.ndjson` are pending until an
/// fdatasync/fsync of that file completes; a socket write may only carry events (and
/// acknowledgements) that were synced when it started.
fn check_trace(trace: &str) -> Result<Checked, String> {
    let line_re = Regex::new(r"^(\d+)\s+(.*)$").unwrap();
    let call_re = Regex::new(r"^(write|writev|sendto|sendmsg|fdatasync|fsync)\(\d+<([^>]*)>").unwrap();
    let resumed_re = Regex::new(r"^<\.\.\. (fdatasync|fsync) resumed>.*= 0$").unwrap();
    let logged_re = Regex::new(r#"\\"type\\":\\"([a-z_.]+)\\",\\"index\\":(\d+)"#).unwrap();
    let sent_re = Regex::new(r#"\\"index\\":(\d+),\\"sessionId\\":\\"(ses_[0-9a-z]+)\\""#).unwrap();
    let ack_re =
        Regex::new(r#"\{\\"ok\\":true,\\"sessionId\\":\\"(ses_[0-9a-z]+)\\",\\"continuationToken\\""#).unwrap();
    let session_of = |path: &str| path.rsplit('/').nth(1).map(str::to_owned);

    // Per session: indices written but not yet synced, indices synced, synced message.received count.
    let mut pending: HashMap<String, Vec<(u64, String)>> = HashMap::new();
    let mut synced: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut received: HashMap<String, usize> = HashMap::new();
    let mut acked: HashMap<String, usize> = HashMap::new();
    // A sync started by a thread that was interrupted: the file it syncs.
    let mut syncing: HashMap<String, String> = HashMap::new();
    let mut checked = Checked::default();

    for (n, line) in trace.lines().enumerate() {
        let Some(caps) = line_re.captures(line) else { continue };
        let (pid, rest) = (caps[1].to_owned(), &caps[2]);
        let complete_sync = |path: &str,
                             pending: &mut HashMap<_, Vec<(u64, String)>>,
                             synced: &mut HashMap<String, HashSet<u64>>,
                             received: &mut HashMap<String, usize>| {
            if let Some(session) = session_of(path) {
                for (index, kind) in pending.remove(&session).unwrap_or_default() {
                    synced.entry(session.clone()).or_default().insert(index);
                    if kind == "message.received" {
                        *received.entry(session.clone()).or_default() += 1;
                    }
                }
            }
        };
        if resumed_re.is_match(rest) {
            if let Some(path) = syncing.remove(&pid) {
                complete_sync(&path, &mut pending, &mut synced, &mut received);
            }
            continue;
        }
        let Some(call) = call_re.captures(rest) else { continue };
        let (name, target) = (&call[1], call[2].to_owned());
        match name {
            "fdatasync" | "fsync" if target.ends_with("/events.ndjson") => {
                if rest.ends_with("<unfinished ...>") {
                    syncing.insert(pid, target);
                } else if rest.ends_with("= 0") {
                    complete_sync(&target, &mut pending, &mut synced, &mut received);
                }
            }
            "write" if target.ends_with("/events.ndjson") => {
                let session = session_of(&target).ok_or(format!("line {n}: no session in {target}"))?;
                for logged in logged_re.captures_iter(rest) {
                    pending
                        .entry(session.clone())
                        .or_default()
                        .push((logged[2].parse().unwrap(), logged[1].to_owned()));
                }
            }
            _ if target.starts_with("socket:") => {
                for sent in sent_re.captures_iter(rest) {
                    let (index, session): (u64, &str) = (sent[1].parse().unwrap(), &sent[2]);
                    if !synced.get(session).is_some_and(|s| s.contains(&index)) {
                        return Err(format!(
                            "line {n}: event {index} of {session} was sent before it was synced:\n{line}"
                        ));
                    }
                    checked.stream_events += 1;
                }
                for ack in ack_re.captures_iter(rest) {
                    let session = ack[1].to_owned();
                    let count = acked.entry(session.clone()).or_default();
                    *count += 1;
                    if received.get(&session).copied().unwrap_or(0) < *count {
                        return Err(format!(
                            "line {n}: message {count} of {session} was acknowledged before it was synced"
                        ));
                    }
                    checked.acks += 1;
                }
            }
            _ => {}
        }
    }
    Ok(checked)
}

/// Follows a session's stream until it settles; returns the events.
async fn settle(origin: &str, id: &str, after: u64) -> Vec<Value> {
    let url = format!("{origin}/v1/session/{id}/stream?startIndex={after}");
    within("the stream to settle", async {
        let mut response = client().get(url).send().await.unwrap();
        let (mut buffer, mut events) = (Vec::new(), Vec::new());
        while let Some(chunk) = response.chunk().await.unwrap() {
            buffer.extend_from_slice(&chunk);
            while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=pos).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                let settled = event["type"] == "session.waiting";
                events.push(event);
                if settled {
                    return events;
                }
            }
        }
        panic!("the stream ended before session.waiting: {events:?}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_a_client_sees_was_synced_first() {
    let Some(peer) = bdk_test_support::peers::require("strace") else { return };
    let strace = std::fs::read_to_string(peer.join("path")).unwrap().trim().to_owned();
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    let trace = root.path().join("trace.txt");
    let mut command = Command::new(&strace);
    command
        .args(["-f", "-y", "-s", "1048576", "-e", "trace=write,writev,sendto,sendmsg,fdatasync,fsync", "-o"])
        .arg(&trace)
        .arg(bdk().get_program())
        .args(["serve", "--port", "0", "--mode", "single", "--dir"])
        .arg(&project)
        .arg("--state-root")
        .arg(root.path().join("state"));
    let server = Server::launch(command, &[]);

    for s in 0..2 {
        let started: Value = client()
            .post(format!("{}/v1/session", server.origin))
            .json(&json!({"message": format!("session {s}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = started["sessionId"].as_str().unwrap().to_owned();
        let mut token = started["continuationToken"].as_str().unwrap().to_owned();
        let mut seen = settle(&server.origin, &id, 0).await.len() as u64;
        for f in 0..2 {
            let accepted: Value = client()
                .post(format!("{}/v1/session/{id}", server.origin))
                .json(&json!({"message": format!("follow-up {f}"), "continuationToken": token}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            token = accepted["continuationToken"].as_str().unwrap_or_else(|| panic!("{accepted}")).to_owned();
            seen += settle(&server.origin, &id, seen).await.len() as u64;
        }
    }

    // SIGTERM the traced server (strace's child), and let strace finish writing the trace.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.pid())).unwrap();
    let bdk_pid = children.split_whitespace().next().expect("strace's child").to_owned();
    assert!(Command::new("kill").args(["-TERM", &bdk_pid]).status().unwrap().success());
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let checked = check_trace(&text).unwrap_or_else(|e| panic!("{e}"));
    // 2 sessions × (start + 2 follow-ups) acknowledged; every streamed event checked.
    assert_eq!(checked.acks, 6, "{checked:?}");
    assert!(checked.stream_events >= 6 * 5, "{checked:?}");
}

#[test]
fn the_trace_check_catches_an_event_sent_before_its_sync() {
    let path = "/s/sessions/ses_a/events.ndjson";
    let write = format!(
        r#"1 write(9<{path}>, "{{\"type\":\"message.received\",\"index\":1,\"sessionId\":\"ses_a\"}}\n", 60) = 60"#
    );
    let sync = format!("1 fdatasync(9<{path}>) = 0");
    let send = r#"2 writev(11<socket:[1]>, [{iov_base="{\"type\":\"message.received\",\"index\":1,\"sessionId\":\"ses_a\"}"}], 1) = 60"#;
    let ack = r#"2 writev(11<socket:[1]>, [{iov_base="{\"ok\":true,\"sessionId\":\"ses_a\",\"continuationToken\":\"http:1\"}"}], 1) = 60"#;
    let good = [write.as_str(), sync.as_str(), send, ack].join("\n");
    let checked = check_trace(&good).unwrap();
    assert_eq!((checked.stream_events, checked.acks), (1, 1));
    let early_send = [write.as_str(), send, sync.as_str()].join("\n");
    assert!(check_trace(&early_send).unwrap_err().contains("sent before it was synced"));
    let early_ack = [write.as_str(), ack, sync.as_str()].join("\n");
    assert!(check_trace(&early_ack).unwrap_err().contains("acknowledged before"));
    // A sync interrupted by another thread counts when it completes.
    let split =
        [write.as_str(), &format!("1 fdatasync(9<{path}> <unfinished ...>"), send, "1 <... fdatasync resumed>) = 0"]
            .join("\n");
    assert!(check_trace(&split).is_err());
}
