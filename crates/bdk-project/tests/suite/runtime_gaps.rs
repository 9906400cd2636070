//! A part that validates but does not run would say so with a `not_run_yet` warning; every part
//! runs in this build, so a folder declaring all of them gets none: `storage.toml`'s debounce and
//! restore policies, `local.cwd`, skills, subagents, hooks, channels, MCP connections, artifacts,
//! the result gate, A/B experiments, extension config, schedules (all three kinds), named
//! reminder handlers and the built-in reminder tools. An empty `local.cwd` is an
//! `invalid_value` error on its key.

use super::fixture::Fixture;

#[test]
fn a_folder_declaring_every_part_gets_no_not_run_yet_warning() {
    let (_fx, project) = Fixture::new()
        .file("bot/agent.toml", "[local]\ncwd = \"repo\"\n\n[builtin_tools]\nreminders = true\n")
        .file("bot/schedules/daily.md", "---\ncron: \"0 9 * * 1-5\"\n---\nSummarize open incidents.\n")
        .file("bot/schedules/sync.toml", "cron = \"*/15 * * * *\"\nrun = [\"sh\", \"-c\", \"true\"]\n")
        .file(
            "bot/schedules/poke.toml",
            "cron = \"30 8 * * *\"\nreceive = { channel = \"portal\", message = \"hi\" }\n",
        )
        .file("bot/reminders/follow_up.toml", "command = [\"sh\", \"-c\", \"true\"]\n")
        .file("bot/storage.toml", "[policy]\ndebounce_ms = 500\n[policy.restore]\nmax_sessions = 10\n")
        .file("bot/hooks/audit.toml", "events = [\"*\"]\n[sink]\nkind = \"file\"\npath = \"audit.ndjson\"\n")
        .file("bot/artifacts.toml", "[kinds.report]\ndescription = \"A report.\"\n")
        .file("bot/result.toml", "command = [\"sh\", \"-c\", \"cat\"]\n")
        .file("bot/skills/triage.md", "Use when triaging.\n")
        .file("bot/subagents/helper/agent.toml", "description = \"Helps.\"\n")
        .file("bot/mcp-connections/docs.toml", "command = \"docs-server\"\n")
        .file("bot/channels/portal.toml", "[[routes]]\nmethod = \"POST\"\npath = \"/x\"\nhandler = [\"t\"]\n")
        .file("bot/ab/tone.toml", "[[arms]]\nid = \"a\"\nweight = 1\n\n[[arms]]\nid = \"b\"\nweight = 1\n")
        .file("bot/extensions/ci/extension.toml", "[config]\norg = \"acme\"\n")
        .file("bot/extensions/ci/schedules/nightly.toml", "cron = \"0 3 * * *\"\nrun = [\"true\"]\n")
        .load();
    let inert: Vec<_> = project.diagnostics.iter().filter(|d| d.code == "not_run_yet").collect();
    assert!(inert.is_empty(), "{inert:#?}");
    // Three schedules of the root and the extension's one.
    assert_eq!((project.caps.schedules.len(), project.caps.reminders.len()), (4, 1), "{:#?}", project.diagnostics);
    assert!(
        project.diagnostics.iter().all(|d| d.severity != bdk_protocol::Severity::Error),
        "{:#?}",
        project.diagnostics
    );
}

#[test]
fn an_empty_local_cwd_is_an_invalid_value() {
    let (_fx, project) = Fixture::new().file("bot/agent.toml", "[local]\ncwd = \" \"\n").load();
    let bad: Vec<_> = project.diagnostics.iter().filter(|d| d.code == "invalid_value").collect();
    assert_eq!(bad.len(), 1, "{:#?}", project.diagnostics);
    assert_eq!(bad[0].file.as_deref(), Some("bot/agent.toml"));
    assert!(bad[0].message.contains("local.cwd"), "{}", bad[0].message);
    assert_eq!(bad[0].line, Some(2), "{:#?}", bad[0]);
    assert_eq!(project.harness.cwd, None);
}
