//! `bdk init`: every template scaffolds a project that validates cleanly; existing work is
//! never overwritten.

use super::support::run;

#[test]
fn every_template_validates() {
    let (code, list, _) = run(&["init", "--list"]);
    assert_eq!(code, 0);
    let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"default") && names.contains(&"pr-reviewer"), "{list}");
    for name in names {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("agent-one");
        let dir_s = dir.display().to_string();
        let (code, stdout, stderr) = run(&["init", &dir_s, "--template", name]);
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
        assert!(dir.join("bot/instructions.md").is_file());
        assert!(dir.join("evals/evals.toml").is_file(), "{name} ships evals");
        let (code, stdout, _) = run(&["validate", "--dir", &dir_s, "--json"]);
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
        // Only the parts this build does not run yet (`not_run_yet`) may warn.
        let not_run_yet = stdout.matches("\"not_run_yet\"").count();
        assert_eq!(
            (code, &report["errors"], &report["warnings"]),
            (0, &0.into(), &not_run_yet.into()),
            "{name}: {stdout}"
        );
    }
}

#[test]
fn name_is_written_to_agent_toml() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("reviewer");
    let (code, _, stderr) =
        run(&["init", &dir.display().to_string(), "--template", "pr-reviewer", "--name", "PR \"Bot\""]);
    assert_eq!(code, 0, "{stderr}");
    let (_, stdout, _) = run(&["info", "--dir", &dir.display().to_string(), "--json"]);
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(info["name"], "PR \"Bot\"");
    assert_eq!(info["slug"], "reviewer");
}

#[test]
fn a_non_empty_folder_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("keep.txt"), "mine").expect("write");
    let (code, _, stderr) = run(&["init", &tmp.path().display().to_string()]);
    assert_eq!(code, 3);
    assert!(stderr.contains("not empty"), "{stderr}");
    assert_eq!(std::fs::read_to_string(tmp.path().join("keep.txt")).expect("read"), "mine");
}

#[test]
fn an_unknown_template_is_refused_with_the_list() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(&["init", &tmp.path().join("x").display().to_string(), "--template", "nope"]);
    assert_eq!(code, 3);
    assert!(stderr.contains("pr-reviewer"), "{stderr}");
}
