//! `tools/<name>.toml`: bodies, schemas, predicates, `time_args`, and names that clash with
//! built-in tools, advertised MCP tools and each other.

use std::time::Duration;

use bdk_project::model::{Execution, Predicate, ToolBody};
use serde_json::json;

use super::fixture::Fixture;
use super::{assert_clean, assert_none, find, only};

const OK_HEAD: &str = "description = \"Does a thing.\"\n";

fn tool(body: &str) -> Fixture {
    Fixture::new().file("bot/tools/t.toml", format!("{OK_HEAD}{body}"))
}

#[test]
fn a_command_tool_loads_with_defaults() {
    //! Guards: the typed tool carries the file stem as name, the body and safe defaults.
    let (_fx, project) = tool("command = [\"python3\", \"lib/t.py\"]\n").file("bot/lib/t.py", "").load();
    assert_clean(&project);
    let t = project.tool("t").expect("tool t");
    assert_eq!(t.description, "Does a thing.");
    assert_eq!(t.body, ToolBody::Command(vec!["python3".into(), "lib/t.py".into()]));
    assert_eq!(t.execution, Execution::Server);
    assert_eq!(t.effect_write, Predicate::Always(true), "an undeclared effect counts as a write");
    assert_eq!(t.needs_approval, Predicate::Always(false));
    assert_eq!(t.input_schema, json!({"type": "object"}));
    assert_eq!(t.timeout, Duration::from_secs(60));
    assert_eq!(t.file.as_deref(), Some("bot/tools/t.toml"));
    assert!(t.cwd.ends_with("bot"));
}

#[test]
fn schemas_predicates_and_timeouts_are_read() {
    //! Guards: input_schema, effect/needs_approval predicates, time_args and humantime timeouts.
    let (_fx, project) = tool(
        "script = \"echo hi\"\nexecution = \"agent\"\neffect = \"read\"\ntimeout = \"2m\"\ntime_args = [\"since\"]\n\
         [input_schema]\ntype = \"object\"\nrequired = [\"since\"]\nproperties = { since = { type = \"string\" } }\n\
         [needs_approval]\nproperties = { since = { const = \"now\" } }\n",
    )
    .load();
    assert_clean(&project);
    let t = project.tool("t").expect("tool");
    assert_eq!(t.execution, Execution::Agent);
    assert_eq!(t.effect_write, Predicate::Always(false));
    assert_eq!(t.needs_approval, Predicate::When(json!({"properties": {"since": {"const": "now"}}})));
    assert_eq!(t.timeout, Duration::from_secs(120));
    assert_eq!(t.body, ToolBody::Script("echo hi".into()));
}

#[test]
fn missing_description_is_an_error() {
    //! Guards: a tool with no (or a blank) description is reported and not loaded.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", "command = [\"true\"]\n")
        .file("bot/tools/b.toml", "description = \"  \"\ncommand = [\"true\"]\n")
        .load();
    assert_eq!(super::all_with(&project, "missing_description").len(), 2);
    find(&project, "missing_description").error().file("bot/tools/a.toml");
    assert!(project.caps.tools.is_empty());
}

#[test]
fn body_missing_is_an_error() {
    //! Guards: a tool with neither `command` nor `script` (or an empty one) is tool_body_missing.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", OK_HEAD)
        .file("bot/tools/b.toml", format!("{OK_HEAD}command = []\n"))
        .file("bot/tools/c.toml", format!("{OK_HEAD}script = \"  \"\n"))
        .load();
    assert_eq!(super::all_with(&project, "tool_body_missing").len(), 3);
    find(&project, "tool_body_missing").error().file("bot/tools/a.toml");
    assert!(project.caps.tools.is_empty());
}

