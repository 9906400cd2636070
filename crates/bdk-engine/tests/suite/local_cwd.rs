//! `local.cwd` end to end through the fake model server: a session's workspace, where an agent
//! tool runs, is `<local.cwd>/<session id>/` (a relative `local.cwd` is under the project
//! folder), and nothing is created under the state directory's `sessions/<id>/workspace/`.
//! Without `local.cwd` the workspace stays under the state directory.

use bdk_protocol::EventData;

use super::folder::*;
use super::support::*;

/// An agent tool that prints the folder it runs in.
const PWD: &str =
    "description = \"Print the working directory.\"\nexecution = \"agent\"\nscript = \"#!/bin/sh\\npwd\\n\"\n";

async fn pwd_of_a_turn(folder: &Folder) -> (bdk_protocol::SessionId, String) {
    folder.model.push(calls(&[("c1", "pwd", "{}")], (10, 5)));
    folder.model.push(text("Done.", (20, 5)));
    let started = folder.start("Where are you?").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.completed"), 1, "{:?}", types(&events));
    let printed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::ActionResult(r) => {
                assert!(!r.is_error, "{:?}", r.result);
                Some(r.result.to_string())
            }
            _ => None,
        })
        .expect("the tool ran");
    (started.session_id, printed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_run_in_a_workspace_under_local_cwd() {
    let folder = Folder::with_agent_toml("\n[local]\ncwd = \"work\"\n", &[("tools/pwd.toml", PWD)]).await;
    let (id, printed) = pwd_of_a_turn(&folder).await;

    let expected = folder.root().join("proj/work").join(id.as_str());
    assert!(expected.is_dir(), "no workspace at {}", expected.display());
    let expected = expected.canonicalize().unwrap();
    assert!(printed.contains(expected.to_str().unwrap()), "pwd printed {printed}, expected {}", expected.display());
    // The agent tool's script was placed in that workspace, not under the state directory.
    let default = folder.state().join("sessions").join(id.as_str()).join("workspace");
    assert!(!default.exists(), "a workspace was made under the state directory too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_local_cwd_the_workspace_is_under_the_state_directory() {
    let folder = Folder::new(&[("tools/pwd.toml", PWD)]).await;
    let (id, printed) = pwd_of_a_turn(&folder).await;
    let default = folder.state().join("sessions").join(id.as_str()).join("workspace").canonicalize().unwrap();
    assert!(printed.contains(default.to_str().unwrap()), "pwd printed {printed}");
}
