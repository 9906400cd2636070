//! `skills/<name>.md` and `skills/<name>/SKILL.md`: the description frontmatter the model routes
//! by, sibling files, and names.

use bdk_protocol::info::Source;

use super::fixture::Fixture;
use super::{assert_clean, find, only};

#[test]
fn flat_and_folder_skills_load() {
    //! Guards: both skill forms load with their description, body and sibling files.
    let (_fx, project) = Fixture::new()
        .file("bot/skills/triage.md", "---\ndescription: Use when a bug report arrives.\n---\nSteps.\n")
        .file(
            "bot/skills/deploy/SKILL.md",
            "---\nname: deploy\ndescription: Use to ship.\nlicense: MIT\n---\nShip it.\n",
        )
        .file("bot/skills/deploy/checklist.md", "- [ ] tests\n")
        .file("bot/skills/deploy/scripts/run.sh", "#!/bin/sh\n")
        .load();
    assert_clean(&project);
    let names: Vec<&str> = project.caps.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["deploy", "triage"]);
    let deploy = &project.caps.skills[0];
    assert_eq!(deploy.description, "Use to ship.");
    assert_eq!(deploy.file, "bot/skills/deploy/SKILL.md");
    assert_eq!(deploy.files, ["checklist.md", "scripts/run.sh"]);
    assert_eq!(deploy.body, "Ship it.\n");
    assert_eq!(deploy.source, Source::File);
    assert_eq!(project.caps.skills[1].body, "Steps.\n");
}

#[test]
fn flat_skill_description_falls_back_to_the_first_body_line() {
    //! Guards: `description` is optional in a flat skill; the first non-empty body line, without
    //! heading marks, stands in (a blank description counts as none).
    let (_fx, project) = Fixture::new()
        .file("bot/skills/a.md", "\n# Triage a failed release\n\n1. Read.\n")
        .file("bot/skills/b.md", "---\nlicense: MIT\n---\n\nUse when asked.\n")
        .file("bot/skills/c.md", "---\ndescription: \"  \"\n---\nBody.\n")
        .load();
    assert_clean(&project);
    let described: Vec<(&str, &str)> =
        project.caps.skills.iter().map(|s| (s.name.as_str(), s.description.as_str())).collect();
    assert_eq!(described, [("a", "Triage a failed release"), ("b", "Use when asked."), ("c", "Body.")]);
    assert_eq!(project.caps.skills[0].body, "\n# Triage a failed release\n\n1. Read.\n");
}

#[test]
fn flat_skill_without_description_or_body_is_an_error() {
    //! Guards: with no description and nothing in the body, there is nothing to route by.
    let (_fx, project) =
        Fixture::new().file("bot/skills/a.md", "---\nlicense: MIT\n---\n\n  \n").file("bot/skills/b.md", "#\n").load();
    let files: Vec<_> =
        super::all_with(&project, "missing_description").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/skills/a.md", "bot/skills/b.md"]);
    find(&project, "missing_description").error().line(1);
    assert!(project.caps.skills.is_empty());
}

#[test]
fn skill_folder_without_description_is_an_error() {
    //! Guards: a folder skill whose SKILL.md has no description is reported at SKILL.md.
    let (_fx, project) = Fixture::new().file("bot/skills/deploy/SKILL.md", "---\nname: deploy\n---\nShip.\n").load();
    only(&project, "missing_description").error().file("bot/skills/deploy/SKILL.md");
    assert!(project.caps.skills.is_empty());
}

#[test]
fn skill_folder_without_skill_md_is_an_error() {
    //! Guards: a folder under skills/ must hold SKILL.md.
    let (_fx, project) = Fixture::new().file("bot/skills/deploy/README.md", "x").load();
    only(&project, "missing_field").error().file("bot/skills/deploy");
}

#[test]
fn unknown_frontmatter_keys_warn() {
    //! Guards: keys outside the Agent Skills set warn (other tools keep them) but still load.
    let (_fx, project) =
        Fixture::new().file("bot/skills/x.md", "---\ndescription: Use it.\nauthor: me\n---\nBody.\n").load();
    only(&project, "unknown_frontmatter_key").warning().file("bot/skills/x.md").line(3);
    assert_eq!(project.caps.skills.len(), 1);
}

#[test]
fn frontmatter_name_must_match_the_path() {
    //! Guards: the path decides the name; a differing frontmatter `name` is reported.
    let (_fx, project) =
        Fixture::new().file("bot/skills/x.md", "---\nname: y\ndescription: Use it.\n---\nBody.\n").load();
    only(&project, "invalid_name").error().file("bot/skills/x.md").line(2);
}

#[test]
fn non_markdown_files_in_skills_are_stray() {
    //! Guards: skills/ holds .md files and folders only.
    let (_fx, project) = Fixture::new().file("bot/skills/notes.txt", "x").load();
    only(&project, "stray_file").warning().file("bot/skills/notes.txt");
}

#[test]
fn flat_and_folder_skill_of_one_name_clash() {
    //! Guards: `skills/x.md` and `skills/x/SKILL.md` both define skill `x`.
    let (_fx, project) = Fixture::new()
        .file("bot/skills/x.md", "---\ndescription: One.\n---\nA.\n")
        .file("bot/skills/x/SKILL.md", "---\ndescription: Two.\n---\nB.\n")
        .load();
    only(&project, "name_clash").error();
}

#[test]
fn skill_md_as_a_directory_is_reported() {
    //! Guards: `skills/x/SKILL.md/` (a directory) is an expected-file error, not a crash.
    let (_fx, project) = Fixture::new().dir("bot/skills/x/SKILL.md").load();
    find(&project, "expected_file").error().file("bot/skills/x/SKILL.md");
}
