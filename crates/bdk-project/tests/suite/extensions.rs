//! Extension mounts: `extensions/<ns>.toml` with a `path`, and `extensions/<ns>/` folders. What
//! they contribute is namespaced `<ns>__<name>`, and their instructions follow the root's.

use bdk_project::model::ScheduleAction;
use bdk_protocol::info::Source;

use super::fixture::Fixture;
use super::{assert_clean, find, only};

const TOOL: &str = "description = \"Lists failed jobs.\"\ncommand = [\"python3\", \"lib/jobs.py\"]\n";

fn ci_mount() -> Fixture {
    Fixture::new()
        .file(
            "bot/extensions/ci.toml",
            "path = \"../vendor/ci\"\ndescription = \"CI helpers.\"\n[config]\norg = \"acme\"\n\
             [hosting]\negress_domains = [\"api.ci.example\"]\nsecret_names = [\"CI_TOKEN\"]\n",
        )
        .file("bot/vendor/ci/instructions.md", "Check CI before answering.\n")
        .file("bot/vendor/ci/tools/failed_jobs.toml", TOOL)
        .file("bot/vendor/ci/lib/jobs.py", "")
        .file("bot/vendor/ci/skills/triage.md", "---\ndescription: Use on red builds.\n---\nSteps.\n")
        .file("bot/vendor/ci/mcp-connections/api.toml", "url = \"https://ci.example/mcp\"\n")
        .file("bot/vendor/ci/subagents/fixer/agent.toml", "description = \"Fixes builds.\"\n")
        .file("bot/vendor/ci/channels/events.toml", "[[routes]]\nmethod = \"POST\"\npath = \"/e\"\nhandler = [\"t\"]\n")
        .file("bot/vendor/ci/hooks/log.toml", "events = [\"*\"]\ncommand = [\"cat\"]\n")
        .file(
            "bot/vendor/ci/schedules/poll.toml",
            "cron = \"*/5 * * * *\"\nreceive = { channel = \"events\", message = \"poll\" }\n",
        )
        .file("bot/vendor/ci/reminders/recheck.toml", "command = [\"true\"]\n")
        .file("bot/vendor/ci/artifacts.toml", "[kinds.report]\ndescription = \"A CI report.\"\n")
        .file("bot/vendor/ci/sandbox/workspace/ci.yml", "jobs: []\n")
}

#[test]
fn a_file_mount_contributes_namespaced_capabilities() {
    //! Guards: `path` resolves against the extensions folder and everything found is `ci__`.
    let (fx, project) = ci_mount().load();
    // The mount's `receive` schedule loads with no diagnostic (its artifacts warn `not_run_yet`).
    assert_eq!(project.diagnostics.iter().filter(|d| d.code != "not_run_yet").count(), 0);
    let caps = &project.caps;
    let tool = project.tool("ci__failed_jobs").expect("namespaced tool");
    assert_eq!(tool.source, Source::Extension);
    assert_eq!(tool.file.as_deref(), Some("bot/vendor/ci/tools/failed_jobs.toml"));
    assert_eq!(tool.cwd, fx.path("bot/vendor/ci").canonicalize().expect("canonical"));
    assert_eq!(caps.skills[0].name, "ci__triage");
    assert_eq!(caps.connections[0].name, "ci__api");
    assert_eq!(caps.subagents[0].id, "ci__fixer");
    assert_eq!(caps.channels[0].id, "ci__events");
    assert_eq!(caps.hooks[0].name, "ci__log");
    assert_eq!(caps.schedules[0].id, "ci__poll");
    assert_eq!(caps.reminders[0].name, "ci__recheck");
    assert_eq!(caps.artifact_kinds[0].name, "ci__report");
    assert_eq!(caps.seeds[0].rel, "ci.yml");

    let ext = &project.extensions[0];
    assert_eq!(ext.namespace, "ci");
    assert_eq!(ext.file, "bot/extensions/ci.toml");
    assert_eq!(ext.description.as_deref(), Some("CI helpers."));
    assert_eq!(ext.config.get("org"), Some(&serde_json::json!("acme")));
    assert_eq!(ext.hosting.egress_domains, ["api.ci.example"]);
    assert_eq!(ext.contributed.tools, ["ci__failed_jobs"]);
    assert_eq!(ext.contributed.schedules, ["ci__poll"]);
}

#[test]
fn mount_references_stay_inside_the_namespace() {
    //! Guards: a mounted schedule's `receive` names the extension's own (namespaced) channel.
    let (_fx, project) = ci_mount().load();
    assert_eq!(
        project.caps.schedules[0].action,
        ScheduleAction::Receive { channel: "ci__events".into(), message: "poll".into() }
    );
}

#[test]
fn extension_instructions_are_appended_to_the_root() {
    //! Guards: the root's instructions come first, each extension's follow.
    let (_fx, project) = ci_mount().load();
    assert_eq!(project.instructions.text, "You are a test agent.\n\nCheck CI before answering.");
    assert_eq!(project.instructions.files, ["bot/instructions.md", "bot/vendor/ci/instructions.md"]);
    let ext = project.extensions[0].instructions.as_ref().expect("extension instructions");
    assert_eq!(ext.text, "Check CI before answering.");
}

