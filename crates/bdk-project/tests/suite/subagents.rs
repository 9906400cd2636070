//! `subagents/<id>/`: agent.toml with a description is required; capability folders inside a
//! subagent are warned about and ignored.

use bdk_project::checks::active_builtins;

use super::fixture::Fixture;
use super::{assert_clean, assert_none, find, only};

#[test]
fn a_subagent_loads_with_its_instructions() {
    //! Guards: description, model and instructions.md reach the typed subagent; `task` turns on.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/researcher/agent.toml", "description = \"Finds sources.\"\nmodel = \"grok-mini\"\n")
        .file("bot/subagents/researcher/instructions.md", "Research.\n")
        .load();
    assert_clean(&project);
    let sub = &project.caps.subagents[0];
    assert_eq!(sub.id, "researcher");
    assert_eq!(sub.description, "Finds sources.");
    assert_eq!(sub.model.as_ref().map(|m| m.id.as_str()), Some("grok-mini"));
    assert_eq!(sub.instructions.text, "Research.");
    assert_eq!(sub.file, "bot/subagents/researcher/agent.toml");
    assert!(active_builtins(&project).contains(&"task"));
}

#[test]
fn inline_instructions_are_used_without_a_file() {
    //! Guards: `instructions` in agent.toml stands in for instructions.md.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/s/agent.toml", "description = \"S.\"\ninstructions = \"Be brief.\"\n")
        .load();
    assert_clean(&project);
    assert_eq!(project.caps.subagents[0].instructions.text, "Be brief.");
}

#[test]
fn subagent_without_description_is_an_error() {
    //! Guards: the parent delegates by description, so a subagent without one is refused.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/s/agent.toml", "model = \"grok-mini\"\n")
        .file("bot/subagents/t/agent.toml", "description = \" \"\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "missing_description").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/subagents/s/agent.toml", "bot/subagents/t/agent.toml"]);
    find(&project, "missing_description").error();
    assert!(project.caps.subagents.is_empty());
}

#[test]
fn subagent_without_agent_toml_is_an_error() {
    //! Guards: a subagent folder must hold agent.toml.
    let (_fx, project) = Fixture::new().file("bot/subagents/s/instructions.md", "Hi.\n").load();
    only(&project, "missing_agent_toml").error().file("bot/subagents/s");
    assert!(project.caps.subagents.is_empty());
}

#[test]
fn capability_folders_inside_a_subagent_warn_and_are_ignored() {
    //! Guards: subagents inherit the parent's capabilities; their own folders are ignored.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/s/agent.toml", "description = \"S.\"\n")
        .file("bot/subagents/s/tools/x.toml", "this would not parse")
        .file("bot/subagents/s/skills/y.md", "no description")
        .load();
    let files: Vec<_> = super::all_with(&project, "subagent_capability_ignored")
        .iter()
        .map(|d| d.file.clone().unwrap_or_default())
        .collect();
    assert_eq!(files, ["bot/subagents/s/skills", "bot/subagents/s/tools"]);
    find(&project, "subagent_capability_ignored").warning();
    assert!(!project.has_errors(), "{:#?}", project.diagnostics);
    assert!(project.caps.tools.is_empty() && project.caps.skills.is_empty());
    assert_eq!(project.caps.subagents.len(), 1);
}

#[test]
fn stray_entries_in_subagents_are_reported() {
    //! Guards: subagents/ holds folders; other files and unknown folders warn.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/readme.md", "x")
        .file("bot/subagents/s/agent.toml", "description = \"S.\"\n")
        .file("bot/subagents/s/notes.txt", "x")
        .dir("bot/subagents/s/data")
        .load();
    let strays: Vec<_> =
        super::all_with(&project, "stray_file").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(strays, ["bot/subagents/readme.md", "bot/subagents/s/notes.txt"]);
    only(&project, "unknown_folder").warning().file("bot/subagents/s/data");
}

#[test]
fn invalid_subagent_ids_are_reported() {
    //! Guards: a subagent folder name outside the slug rule is invalid_name.
    let (_fx, project) = Fixture::new().file("bot/subagents/bad id/agent.toml", "description = \"S.\"\n").load();
    only(&project, "invalid_name").error().file("bot/subagents/bad id");
}

#[test]
fn zero_max_steps_is_an_invalid_value() {
    //! Guards: a subagent's `max_steps` is at least 1, like the root's; the subagent still loads.
    let (_fx, project) =
        Fixture::new().file("bot/subagents/s/agent.toml", "description = \"S.\"\nmax_steps = 0\n").load();
    only(&project, "invalid_value").error().file("bot/subagents/s/agent.toml").line(2);
    assert_eq!(project.caps.subagents[0].max_steps, None);
}

#[test]
fn an_allowlist_without_task_makes_subagents_unreachable() {
    //! Guards: `tools` without "task" hides the only way to delegate, so the subagents warn.
    let sub = "description = \"S.\"\n";
    let (_fx, project) = Fixture::new()
        .file("bot/agent.toml", "description = \"Root.\"\ntools = [\"read\", \"grep\"]\n")
        .file("bot/subagents/a/agent.toml", sub)
        .file("bot/subagents/b/agent.toml", sub)
        .load();
    let check = only(&project, "unreachable_subagents").warning().file("bot/agent.toml").line(2);
    assert_eq!(check.0.message, "`tools` leaves out \"task\", so the model can never delegate to subagents `a`, `b`");
    assert!(!active_builtins(&project).contains(&"task"));

    let (_fx, with_task) = Fixture::new()
        .file("bot/agent.toml", "tools = [\"read\", \"task\"]\n")
        .file("bot/subagents/a/agent.toml", sub)
        .load();
    assert_clean(&with_task);
    let (_fx, no_allowlist) = Fixture::new().file("bot/subagents/a/agent.toml", sub).load();
    assert_none(&no_allowlist, "unreachable_subagents");
    let (_fx, no_subagents) = Fixture::new().file("bot/agent.toml", "tools = [\"read\"]\n").load();
    assert_clean(&no_subagents);
}
