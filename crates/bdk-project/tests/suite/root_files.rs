//! The root agent's own files: agent.toml, artifacts.toml, result.toml, storage.toml and A/B
//! experiments (`ab.toml`, `ab/<id>.toml`).

use bdk_project::checks::active_builtins;

use super::fixture::Fixture;
use super::{assert_clean, find, only};

#[test]
fn a_sandbox_names_the_command_tools_it_does_not_confine() {
    //! Guards: under `local.sandbox`, each command tool (the author's code, run on the host) is a
    //! `sandbox_not_enforced` warning at the `sandbox` key; agent tools are confined, no warning.
    let (_fx, project) = Fixture::new()
        .file("bot/agent.toml", "[local]\nsandbox = true\nsandbox_network = true\n")
        .file("bot/tools/deploy.toml", "description = \"Deploy.\"\ncommand = [\"sh\", \"-c\", \"cat\"]\n")
        .file(
            "bot/tools/count.toml",
            "description = \"Count.\"\nexecution = \"agent\"\nscript = \"#!/bin/sh\\ncat\\n\"\n",
        )
        .load();
    let warning = only(&project, "sandbox_not_enforced").warning().file("bot/agent.toml").line(2);
    assert!(warning.0.message.contains("`deploy`"), "{}", warning.0.message);
    assert!(project.harness.sandbox_network);
}

#[test]
fn agent_toml_settings_are_read() {
    //! Guards: name, description, model table and harness settings reach the project.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/agent.toml",
            "name = \"Helper\"\ndescription = \"Helps.\"\nmax_steps = 12\ntools = [\"read\", \"grep\"]\n\
             [model]\nid = \"gpt-x\"\nprovider = \"openai\"\n[model.params]\ntemperature = 0.2\n\
             [local]\nsandbox = true\n",
        )
        .load();
    // `local.sandbox` is read; with no command tool it covers everything (no diagnostic).
    assert_clean(&project);
    assert_eq!(project.name, "Helper");
    assert_eq!(project.slug, "proj");
    assert_eq!(project.harness.max_steps, 12);
    assert!(project.harness.sandbox);
    let model = project.model.as_ref().expect("model");
    assert_eq!((model.id.as_str(), model.provider.as_deref()), ("gpt-x", Some("openai")));
    assert_eq!(model.params.get("temperature"), Some(&serde_json::json!(0.2)));
    assert_eq!(active_builtins(&project), ["read", "grep"]);
}

#[test]
fn bad_agent_toml_values_are_reported() {
    //! Guards: zero limits, unknown providers and unknown model keys are reported at their line.
    let (_fx, project) =
        Fixture::new().file("bot/agent.toml", "max_steps = 0\n[model]\nid = \"x\"\nprovider = \"acme\"\n").load();
    let lines: Vec<_> = super::all_with(&project, "invalid_value").iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(1), Some(4)]);
    let (_fx, project) = Fixture::new().file("bot/agent.toml", "[model]\nid = \"x\"\ntemprature = 1\n").load();
    only(&project, "unknown_key").error().file("bot/agent.toml");
}

#[test]
fn artifacts_agent_tool_without_kinds_is_an_error() {
    //! Guards: `tag_artifact` needs at least one declared kind to tag with.
    let (_fx, project) = Fixture::new().file("bot/artifacts.toml", "max = 10\nagent_tool = true\n").load();
    only(&project, "artifacts_no_kinds").error().file("bot/artifacts.toml").line(2);
}

#[test]
fn artifacts_with_kinds_turn_on_tag_artifact() {
    //! Guards: declared kinds load and agent_tool adds the `tag_artifact` built-in.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/artifacts.toml",
            "agent_tool = true\n[kinds.report]\ndescription = \"A report.\"\nschema = { type = \"object\" }\n",
        )
        .load();
    assert_clean(&project);
    assert_eq!(project.caps.artifact_kinds[0].name, "report");
    assert!(active_builtins(&project).contains(&"tag_artifact"));
}

#[test]
fn ab_with_fewer_than_two_arms_is_an_error() {
    //! Guards: an experiment needs two or more arms, in ab.toml and ab/<id>.toml alike.
    let (_fx, project) = Fixture::new()
        .file("bot/ab.toml", "[[arms]]\nid = \"only\"\n")
        .file("bot/ab/tone.toml", "description = \"none\"\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "ab_arms").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/ab.toml", "bot/ab/tone.toml"]);
    find(&project, "ab_arms").error().line(1);
    assert!(project.abs.is_empty());
}

