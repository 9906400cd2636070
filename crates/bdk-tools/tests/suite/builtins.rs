//! The built-in workspace tools: read, ls, glob, grep, write, edit and shell, confined to the
//! workspace, with caps and timeouts, restricted by the `tools` allowlist.

use std::fs;

use bdk_tools::{ProjectTools, ToolOutcome, ToolRegistry};
use serde_json::{Value, json};

use super::{Bot, call, error_text, time_out_after_pid_file, wait_dead};

fn tools(bot: &Bot) -> ProjectTools {
    ProjectTools::empty(bot.bot()).build().unwrap()
}

async fn run(bot: &Bot, tools: &ProjectTools, name: &str, input: Value) -> ToolOutcome {
    call(tools, bot.invocation(name, input)).await
}

async fn ok_text(bot: &Bot, tools: &ProjectTools, name: &str, input: Value) -> String {
    let outcome = run(bot, tools, name, input).await;
    assert!(!outcome.is_error, "{name}: {outcome:?}");
    outcome.result.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn write_read_edit_round_trip() {
    //! Guards: write creates folders, read returns the text (with ranges), edit replaces exactly
    //! one occurrence unless replace_all.
    let bot = Bot::new();
    let tools = tools(&bot);
    let text = ok_text(&bot, &tools, "write", json!({"path": "src/a.txt", "content": "one\ntwo\ntwo\nthree\n"})).await;
    assert!(text.contains("src/a.txt"), "{text}");
    assert_eq!(ok_text(&bot, &tools, "read", json!({"path": "src/a.txt"})).await, "one\ntwo\ntwo\nthree\n");
    let part = ok_text(&bot, &tools, "read", json!({"path": "src/a.txt", "offset": 2, "limit": 1})).await;
    assert!(part.starts_with("two\n[lines 2-2 of 4"), "{part}");

    let text = error_text(
        &run(&bot, &tools, "edit", json!({"path": "src/a.txt", "old_string": "two", "new_string": "2"})).await,
    );
    assert!(text.contains("occurs 2 times"), "{text}");
    let text = error_text(
        &run(&bot, &tools, "edit", json!({"path": "src/a.txt", "old_string": "zzz", "new_string": "2"})).await,
    );
    assert!(text.contains("does not occur"), "{text}");
    ok_text(&bot, &tools, "edit", json!({"path": "src/a.txt", "old_string": "one", "new_string": "1"})).await;
    ok_text(
        &bot,
        &tools,
        "edit",
        json!({"path": "src/a.txt", "old_string": "two", "new_string": "2", "replace_all": true}),
    )
    .await;
    assert_eq!(fs::read_to_string(bot.workspace().join("src/a.txt")).unwrap(), "1\n2\n2\nthree\n");
}

#[tokio::test]
async fn ls_glob_and_grep_find_things() {
    //! Guards: ls lists (folders with `/`), glob matches relative paths, grep prints path:line:text.
    let bot = Bot::new();
    let tools = tools(&bot);
    let ws = bot.workspace();
    fs::create_dir_all(ws.join("src/deep")).unwrap();
    fs::write(ws.join("src/main.rs"), "fn main() {}\n// TODO: more\n").unwrap();
    fs::write(ws.join("src/deep/lib.rs"), "pub fn todo() {}\n").unwrap();
    fs::write(ws.join("README.md"), "todo list\n").unwrap();
    fs::create_dir_all(ws.join(".git")).unwrap();
    fs::write(ws.join(".git/TODO.rs"), "TODO").unwrap();

    assert_eq!(ok_text(&bot, &tools, "ls", json!({})).await, ".git/\nREADME.md\nsrc/");
    assert_eq!(ok_text(&bot, &tools, "glob", json!({"pattern": "**/*.rs"})).await, "src/deep/lib.rs\nsrc/main.rs");
    assert_eq!(ok_text(&bot, &tools, "glob", json!({"pattern": "*.rs", "path": "src"})).await, "src/main.rs");
    assert_eq!(ok_text(&bot, &tools, "glob", json!({"pattern": "*.zip"})).await, "(no matches)");
    let hits = ok_text(&bot, &tools, "grep", json!({"pattern": "todo", "ignore_case": true})).await;
    assert_eq!(hits, "README.md:1:todo list\nsrc/deep/lib.rs:1:pub fn todo() {}\nsrc/main.rs:2:// TODO: more\n");
    let hits = ok_text(&bot, &tools, "grep", json!({"pattern": "TODO", "glob": "*.rs"})).await;
    assert_eq!(hits, "src/main.rs:2:// TODO: more\n");
    let text = error_text(&run(&bot, &tools, "grep", json!({"pattern": "("})).await);
    assert!(text.contains("not a valid regular expression"), "{text}");
}

#[tokio::test]
async fn paths_cannot_leave_the_workspace() {
    //! Guards: `..`, absolute paths outside and symlinks leading out are refused by every file tool.
    let bot = Bot::new();
    let tools = tools(&bot);
    let outside = bot.dir.path().join("secret.txt");
    fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(bot.dir.path(), bot.workspace().join("link")).unwrap();
    let attempts = [
        ("read", json!({"path": "../secret.txt"})),
        ("read", json!({"path": outside.display().to_string()})),
        ("read", json!({"path": "link/secret.txt"})),
        ("write", json!({"path": "../escape.txt", "content": "x"})),
        ("write", json!({"path": "link/escape.txt", "content": "x"})),
        ("edit", json!({"path": "/etc/hostname", "old_string": "a", "new_string": "b"})),
        ("ls", json!({"path": ".."})),
        ("glob", json!({"pattern": "*", "path": "../"})),
        ("grep", json!({"pattern": "secret", "path": "link"})),
    ];
    for (name, input) in attempts {
        let text = error_text(&run(&bot, &tools, name, input.clone()).await);
        assert!(text.contains("workspace") || text.contains("symlink"), "{name} {input}: {text}");
    }
    assert!(!bot.dir.path().join("escape.txt").exists());
    // grep over the workspace does not follow the link out either.
    let hits = ok_text(&bot, &tools, "grep", json!({"pattern": "secret"})).await;
    assert_eq!(hits, "(no matches)");
}

#[tokio::test]
async fn shell_runs_in_the_workspace() {
    //! Guards: `sh -c` with the workspace as cwd; exit code, stdout and stderr come back; a
    //! non-zero exit is an error result.
    let bot = Bot::new();
    let tools = tools(&bot);
    let outcome = run(&bot, &tools, "shell", json!({"command": "pwd; echo oops >&2"})).await;
    assert!(!outcome.is_error, "{outcome:?}");
    let ws = bot.workspace().canonicalize().unwrap();
    assert_eq!(outcome.result["stdout"], json!(format!("{}\n", ws.display())));
    assert_eq!(outcome.result["stderr"], json!("oops\n"));
    assert_eq!(outcome.result["exitCode"], json!(0));
    let outcome = run(&bot, &tools, "shell", json!({"command": "exit 4"})).await;
    assert!(outcome.is_error);
    assert_eq!(outcome.result["exitCode"], json!(4));
}

#[tokio::test]
async fn shell_timeouts_kill_the_group() {
    //! Guards: `timeout_ms` ends the command and its background children.
    let bot = Bot::new();
    let tools = tools(&bot);
    let pidfile = bot.dir.path().join("bg.pid");
    let command = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let (_, pid) = time_out_after_pid_file(&pidfile, |ms| {
        run(&bot, &tools, "shell", json!({"command": command, "timeout_ms": ms}))
    })
    .await;
    wait_dead(pid).await;
}

#[tokio::test]
async fn big_outputs_are_capped() {
    //! Guards: shell output is cut (start and end kept); read stops at its byte cap.
    let bot = Bot::new();
    let tools = tools(&bot);
    let outcome = run(&bot, &tools, "shell", json!({"command": "seq 1 200000"})).await;
    let stdout = outcome.result["stdout"].as_str().unwrap();
    assert!(stdout.len() < 70 * 1024, "{}", stdout.len());
    assert!(stdout.starts_with("1\n2\n") && stdout.ends_with("200000\n") && stdout.contains("cut"));
    fs::write(bot.workspace().join("big.txt"), "y\n".repeat(400_000)).unwrap();
    let text = ok_text(&bot, &tools, "read", json!({"path": "big.txt", "limit": 1_000_000})).await;
    assert!(text.len() <= 256 * 1024 + 200, "{}", text.len());
    assert!(text.contains("call read with offset"), "the model is told how to continue");
}

#[tokio::test]
async fn the_allowlist_restricts_builtins_and_dry_runs_stub_writes() {
    //! Guards: `tools = [...]` in agent.toml limits the built-ins; in a dry run write/edit/shell
    //! are stubbed and read still runs.
    let bot = Bot::new();
    let tools = ProjectTools::empty(bot.bot()).builtins(Some(vec!["read".into(), "shell".into()])).build().unwrap();
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read", "shell"]);
    assert!(
        error_text(&run(&bot, &tools, "write", json!({"path": "a", "content": ""})).await).contains("unknown tool")
    );

    let all = ProjectTools::empty(bot.bot()).build().unwrap();
    let names: Vec<String> = all.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["read", "ls", "glob", "grep", "write", "edit", "shell"]);
    assert!(all.callable_names().is_empty(), "built-ins are not server tools");

    let marker = bot.workspace().join("touched");
    let mut invocation = bot.invocation("shell", json!({"command": format!("touch {}", marker.display())}));
    invocation.dry_run = true;
    let outcome = call(&all, invocation).await;
    assert!(outcome.stubbed);
    assert!(!marker.exists());
    fs::write(bot.workspace().join("r.txt"), "hello").unwrap();
    let mut invocation = bot.invocation("read", json!({"path": "r.txt"}));
    invocation.dry_run = true;
    assert_eq!(call(&all, invocation).await.result, json!("hello\n"));
}
