//! Session workspace materialization from a real project folder: skills, agent-tool scripts with
//! their `AGENTS.md` catalog, `sandbox/workspace/**` seeds and per-send files; idempotent.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use bdk_tools::workspace::{materialize, write_files};
use bdk_tools::{ProjectTools, ToolRegistry};

use super::within;

const AGENT_TOOL: &str = r#"description = "Echo a message from the agent workspace."
execution = "agent"
script = """
#!/bin/sh
python3 -c 'import json,sys; print(json.load(sys.stdin)["message"])'
"""

[input_schema]
type = "object"
required = ["message"]
properties = { message = { type = "string" } }
"#;

fn project() -> (tempfile::TempDir, bdk_project::Project) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let files = [
        ("bot/instructions.md", "You are a test agent.\n"),
        ("bot/tools/echo_msg.toml", AGENT_TOOL),
        ("bot/skills/flat.md", "---\ndescription: Use when flat.\n---\n# Flat\n"),
        ("bot/skills/deep/SKILL.md", "---\ndescription: Use when deep.\n---\nRead notes/a.md.\n"),
        ("bot/skills/deep/notes/a.md", "note a\n"),
        ("bot/sandbox/workspace/README.md", "seeded readme\n"),
        ("bot/sandbox/workspace/data/input.csv", "a,b\n"),
    ];
    for (rel, text) in files {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let project = bdk_project::load_project(&root, false);
    assert!(!project.has_errors(), "{:?}", project.diagnostics);
    (dir, project)
}

#[tokio::test]
async fn a_workspace_gets_skills_tools_catalog_seeds_and_files() {
    //! Guards: everything lands where the harness expects it, and the agent tool then runs.
    let (dir, project) = project();
    let tools = ProjectTools::builder(&project).build().unwrap();
    let ws = dir.path().join("ws");
    let files = vec![("notes/today.md".to_owned(), "per-send\n".to_owned())];
    tools.prepare_workspace(&ws, &files).unwrap();

    assert_eq!(
        fs::read_to_string(ws.join(".bdk/skills/flat/SKILL.md")).unwrap(),
        "---\ndescription: Use when flat.\n---\n# Flat\n"
    );
    assert!(fs::read_to_string(ws.join(".bdk/skills/deep/SKILL.md")).unwrap().contains("Read notes/a.md."));
    assert_eq!(fs::read_to_string(ws.join(".bdk/skills/deep/notes/a.md")).unwrap(), "note a\n");
    let script = ws.join(".bdk/tools/echo_msg");
    assert!(fs::read_to_string(&script).unwrap().starts_with("#!/bin/sh"));
    assert_eq!(fs::metadata(&script).unwrap().permissions().mode() & 0o111, 0o111);
    let catalog = fs::read_to_string(ws.join("AGENTS.md")).unwrap();
    assert!(catalog.contains("### `echo_msg`"), "{catalog}");
    assert!(catalog.contains("Echo a message from the agent workspace."), "{catalog}");
    assert!(catalog.contains(r#"echo '{"message":"..."}' | .bdk/tools/echo_msg"#), "{catalog}");
    assert!(catalog.contains("\"required\""), "the schema is shown: {catalog}");
    assert_eq!(fs::read_to_string(ws.join("README.md")).unwrap(), "seeded readme\n");
    assert_eq!(fs::read_to_string(ws.join("data/input.csv")).unwrap(), "a,b\n");
    assert_eq!(fs::read_to_string(ws.join("notes/today.md")).unwrap(), "per-send\n");

    // The script really runs as the catalog says.
    let mut child = tokio::process::Command::new(".bdk/tools/echo_msg")
        .current_dir(&ws)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    within(tokio::io::AsyncWriteExt::write_all(&mut stdin, br#"{"message": "hi"}"#)).await.unwrap();
    drop(stdin);
    let out = within(child.wait_with_output()).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");

    // And through the registry.
    let mut invocation = bdk_tools::ToolInvocation::generate("echo_msg", serde_json::json!({"message": "yo"}));
    invocation.workspace = Some(ws.clone());
    let outcome = within(tools.call(invocation, Default::default())).await;
    assert_eq!(outcome.result, serde_json::json!("yo"));
}

#[test]
fn materializing_twice_changes_nothing_and_keeps_session_edits() {
    //! Guards: idempotence; a seed the session edited is not overwritten; a user AGENTS.md keeps
    //! its own text with the catalog section replaced in place, not duplicated.
    let (dir, project) = project();
    let tools = ProjectTools::builder(&project).build().unwrap();
    let plan = tools.workspace_plan();
    let ws = dir.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("AGENTS.md"), "# House rules\n\nBe brief.\n").unwrap();
    materialize(&ws, plan, &[]).unwrap();
    let first = fs::read_to_string(ws.join("AGENTS.md")).unwrap();
    assert!(first.starts_with("# House rules\n\nBe brief.\n\n<!-- bdk:agent-tools:begin -->"), "{first}");
    fs::write(ws.join("README.md"), "edited by the session\n").unwrap();
    materialize(&ws, plan, &[]).unwrap();
    assert_eq!(fs::read_to_string(ws.join("AGENTS.md")).unwrap(), first);
    assert_eq!(fs::read_to_string(ws.join("README.md")).unwrap(), "edited by the session\n");
    assert_eq!(first.matches("bdk:agent-tools:begin").count(), 1);
}

#[test]
fn per_send_files_are_confined() {
    //! Guards: workspaceFiles may not escape; a bad path refuses the whole set, writing nothing.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    for bad in ["../out.txt", "/etc/x", "a/../../out.txt", "."] {
        let files = vec![("ok.txt".to_owned(), "x".to_owned()), (bad.to_owned(), "x".to_owned())];
        assert!(write_files(&ws, &files).is_err(), "{bad}");
    }
    assert!(!ws.join("ok.txt").exists());
    assert!(!dir.path().join("out.txt").exists());
    write_files(&ws, &[("a/b/c.txt".to_owned(), "deep".to_owned())]).unwrap();
    assert_eq!(fs::read_to_string(ws.join("a/b/c.txt")).unwrap(), "deep");
}