#[test]
fn both_command_and_script_conflict() {
    //! Guards: `command` and `script` together are refused, pointing at `script`.
    let (_fx, project) = tool("command = [\"true\"]\nscript = \"echo\"\n").load();
    only(&project, "tool_body_conflict").error().file("bot/tools/t.toml").line(3);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn agent_tool_with_command_is_refused() {
    //! Guards: agent-executed tools run as scripts in the workspace, never as host commands.
    let (_fx, project) = tool("execution = \"agent\"\ncommand = [\"rm\", \"-rf\"]\n").load();
    only(&project, "agent_tool_needs_script").error().file("bot/tools/t.toml").line(3);
}

#[test]
fn persistent_is_read_for_server_tools_only() {
    //! Guards: `persistent = true` marks a server tool; on an agent tool it is an invalid value.
    let (_fx, project) = tool("command = [\"true\"]\npersistent = true\n").load();
    assert_clean(&project);
    assert!(project.tool("t").expect("tool t").persistent);
    let (_fx, project) = tool("execution = \"agent\"\nscript = \"echo\"\npersistent = true\n").load();
    only(&project, "invalid_value").error().file("bot/tools/t.toml").line(4);
}

#[test]
fn invalid_input_schema_is_reported() {
    //! Guards: an input_schema the validation engine cannot compile is invalid_schema at the
    //! offending key's line (not the table header), naming its path and the allowed types.
    let (_fx, project) = tool("command = [\"true\"]\n[input_schema]\ntype = \"nope\"\n").load();
    let d = only(&project, "invalid_schema").error().file("bot/tools/t.toml").line(4);
    assert!(d.0.message.contains("`input_schema.type`: \"nope\" is not a JSON Schema type"), "{}", d.0.message);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn non_object_input_schema_is_reported() {
    //! Guards: tool inputs are JSON objects; a schema of another type, a bare value, or a
    //! boolean schema is refused.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", format!("{OK_HEAD}command = [\"true\"]\n[input_schema]\ntype = \"string\"\n"))
        .file("bot/tools/b.toml", format!("{OK_HEAD}command = [\"true\"]\ninput_schema = \"object\"\n"))
        .file("bot/tools/c.toml", format!("{OK_HEAD}command = [\"true\"]\ninput_schema = true\n"))
        .file("bot/tools/d.toml", format!("{OK_HEAD}command = [\"true\"]\ninput_schema = [1, 2]\n"))
        .load();
    let files: Vec<_> =
        super::all_with(&project, "invalid_schema").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/tools/a.toml", "bot/tools/b.toml", "bot/tools/c.toml", "bot/tools/d.toml"]);
    find(&project, "invalid_schema").error().line(3);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn invalid_predicate_schemas_are_reported() {
    //! Guards: needs_approval and effect predicates are compiled like any schema.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", format!("{OK_HEAD}command = [\"true\"]\n[needs_approval]\ntype = 12\n"))
        .file("bot/tools/b.toml", format!("{OK_HEAD}command = [\"true\"]\n[effect]\nminimum = \"x\"\n"))
        .load();
    let files: Vec<_> =
        super::all_with(&project, "invalid_schema").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/tools/a.toml", "bot/tools/b.toml"]);
    find(&project, "invalid_schema").error().line(4);
}

#[test]
fn bad_effect_and_approval_values_are_reported() {
    //! Guards: effect takes "read"/"write"/a schema, needs_approval a boolean/a schema.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", format!("{OK_HEAD}command = [\"true\"]\neffect = \"delete\"\n"))
        .file("bot/tools/b.toml", format!("{OK_HEAD}command = [\"true\"]\neffect = true\n"))
        .file("bot/tools/c.toml", format!("{OK_HEAD}command = [\"true\"]\nneeds_approval = \"yes\"\n"))
        .file("bot/tools/d.toml", format!("{OK_HEAD}command = [\"true\"]\nneeds_approval = 1\n"))
        .load();
    let invalid: Vec<_> =
        super::all_with(&project, "invalid_value").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(invalid, ["bot/tools/a.toml", "bot/tools/c.toml"]);
    find(&project, "invalid_value").error().line(3);
    let wrong: Vec<_> =
        super::all_with(&project, "wrong_type").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(wrong, ["bot/tools/b.toml", "bot/tools/d.toml"]);
    find(&project, "wrong_type").error().line(3);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn time_args_must_name_input_properties() {
    //! Guards: every time_args name must be a property of input_schema.
    let (_fx, project) = tool(
        "command = [\"true\"]\ntime_args = [\"since\", \"until\"]\n\
         [input_schema]\ntype = \"object\"\nproperties = { since = { type = \"string\" } }\n",
    )
    .load();
    only(&project, "time_args_unknown_property").error().file("bot/tools/t.toml").line(3);

    let (_fx, none) = tool("command = [\"true\"]\ntime_args = [\"since\"]\n").load();
    only(&none, "time_args_unknown_property").error();
}

#[test]
fn bad_timeouts_are_invalid_values() {
    //! Guards: a timeout that is not a duration, or zero, is invalid_value at its line.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", format!("{OK_HEAD}command = [\"true\"]\ntimeout = \"soon\"\n"))
        .file("bot/tools/b.toml", format!("{OK_HEAD}command = [\"true\"]\ntimeout = 0\n"))
        .load();
    assert_eq!(super::all_with(&project, "invalid_value").len(), 2);
    find(&project, "invalid_value").error().file("bot/tools/a.toml").line(3);
}

#[test]
fn invalid_tool_names_are_reported() {
    //! Guards: tool names follow the slug rule and the 64-character function-name limit.
    let long = format!("bot/tools/{}.toml", "x".repeat(65));
    let (_fx, project) = Fixture::new()
        .file("bot/tools/has space.toml", format!("{OK_HEAD}command = [\"true\"]\n"))
        .file(&long, format!("{OK_HEAD}command = [\"true\"]\n"))
        .load();
    assert_eq!(super::all_with(&project, "invalid_name").len(), 2);
    find(&project, "invalid_name").error();
    assert!(project.caps.tools.is_empty());
}

#[test]
fn tool_named_like_a_builtin_clashes() {
    //! Guards: an authored tool cannot take the name of an active built-in tool.
    let (_fx, project) = Fixture::new().file("bot/tools/read.toml", format!("{OK_HEAD}command = [\"true\"]\n")).load();
    only(&project, "name_clash").error().file("bot/tools/read.toml");
}

#[test]
fn builtin_outside_the_allowlist_does_not_clash() {
    //! Guards: a built-in left out of agent.toml's `tools` allowlist frees its name.
    let (_fx, project) = Fixture::new()
        .file("bot/agent.toml", "tools = [\"ls\", \"grep\"]\n")
        .file("bot/tools/read.toml", format!("{OK_HEAD}command = [\"true\"]\n"))
        .load();
    assert_clean(&project);
}

#[test]
fn unknown_builtin_in_allowlist_is_reported() {
    //! Guards: agent.toml's `tools` names only built-in harness tools.
    let (_fx, project) = Fixture::new().file("bot/agent.toml", "name = \"x\"\ntools = [\"ls\", \"browse\"]\n").load();
    only(&project, "unknown_builtin_tool").error().file("bot/agent.toml").line(2);
}

#[test]
fn tool_named_like_an_advertised_mcp_tool_clashes() {
    //! Guards: a tool and a name an MCP connection advertises cannot share one name.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/x.toml", format!("{OK_HEAD}command = [\"true\"]\n"))
        .file("bot/mcp-connections/gh.toml", "command = \"gh-mcp\"\nadvertise_tools = [\"x\", \"y\"]\n")
        .load();
    only(&project, "name_clash").error().file("bot/mcp-connections/gh.toml");
    assert_eq!(project.caps.tools.len(), 1);
}

#[test]
fn two_connections_advertising_one_name_clash() {
    //! Guards: advertised names are unique across connections too.
    let (_fx, project) = Fixture::new()
        .file("bot/mcp-connections/a.toml", "command = \"a\"\nadvertise_tools = [\"search\"]\n")
        .file("bot/mcp-connections/b.toml", "url = \"https://b.example/mcp\"\nadvertise_tools = [\"search\"]\n")
        .load();
    only(&project, "name_clash").error().file("bot/mcp-connections/b.toml");
}

#[test]
fn output_schema_and_dry_run_result_are_kept() {
    //! Guards: optional output_schema and dry_run_result reach the typed tool.
    let (_fx, project) =
        tool("command = [\"true\"]\ndry_run_result = { ok = true }\n[output_schema]\ntype = \"object\"\n").load();
    assert_clean(&project);
    let t = project.tool("t").expect("tool");
    assert_eq!(t.output_schema, Some(json!({"type": "object"})));
    assert_eq!(t.dry_run_result, Some(json!({"ok": true})));
    assert_none(&project, "invalid_schema");
}