#[test]
fn a_folder_mount_contributes_namespaced_capabilities() {
    //! Guards: `extensions/<ns>/` is itself the bot-shaped folder, with optional extension.toml.
    let (_fx, project) = Fixture::new()
        .file("bot/extensions/ops/extension.toml", "description = \"Ops.\"\n")
        .file("bot/extensions/ops/tools/restart.toml", TOOL)
        .file("bot/extensions/ops/lib/jobs.py", "")
        .file("bot/extensions/ops/skills/runbook/SKILL.md", "---\ndescription: Use for outages.\n---\nDo.\n")
        .file("bot/extensions/ops/instructions.md", "Ops rules.\n")
        .load();
    assert_clean(&project);
    assert!(project.tool("ops__restart").is_some());
    assert_eq!(project.caps.skills[0].name, "ops__runbook");
    assert_eq!(project.extensions[0].file, "bot/extensions/ops/extension.toml");
    assert!(project.instructions.text.ends_with("Ops rules."));
}

#[test]
fn a_namespaced_tool_clashes_with_a_local_file_of_that_name() {
    //! Guards: `ns__x` from an extension and a local `tools/ns__x.toml` cannot both exist.
    let (_fx, project) =
        Fixture::new().file("bot/tools/ns__x.toml", TOOL).file("bot/extensions/ns/tools/x.toml", TOOL).load();
    only(&project, "name_clash").error();
}

#[test]
fn mount_without_a_usable_path_is_an_error() {
    //! Guards: a `.toml` mount needs `path`, naming a folder that exists.
    let (_fx, project) = Fixture::new()
        .file("bot/extensions/a.toml", "description = \"no path\"\n")
        .file("bot/extensions/b.toml", "path = \"../nowhere\"\n")
        .load();
    let found: Vec<_> = super::all_with(&project, "extension_path")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.line))
        .collect();
    assert_eq!(found, [("bot/extensions/a.toml".to_owned(), None), ("bot/extensions/b.toml".to_owned(), Some(1))]);
    find(&project, "extension_path").error();
    assert!(project.extensions.is_empty());
}

#[test]
fn bad_namespaces_and_stray_entries_are_reported() {
    //! Guards: a namespace holds no `__`; extensions/ holds only mounts.
    let (_fx, project) =
        Fixture::new().file("bot/extensions/a__b.toml", "path = \".\"\n").file("bot/extensions/readme.md", "x").load();
    let check = only(&project, "invalid_name").error().file("bot/extensions/a__b.toml");
    assert_eq!(check.0.message, "`a__b` is not a valid extension namespace");
    let hint = check.0.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("no `__`") && !hint.contains("64"), "a namespace hint, not a tool-name one: {hint}");
    only(&project, "stray_file").warning().file("bot/extensions/readme.md");
}

#[test]
fn problems_inside_a_mount_name_the_mounted_file() {
    //! Guards: diagnostics from a mounted folder point at its files, with no `..` in the path.
    let (_fx, project) = Fixture::new()
        .file("bot/extensions/ci.toml", "path = \"../vendor/ci\"\n")
        .file("bot/vendor/ci/tools/bad.toml", "description = \"x\"\n")
        .load();
    only(&project, "tool_body_missing").error().file("bot/vendor/ci/tools/bad.toml");
}

#[test]
fn extensions_cannot_nest() {
    //! Guards: an extension's own extensions/ folder is reported and ignored.
    let (_fx, project) = Fixture::new()
        .file("bot/extensions/ns/extensions/inner.toml", "path = \".\"\n")
        .file("bot/extensions/ns/tools/x.toml", TOOL)
        .load();
    only(&project, "unknown_folder").warning().file("bot/extensions/ns/extensions");
    assert_eq!(project.extensions.len(), 1);
}

#[test]
fn advertised_mcp_tools_of_an_extension_are_namespaced() {
    //! Guards: a connection inside an extension advertises `ns__tool` like everything else the
    //! extension contributes: that is the name that clashes, that evals name and that info shows.
    let api = "url = \"https://ci.example/mcp\"\nadvertise_tools = [\"jobs\"]\n";
    let local = "description = \"Local jobs.\"\nscript = \"echo\"\n";
    let (_fx, project) = Fixture::new()
        .file("bot/extensions/ci/mcp-connections/api.toml", api)
        .file("bot/tools/jobs.toml", local)
        .file("evals/evals.toml", "")
        .file("evals/a.eval.toml", "message = \"hi\"\n[expect]\ncalled_tool = [\"ci__jobs\", \"jobs\"]\n")
        .load();
    assert_clean(&project);
    let conn = &project.caps.connections[0];
    assert_eq!(conn.advertised_names(), ["ci__jobs"]);
    assert_eq!(conn.advertise, bdk_project::model::Advertise::Only(vec!["jobs".into()]), "the server's own name");
    let info = serde_json::to_value(bdk_project::manifest(&project)).expect("manifest");
    assert_eq!(info["connections"][0]["advertiseTools"], serde_json::json!(["ci__jobs"]));

    let (_fx, clash) = Fixture::new()
        .file("bot/extensions/ci/mcp-connections/api.toml", api)
        .file("bot/tools/ci__jobs.toml", local)
        .load();
    let check = only(&clash, "name_clash").error().file("bot/extensions/ci/mcp-connections/api.toml");
    assert_eq!(check.0.message, "tool name `ci__jobs` is already claimed by bot/tools/ci__jobs.toml");
}
