//! `bdk validate` and `bdk info` on broken projects: grouped human output, the JSON report,
//! and the documented exit codes (0 warnings only, 1 errors, 2 usage).

use std::fs;
use std::path::Path;

use super::support::run;
use crate::snapshot;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// A project named `broken` inside a fresh temporary folder (kept alive by the returned guard).
fn broken_project() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = &tmp.path().join("broken");
    write(root, "bot/instructions.md", "You review things.\n");
    write(
        root,
        "bot/tools/query.toml",
        "description = \"Query telemetry.\"\ncommand = [\"true\"]\ntime_args = [\"since\"]\n\n[input_schema]\ntype = \"object\"\nproperties = { until = { type = \"string\" } }\n",
    );
    write(root, "bot/tools/both.toml", "description = \"x\"\ncommand = [\"true\"]\nscript = \"echo\"\n");
    write(root, "bot/schedules/nightly.md", "---\ncron: \"0 25 * * *\"\n---\nSummarize.\n");
    write(root, "bot/notes.txt", "stray\n");
    let dir = root.display().to_string();
    (tmp, dir)
}

#[test]
fn errors_exit_1_and_are_grouped_by_file() {
    let (_tmp, dir) = broken_project();
    let (code, stdout, _) = run(&["validate", "--dir", &dir]);
    assert_eq!(code, 1);
    snapshot!("validate_broken_text", stdout);
}

#[test]
fn json_report_lists_codes_with_positions() {
    let (_tmp, dir) = broken_project();
    let (code, stdout, _) = run(&["validate", "--dir", &dir, "--json"]);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["ok"], false);
    let diags = report["projects"][0]["diagnostics"].as_array().expect("diagnostics");
    let codes: Vec<&str> = diags.iter().filter_map(|d| d["code"].as_str()).collect();
    for expected in ["time_args_unknown_property", "tool_body_conflict", "invalid_cron", "stray_file"] {
        assert!(codes.contains(&expected), "missing {expected} in {codes:?}");
    }
    for d in diags {
        assert!(d["hint"].as_str().is_some_and(|h| !h.is_empty()), "every diagnostic has a hint: {d}");
        assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let cron = diags.iter().find(|d| d["code"] == "invalid_cron").expect("cron");
    assert_eq!(cron["file"], "bot/schedules/nightly.md");
    assert_eq!(cron["line"], 2, "frontmatter keys are located in the file");
}

#[test]
fn warnings_only_exit_0() {
    let dir = tempfile::Builder::new().prefix("warned").tempdir().expect("tempdir");
    write(dir.path(), "bot/instructions.md", "Hi.\n");
    write(dir.path(), "bot/tools/old.ts", "export default {}\n");
    let (code, stdout, _) = run(&["validate", "--dir", &dir.path().display().to_string()]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("warning[typescript_definition]"), "{stdout}");
    assert!(stdout.contains("validation passed: 0 errors, 1 warning"), "{stdout}");
}

#[test]
fn a_folder_without_a_project_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stdout, _) = run(&["validate", "--dir", &dir.path().display().to_string()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("error[no_project]"), "{stdout}");
    let (code, _, stderr) = run(&["info", "--dir", &dir.path().join("missing").display().to_string(), "--json"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no_project"), "{stderr}");
}

#[test]
fn info_on_a_broken_project_still_describes_it_and_exits_1() {
    let (_tmp, dir) = broken_project();
    let (code, stdout, _) = run(&["info", "--dir", &dir, "--json"]);
    assert_eq!(code, 1);
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert!(info["diagnostics"].as_array().is_some_and(|d| !d.is_empty()));
}

#[test]
fn bad_usage_exits_2() {
    let (code, _, stderr) = run(&["validate", "--no-such-flag"]);
    assert_eq!(code, 2, "{stderr}");
}

/// The first-hour mistakes in one project: every problem of a file is reported (not only the
/// first), each at its key's line with its path, allowed values, the expected form and a
/// "did you mean"; a broken tool does not also make its eval claim the tool is missing.
#[test]
fn every_problem_of_a_file_is_reported_with_path_line_and_suggestion() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = &tmp.path().join("typos");
    write(root, "bot/instructions.md", "Be good.\n");
    write(root, "bot/agent.toml", "max_step = 3\n");
    write(root, "bot/tool/stray.toml", "description = \"in the wrong folder\"\n");
    write(
        root,
        "bot/tools/bad.toml",
        "effect = \"reed\"\ntimeout = \"soon\"\nunknown_key = 1\ncommand = \"python3 x.py\"\n\n[input_schema]\ntype = \"object\"\nproperties = { text = { type = \"strng\" } }\n",
    );
    write(root, "bot/tools/good.toml", "description = \"fine\"\neffect = \"read\"\ncommand = [\"true\"]\n");
    write(root, "evals/evals.toml", "max_concurrency = 1\n");
    write(
        root,
        "evals/x.eval.toml",
        "[[turns]]\nmessage = \"hi\"\n[expect]\ncalled_tool = [{ name = \"bad\" }, { name = \"god\" }]\n",
    );
    let dir = root.display().to_string();
    let (code, stdout, _) = run(&["validate", "--dir", &dir]);
    assert_eq!(code, 1);
    assert!(!stdout.contains("\x1b["), "no colour when stdout is not a terminal");
    assert!(!stdout.contains("names tool `bad`"), "no follow-on about the broken tool: {stdout}");
    snapshot!("validate_every_problem_text", stdout);
}
