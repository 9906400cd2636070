//! The example projects are part of the suite: each validates with no diagnostics but the
//! `not_run_yet` warnings for parts this build does not run yet (ops-bot's hook and artifacts),
//! and its `info` (text and JSON) is snapshotted so any change to what it exposes is reviewed.

use super::support::{example, run};
use crate::snapshot;

const EXAMPLES: &[&str] = &["hello", "pr-reviewer", "ops-bot", "refunds"];

#[test]
fn every_example_validates_without_diagnostics() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["validate", "--dir", &example(name), "--json"]);
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("validate --json prints JSON");
        assert_eq!(code, 0, "{name}: {stdout}{stderr}");
        assert_eq!(report["errors"], 0, "{name}: {stdout}");
        let not_run_yet = stdout.matches("\"not_run_yet\"").count();
        assert_eq!(report["warnings"], not_run_yet, "{name}: only not_run_yet warnings: {stdout}");
    }
}

#[test]
fn example_info_json_snapshots() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["info", "--dir", &example(name), "--json"]);
        assert_eq!(code, 0, "{name}: {stderr}");
        let info: serde_json::Value = serde_json::from_str(&stdout).expect("info --json prints JSON");
        assert_eq!(info["slug"], *name, "a single project prints the bare manifest");
        snapshot!(format!("info_json_{name}"), stdout);
    }
}

#[test]
fn example_info_text_snapshots() {
    for name in EXAMPLES {
        let (code, stdout, stderr) = run(&["info", "--dir", &example(name)]);
        assert_eq!(code, 0, "{name}: {stderr}");
        snapshot!(format!("info_text_{name}"), stdout);
    }
}

#[test]
fn several_projects_are_listed_as_agents() {
    let (code, stdout, stderr) = run(&["info", "--dir", &example("hello"), "--dir", &example("ops-bot"), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let slugs: Vec<&str> =
        info["agents"].as_array().expect("agents").iter().filter_map(|a| a["slug"].as_str()).collect();
    assert_eq!(slugs, ["hello", "ops-bot"]);
}

#[test]
fn the_examples_folder_is_a_serve_root() {
    let root = super::support::repo_root().join("examples").display().to_string();
    let (code, stdout, stderr) = run(&["info", "--dir", &root, "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let slugs: Vec<&str> =
        info["agents"].as_array().expect("agents").iter().filter_map(|a| a["slug"].as_str()).collect();
    assert_eq!(slugs, ["hello", "ops-bot", "pr-reviewer", "refunds"], "children are discovered in name order");
}
