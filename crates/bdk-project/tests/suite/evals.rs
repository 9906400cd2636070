//! `evals/`: the required `evals/evals.toml`, case ids from paths (`index.eval.toml` collapses,
//! `[[cases]]` become `file/case`), shapes, regexes and duplicate ids.

use std::time::Duration;

use super::fixture::Fixture;
use super::{assert_clean, assert_none, find, only};

const CONFIG: &str = "max_concurrency = 2\ntimeout = \"90s\"\n";
const SIMPLE: &str = "message = \"hi\"\n[expect]\nsucceeded = true\nreply_includes = [\"hello\"]\n";

fn ids(project: &bdk_project::Project) -> Vec<String> {
    project.evals.as_ref().map(|e| e.cases.iter().map(|c| c.id.clone()).collect()).unwrap_or_default()
}

#[test]
fn evals_without_config_are_an_error() {
    //! Guards: once any eval exists, evals/evals.toml is required.
    let (_fx, project) = Fixture::new().file("evals/smoke.eval.toml", SIMPLE).load();
    only(&project, "evals_config_missing").error().file("evals");
}

#[test]
fn a_broken_eval_without_config_still_needs_the_config() {
    //! Guards: the config is required when eval files exist, even if none of them parses.
    let (_fx, project) = Fixture::new().file("evals/smoke.eval.toml", "message = \n").load();
    find(&project, "toml_syntax").file("evals/smoke.eval.toml");
    only(&project, "evals_config_missing").error();
}

#[test]
fn config_and_cases_load() {
    //! Guards: evals.toml settings and each case's turns and expectations are read.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file("evals/smoke.eval.toml", SIMPLE)
        .file("evals/multi.eval.toml", "[[turns]]\nmessage = \"a\"\n[[turns]]\nmessage = \"b\"\n")
        .load();
    assert_clean(&project);
    let evals = project.evals.as_ref().expect("evals");
    assert_eq!(evals.max_concurrency, 2);
    assert_eq!(evals.timeout, Duration::from_secs(90));
    assert_eq!(ids(&project), ["multi", "smoke"]);
    let smoke = &evals.cases[1];
    assert_eq!(smoke.file, "evals/smoke.eval.toml");
    assert_eq!(smoke.expect.count(), 2);
    assert_eq!(evals.cases[0].turns.len(), 2);
}

#[test]
fn case_ids_follow_paths_and_index_collapses() {
    //! Guards: ids are paths under evals/ without `.eval.toml`; `dir/index.eval.toml` is `dir`.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file("evals/billing/index.eval.toml", SIMPLE)
        .file("evals/billing/refunds.eval.toml", SIMPLE)
        .file("evals/deep/er/index.eval.toml", SIMPLE)
        .file("evals/notes.md", "not an eval")
        .load();
    assert_clean(&project);
    assert_eq!(ids(&project), ["billing", "billing/refunds", "deep/er"]);
}

#[test]
fn cases_tables_become_file_slash_case() {
    //! Guards: `[[cases]]` ids are `<file id>/<case id>`, tags merged from the file.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file(
            "evals/routing.eval.toml",
            "tags = [\"routing\"]\n[[cases]]\nid = \"one\"\nmessage = \"a\"\ntags = [\"fast\"]\n\
             [[cases]]\nid = \"two\"\nmessage = \"b\"\n[cases.expect]\nreply_includes = [\"x\"]\n",
        )
        .file("evals/group/index.eval.toml", "[[cases]]\nid = \"c\"\nmessage = \"m\"\n")
        .load();
    assert_clean(&project);
    assert_eq!(ids(&project), ["group/c", "routing/one", "routing/two"]);
    let one = &project.evals.as_ref().expect("evals").cases[1];
    assert_eq!(one.tags, ["routing", "fast"]);
}

#[test]
fn eval_shape_errors_are_reported() {
    //! Guards: an eval is a conversation or cases, not both and not neither.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file("evals/both.eval.toml", "message = \"a\"\n[[cases]]\nid = \"x\"\nmessage = \"b\"\n")
        .file("evals/neither.eval.toml", "description = \"nothing\"\n")
        .file("evals/turns.eval.toml", "message = \"a\"\n[[turns]]\nmessage = \"b\"\n")
        .file("evals/empty.eval.toml", "message = \"  \"\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "eval_shape").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(
        files,
        ["evals/both.eval.toml", "evals/empty.eval.toml", "evals/neither.eval.toml", "evals/turns.eval.toml"]
    );
    let check = find(&project, "eval_shape").error();
    let hint = check.0.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("`message` or [[turns]]") && hint.contains("[[cases]]"), "{hint}");
    assert!(ids(&project).is_empty());
}

#[test]
fn invalid_regex_is_reported() {
    //! Guards: reply_matches patterns compile, or are reported at their line.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file("evals/r.eval.toml", "message = \"a\"\n[expect]\nreply_matches = [\"ok\", \"(unclosed\"]\n")
        .load();
    let check = only(&project, "invalid_regex").error().file("evals/r.eval.toml").line(3);
    assert_eq!(check.0.message, "reply_matches `(unclosed`: unclosed group");
}

