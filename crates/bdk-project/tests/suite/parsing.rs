//! How malformed files are reported: TOML syntax with line and column, frontmatter YAML, unknown
//! keys, wrong types and missing required fields, each under its own code.

use super::fixture::Fixture;
use super::{find, only};

#[test]
fn unparsable_toml_has_line_and_column() {
    //! Guards: a TOML syntax error points at the offending line and column.
    let (_fx, project) =
        Fixture::new().file("bot/tools/x.toml", "description = \"X.\"\ncommand = [\"true\"]\ntimeout = = 3\n").load();
    only(&project, "toml_syntax").error().file("bot/tools/x.toml").at(3, 11);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn unterminated_string_is_a_syntax_error() {
    //! Guards: an unterminated string is reported on its own line.
    let (_fx, project) = Fixture::new().file("bot/agent.toml", "name = \"ok\"\ndescription = \"open\n").load();
    only(&project, "toml_syntax").error().file("bot/agent.toml").line(2);
}

#[test]
fn unparsable_frontmatter_yaml_has_a_line() {
    //! Guards: a YAML error in frontmatter is reported at its line in the Markdown file.
    let (_fx, project) =
        Fixture::new().file("bot/skills/triage.md", "---\nname: ok\ndescription: a: b\n---\nBody.\n").load();
    let check = only(&project, "frontmatter_syntax").error().file("bot/skills/triage.md");
    let line = check.0.line.expect("a line");
    assert!((3..=4).contains(&line), "the error sits at or just after line 3: {line}");
    assert_eq!(check.0.message, "frontmatter: mapping values are not allowed in this context");
    assert!(project.caps.skills.is_empty());
}

#[test]
fn wrong_typed_frontmatter_values_are_wrong_type() {
    //! Guards: a frontmatter value of the wrong type is wrong_type (serde_norway puts the key
    //! before its words), and the message drops the YAML's own line and column.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/nightly.md", "---\ncron: [1]\n---\nGo.\n")
        .file("bot/skills/s.md", "---\ndescription: ok\nname: [a, b]\n---\nBody.\n")
        .load();
    let cron = super::all_with(&project, "wrong_type")
        .into_iter()
        .find(|d| d.file.as_deref() == Some("bot/schedules/nightly.md"))
        .expect("cron wrong_type");
    assert_eq!(cron.line, Some(2));
    assert_eq!(cron.message, "frontmatter: cron: invalid type: sequence, expected a string");
    let skill = super::all_with(&project, "wrong_type")
        .into_iter()
        .find(|d| d.file.as_deref() == Some("bot/skills/s.md"))
        .expect("skill wrong_type");
    assert_eq!(skill.line, Some(3));
    assert!(!skill.message.contains("line"), "{}", skill.message);
    super::assert_none(&project, "frontmatter_syntax");
}

#[test]
fn frontmatter_lines_count_blank_lines_after_the_fence() {
    //! Guards: blank lines between `---` and the YAML do not shift reported lines.
    let (_fx, project) =
        Fixture::new().file("bot/schedules/nightly.md", "---\n\n\ncron: \"0 9 * * *\"\nbogus: 1\n---\nGo.\n").load();
    only(&project, "unknown_key").error().file("bot/schedules/nightly.md").line(5);
}

#[test]
fn unclosed_frontmatter_is_reported() {
    //! Guards: frontmatter opened with `---` and never closed is an error at line 1.
    let (_fx, project) = Fixture::new().file("bot/skills/x.md", "---\ndescription: x\nBody.\n").load();
    only(&project, "frontmatter_syntax").error().file("bot/skills/x.md").line(1);
}

#[test]
fn unknown_keys_are_errors_at_the_key() {
    //! Guards: a misspelt key is unknown_key at its line, in TOML and in frontmatter.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/x.toml", "description = \"X.\"\ncommand = [\"true\"]\ndescripton = \"typo\"\n")
        .file("bot/schedules/s.md", "---\ncron: \"0 9 * * *\"\nprompt: x\n---\nGo.\n")
        .load();
    find(&project, "unknown_key").error().file("bot/schedules/s.md").line(3);
    let tool = super::all_with(&project, "unknown_key")
        .into_iter()
        .find(|d| d.file.as_deref() == Some("bot/tools/x.toml"))
        .expect("tool unknown_key");
    assert_eq!(tool.line, Some(3));
}

#[test]
fn wrong_types_are_errors() {
    //! Guards: a value of the wrong type is wrong_type, including keys with several accepted shapes.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a.toml", "description = 5\ncommand = [\"true\"]\n")
        .file("bot/tools/b.toml", "description = \"B.\"\ncommand = [\"true\"]\ntimeout = true\n")
        .file("bot/mcp-connections/c.toml", "command = \"srv\"\nadvertise_tools = 3\n")
        .file("bot/tools/d.toml", "description = \"D.\"\ncommand = \"true\"\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "wrong_type").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/mcp-connections/c.toml", "bot/tools/a.toml", "bot/tools/b.toml", "bot/tools/d.toml"]);
    find(&project, "wrong_type").error();
    super::assert_none(&project, "toml_syntax");
}

#[test]
fn missing_required_fields_are_errors() {
    //! Guards: a required key left out is missing_field.
    let (_fx, project) = Fixture::new()
        .file("bot/hooks/audit.toml", "command = [\"cat\"]\n")
        .file("bot/reminders/ping.toml", "description = \"Ping.\"\n")
        .file("bot/schedules/s.toml", "prompt = \"Go.\"\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "missing_field").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/hooks/audit.toml", "bot/reminders/ping.toml", "bot/schedules/s.toml"]);
    find(&project, "missing_field").error();
}

#[test]
fn invalid_enum_values_are_invalid_value() {
    //! Guards: a value outside a key's allowed set is invalid_value.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/x.toml", "description = \"X.\"\nscript = \"echo\"\nexecution = \"browser\"\n")
        .load();
    only(&project, "invalid_value").error().file("bot/tools/x.toml").line(3);
}