#[test]
fn ab_arms_need_distinct_ids_and_weights() {
    //! Guards: duplicate arm ids or zero weights are refused.
    let (_fx, project) = Fixture::new()
        .file("bot/ab/a.toml", "[[arms]]\nid = \"x\"\n[[arms]]\nid = \"x\"\n")
        .file("bot/ab/b.toml", "[[arms]]\nid = \"x\"\n[[arms]]\nid = \"y\"\nweight = 0\n")
        .load();
    assert_eq!(super::all_with(&project, "ab_arms").len(), 2);
}

#[test]
fn ab_toml_and_ab_folder_share_one_id_space() {
    //! Guards: `ab.toml` is experiment `ab`, so `ab/ab.toml` clashes with it.
    let arms = "[[arms]]\nid = \"a\"\n[[arms]]\nid = \"b\"\n";
    let (_fx, project) = Fixture::new().file("bot/ab.toml", arms).file("bot/ab/ab.toml", arms).load();
    only(&project, "name_clash").error();
}

#[test]
fn a_valid_ab_experiment_loads() {
    //! Guards: arms keep their weights, models and instructions.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/ab/tone.toml",
            "[[arms]]\nid = \"control\"\n[[arms]]\nid = \"terse\"\nweight = 3\ninstructions = \"Be terse.\"\n",
        )
        .load();
    assert_clean(&project);
    let ab = &project.abs[0];
    assert_eq!(ab.id, "tone");
    assert!(ab.enabled);
    assert_eq!(ab.arms[1].weight, 3);
}

#[test]
fn result_and_storage_are_checked() {
    //! Guards: result.toml needs a command; storage.toml a known backend.
    let (_fx, project) = Fixture::new()
        .file("bot/result.toml", "command = []\n")
        .file("bot/storage.toml", "backend = \"redis\"\n")
        .load();
    only(&project, "missing_field").error().file("bot/result.toml");
    only(&project, "invalid_value").error().file("bot/storage.toml");
    assert!(project.result.is_none());
}

#[test]
fn compaction_and_the_context_window_are_read() {
    //! Guards: `[compaction]` and `[model] context_window` reach the project; defaults without them.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/agent.toml",
            "[model]\nid = \"gpt-x\"\ncontext_window = 32000\n\n[compaction]\nenabled = false\nthreshold = 0.5\nkeep_turns = 0\n",
        )
        .load();
    assert_clean(&project);
    assert_eq!(project.model.as_ref().unwrap().context_window, Some(32000));
    let compaction = project.harness.compaction;
    assert_eq!((compaction.enabled, compaction.threshold, compaction.keep_turns), (false, 0.5, 0));

    let (_fx, project) = Fixture::new().load();
    let compaction = project.harness.compaction;
    assert_eq!((compaction.enabled, compaction.threshold, compaction.keep_turns), (true, 0.8, 2));
}

#[test]
fn bad_compaction_values_are_invalid_values_at_their_keys() {
    //! Guards: a zero context window and a threshold outside (0, 1] are `invalid_value` at the
    //! key, and the defaults stay; an unknown `[compaction]` key is `unknown_key`.
    let (_fx, project) = Fixture::new()
        .file("bot/agent.toml", "[model]\nid = \"gpt-x\"\ncontext_window = 0\n\n[compaction]\nthreshold = 1.5\n")
        .load();
    let bad: Vec<_> = project.diagnostics.iter().filter(|d| d.code == "invalid_value").collect();
    assert_eq!(bad.len(), 2, "{:#?}", project.diagnostics);
    assert_eq!(bad.iter().map(|d| d.line).collect::<Vec<_>>(), [Some(3), Some(6)], "{bad:#?}");
    assert!(bad[1].message.contains("compaction.threshold"), "{}", bad[1].message);
    assert_eq!(project.model.as_ref().unwrap().context_window, None);
    assert_eq!(project.harness.compaction.threshold, 0.8);

    let (_fx, project) = Fixture::new().file("bot/agent.toml", "[compaction]\nkeep = 3\n").load();
    assert!(project.diagnostics.iter().any(|d| d.code == "unknown_key"), "{:#?}", project.diagnostics);
}