#[test]
fn duplicate_case_ids_are_reported() {
    //! Guards: case ids are unique within a file, and across files that collapse to one id.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", CONFIG)
        .file(
            "evals/dup.eval.toml",
            "[[cases]]\nid = \"x\"\nmessage = \"a\"\n[[cases]]\nid = \"x\"\nmessage = \"b\"\n\
             [[cases]]\nid = \"a/b\"\nmessage = \"c\"\n",
        )
        .file("evals/same.eval.toml", SIMPLE)
        .file("evals/same/index.eval.toml", SIMPLE)
        .load();
    let found: Vec<_> = super::all_with(&project, "duplicate_case")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.line))
        .collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0], ("evals/dup.eval.toml".to_owned(), Some(5)), "the repeat is located");
    assert_eq!(found[1], ("evals/dup.eval.toml".to_owned(), Some(8)), "a multi-segment id is located");
    assert_eq!(found[2].0, "evals/same.eval.toml", "walked after same/index.eval.toml");
    find(&project, "duplicate_case").error();
    assert_eq!(ids(&project), ["dup/x", "same"]);
}

#[test]
fn eval_expectations_name_known_tools() {
    //! Guards: called_tool naming a tool the agent does not have is a warning.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/lookup.toml", "description = \"L.\"\ncommand = [\"true\"]\n")
        .file("evals/evals.toml", CONFIG)
        .file(
            "evals/t.eval.toml",
            "message = \"a\"\n[expect]\ncalled_tool = [\"lookup\", { name = \"read\", input = { path = \"x\" } }, \"nope\"]\n",
        )
        .load();
    only(&project, "unknown_tool_reference").warning().file("evals/t.eval.toml");
    let case = &project.evals.as_ref().expect("evals").cases[0];
    assert_eq!(case.expect.called_tool[1].input, Some(serde_json::json!({"path": "x"})));
}

#[test]
fn misspelt_called_tool_keys_are_reported() {
    //! Guards: a typo inside `{ name, input }` is an unknown key, not a silently dropped input.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/lookup.toml", "description = \"L.\"\ncommand = [\"true\"]\n")
        .file("evals/evals.toml", CONFIG)
        .file(
            "evals/t.eval.toml",
            "message = \"a\"\n[expect]\ncalled_tool = [{ name = \"lookup\", inptu = { q = 1 } }, 5]\n",
        )
        .load();
    only(&project, "unknown_key").error().file("evals/t.eval.toml").line(3);
    only(&project, "wrong_type").error().file("evals/t.eval.toml").line(3);
}

#[test]
fn typescript_evals_are_reported() {
    //! Guards: `.eval.ts` files from the Node original are reported as not loaded.
    let (_fx, project) = Fixture::new().file("evals/evals.toml", CONFIG).file("evals/a.eval.ts", "export {}").load();
    only(&project, "typescript_definition").warning().file("evals/a.eval.ts");
    assert_none(&project, "evals_config_missing");
}

#[test]
fn bad_config_values_are_reported() {
    //! Guards: evals.toml values are checked like any definition.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", "max_concurrency = 0\nparallel = true\n")
        .file("evals/a.eval.toml", SIMPLE)
        .load();
    only(&project, "unknown_key").error().file("evals/evals.toml").line(2);
    assert_none(&project, "evals_config_missing");
}

#[test]
fn the_run_time_expectations_and_judge_model_load() {
    //! Guards: reply_schema, max_tool_calls, max_cost_usd, max_duration, judge and judge_model
    //! are read into the typed definition and counted.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", "max_concurrency = 1\njudge_model = { id = \"grader\", provider = \"openai\" }\n")
        .file(
            "evals/j.eval.toml",
            "message = \"a\"\n[expect]\nreply_schema = { type = \"object\", required = [\"x\"] }\nmax_tool_calls = 2\n\
             max_cost_usd = 0.5\nmax_duration = \"90s\"\njudge = \"Polite.\"\n",
        )
        .load();
    assert_clean(&project);
    let evals = project.evals.as_ref().expect("evals");
    assert_eq!(evals.judge_model.as_ref().map(|m| m.id.as_str()), Some("grader"));
    let expect = &evals.cases[0].expect;
    assert_eq!(expect.reply_schema, Some(serde_json::json!({"type": "object", "required": ["x"]})));
    assert_eq!(expect.max_tool_calls, Some(2));
    assert_eq!(expect.max_cost_usd, Some(0.5));
    assert_eq!(expect.max_duration, Some(Duration::from_secs(90)));
    assert_eq!(expect.judge.as_deref(), Some("Polite."));
    assert_eq!(expect.count(), 5);
}

#[test]
fn bad_run_time_expectations_are_reported() {
    //! Guards: a reply_schema that is not a JSON Schema, a negative cost, a zero duration, an
    //! empty rubric and a bad judge_model are each reported at their line.
    let (_fx, project) = Fixture::new()
        .file("evals/evals.toml", "max_concurrency = 1\njudge_model = 5\n")
        .file(
            "evals/b.eval.toml",
            "message = \"a\"\n[expect]\nreply_schema = { type = \"nope\" }\nmax_cost_usd = -1.0\n\
             max_duration = \"0s\"\njudge = \"  \"\n",
        )
        .load();
    only(&project, "invalid_schema").error().file("evals/b.eval.toml").line(3);
    let mut values: Vec<_> = super::all_with(&project, "invalid_value")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.line))
        .collect();
    values.sort();
    let file = || "evals/b.eval.toml".to_owned();
    assert_eq!(values, [(file(), Some(4)), (file(), Some(5)), (file(), Some(6))]);
    only(&project, "wrong_type").error().file("evals/evals.toml").line(2);
    let expect = &project.evals.as_ref().expect("evals").cases[0].expect;
    assert_eq!((expect.reply_schema.is_none(), expect.max_cost_usd, expect.judge.is_none()), (true, None, true));
}
