//! Skills end to end through the fake model server: the model sees each skill's name and
//! description in the system prompt (never its body) and a `load_skill` tool; loading one
//! hands back its body and the workspace paths of its sibling files, which are in the session
//! workspace; an unknown skill is a tool error the model reads. An extension's skill is all of
//! that under its namespaced name.

use bdk_protocol::EventData;

use super::folder::*;
use super::support::*;

const SKILL: &str = "---\ndescription: Use when a release fails and needs triage.\n---\n# Release triage\n\n1. Read the \
                     SECRET-STEP checklist first.\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_loads_a_skill_it_was_only_told_about() {
    let folder = Folder::new(&[
        ("skills/triage/SKILL.md", SKILL),
        ("skills/triage/references/checklist.md", "- look at the logs\n"),
        ("skills/style.md", "Use when writing prose for people.\n\nShort sentences.\n"),
    ])
    .await;
    folder.model.push(calls(
        &[("c1", "load_skill", r#"{"name": "triage"}"#), ("c2", "load_skill", r#"{"name": "deploy"}"#)],
        (10, 5),
    ));
    folder.model.push(text("Triaged.", (20, 5)));

    let started = folder.start("The release failed.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.completed"), 1, "{:?}", types(&events));

    let requests = folder.model.requests();
    assert_eq!(requests.len(), 2);
    let system = system_of(&requests[0].body);
    assert!(system.starts_with("You are the parent agent."), "{system}");
    assert!(system.contains("- `triage`: Use when a release fails and needs triage."), "{system}");
    assert!(system.contains("- `style`: Use when writing prose for people."), "{system}");
    assert!(!system.contains("SECRET-STEP"), "a skill body leaked into the prompt: {system}");
    assert!(tools_of(&requests[0].body).contains(&"load_skill".to_owned()));

    let results = tool_results_of(&requests[1].body);
    assert_eq!(results.len(), 2);
    assert!(results[0].1.contains("SECRET-STEP"), "{}", results[0].1);
    assert!(results[0].1.contains(".bdk/skills/triage/references/checklist.md"), "{}", results[0].1);
    assert!(results[1].1.contains("there is no skill `deploy`"), "{}", results[1].1);
    let errors: Vec<bool> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionResult(r) => Some(r.is_error),
            _ => None,
        })
        .collect();
    assert_eq!(errors, [false, true]);

    let workspace = folder.workspace(&started.session_id).await;
    assert!(workspace.join(".bdk/skills/triage/SKILL.md").is_file());
    assert!(workspace.join(".bdk/skills/triage/references/checklist.md").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_skills_there_is_no_skill_tool_or_section() {
    let folder = Folder::new(&[]).await;
    folder.model.push(text("Hi.", (1, 1)));
    let started = folder.start("Hello").await;
    settled(&folder.engine, &started.session_id, 1).await;
    let requests = folder.model.requests();
    assert!(!tools_of(&requests[0].body).contains(&"load_skill".to_owned()));
    assert!(!system_of(&requests[0].body).contains("## Skills"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extensions_skill_is_advertised_and_loaded_under_its_namespace() {
    let folder = Folder::new(&[
        (
            "extensions/ops/skills/runbook/SKILL.md",
            "---\ndescription: Use when a service is down.\n---\nRUNBOOK-BODY\n",
        ),
        ("extensions/ops/skills/runbook/contacts.md", "- on call\n"),
    ])
    .await;
    folder.model.push(calls(&[("c1", "load_skill", r#"{"name": "ops__runbook"}"#)], (1, 1)));
    folder.model.push(text("Loaded.", (1, 1)));
    let started = folder.start("The API is down.").await;
    let events = settled(&folder.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.completed"), 1, "{:?}", types(&events));

    let requests = folder.model.requests();
    let system = system_of(&requests[0].body);
    assert!(system.contains("- `ops__runbook`: Use when a service is down."), "{system}");
    assert!(!system.contains("RUNBOOK-BODY"), "{system}");
    let results = tool_results_of(&requests[1].body);
    assert!(results[0].1.contains("RUNBOOK-BODY"), "{}", results[0].1);
    assert!(results[0].1.contains(".bdk/skills/ops__runbook/contacts.md"), "{}", results[0].1);
    let workspace = folder.workspace(&started.session_id).await;
    assert!(workspace.join(".bdk/skills/ops__runbook/SKILL.md").is_file());
    assert!(workspace.join(".bdk/skills/ops__runbook/contacts.md").is_file());
}
