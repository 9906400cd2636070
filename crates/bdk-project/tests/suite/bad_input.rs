//! Hostile and broken input: discovery never panics, never hangs and never overflows the stack;
//! each problem becomes a diagnostic.

use std::sync::mpsc;
use std::time::Duration;

use bdk_project::Project;

use super::fixture::{Built, Fixture};
use super::{assert_clean, assert_none, find, only};

const TOOL: &str = "description = \"T.\"\ncommand = [\"true\"]\n";

/// Loads on another thread and fails (instead of hanging the suite) if it takes too long.
fn load_within(fixture: Fixture, limit: Duration) -> (Built, Project) {
    let built = fixture.build();
    let dir = built.dir.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bdk_project::load_project(&dir, false));
    });
    let project = rx.recv_timeout(limit).expect("discovery finished in time (a FIFO must never be opened)");
    (built, project)
}

#[test]
fn non_utf8_file_reports_the_first_bad_byte() {
    //! Guards: invalid UTF-8 is not_utf8 at the line and column of the first bad byte.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/x.toml", b"description = \"ok\"\ncommand = [\"\xff\xfe\"]\n")
        .file("bot/skills/s.md", b"---\ndescription: fine\n---\n\xc3\x28\n")
        .load();
    find(&project, "not_utf8").error().file("bot/skills/s.md").at(4, 1);
    let tool = super::all_with(&project, "not_utf8")
        .into_iter()
        .find(|d| d.file.as_deref() == Some("bot/tools/x.toml"))
        .expect("tool not_utf8");
    assert_eq!((tool.line, tool.column), (Some(2), Some(13)));
    assert!(project.caps.tools.is_empty() && project.caps.skills.is_empty());
}

#[test]
fn non_utf8_instructions_are_reported_once() {
    //! Guards: unreadable instructions are reported as such, not also as missing.
    let (_fx, project) = Fixture::bare().file("bot/instructions.md", b"Hello \xff world\n").load();
    only(&project, "not_utf8").error().file("bot/instructions.md").at(1, 7);
    assert_none(&project, "missing_instructions");
}

#[test]
fn non_utf8_file_name_is_reported() {
    //! Guards: a file name that is not UTF-8 is reported rather than mangled or skipped silently.
    use std::os::unix::ffi::OsStrExt;
    let built = Fixture::new().dir("bot/tools").build();
    let name = std::ffi::OsStr::from_bytes(b"bad\xff.toml");
    std::fs::write(built.path("bot/tools").join(name), TOOL).expect("write");
    let project = built.load();
    only(&project, "invalid_name").error();
}

#[test]
fn directory_where_a_file_belongs() {
    //! Guards: `tools/x.toml/` (a directory) is an expected-file error, wherever it sits.
    let (_fx, project) = Fixture::bare()
        .dir("bot/instructions.md")
        .dir("bot/tools/x.toml")
        .dir("bot/schedules/s.md")
        .dir("bot/subagents/s/agent.toml")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "expected_file").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/instructions.md", "bot/schedules/s.md", "bot/subagents/s/agent.toml", "bot/tools/x.toml"]);
    find(&project, "expected_file").error();
    assert_none(&project, "missing_instructions");
}

#[test]
fn dangling_symlink_is_an_io_error() {
    //! Guards: a symlink to nothing is reported where it sits.
    let (_fx, project) = Fixture::new()
        .symlink("bot/tools/x.toml", "gone.toml")
        .symlink("bot/sandbox/workspace/data.csv", "/nonexistent/bdk-test/data.csv")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "io_error").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/sandbox/workspace/data.csv", "bot/tools/x.toml"]);
    find(&project, "io_error").error();
}

#[test]
fn symlink_loop_in_sandbox_workspace() {
    //! Guards: a directory symlink cycle in the workspace seeds is reported, not walked forever.
    let (_fx, project) = load_within(
        Fixture::new()
            .file("bot/sandbox/workspace/real/file.txt", "x")
            .symlink("bot/sandbox/workspace/real/again", "..")
            .symlink("bot/sandbox/workspace/self", "self"),
        Duration::from_secs(30),
    );
    let files: Vec<_> =
        super::all_with(&project, "io_error").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/sandbox/workspace/real/again", "bot/sandbox/workspace/self"]);
    let seeds: Vec<&str> = project.caps.seeds.iter().map(|s| s.rel.as_str()).collect();
    assert_eq!(seeds, ["real/file.txt"]);
}

#[test]
fn symlink_loop_in_a_skill_folder() {
    //! Guards: a cycle among a skill's sibling files is reported and the skill still loads.
    let (_fx, project) = load_within(
        Fixture::new()
            .file("bot/skills/s/SKILL.md", "---\ndescription: Use it.\n---\nBody.\n")
            .file("bot/skills/s/refs/a.md", "x")
            .symlink("bot/skills/s/refs/up", "../..")
            .symlink("bot/skills/s/self", "self"),
        Duration::from_secs(30),
    );
    let files: Vec<_> =
        super::all_with(&project, "io_error").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/skills/s/refs/up", "bot/skills/s/self"]);
    assert_eq!(project.caps.skills[0].files, ["refs/a.md"]);
}

#[test]
fn fifo_is_never_opened() {
    //! Guards: named pipes where files belong are reported without opening them (no hang).
    let (_fx, project) = load_within(
        Fixture::bare()
            .fifo("bot/instructions.md")
            .fifo("bot/tools/x.toml")
            .fifo("bot/tools/pipe")
            .file("bot/skills/s/SKILL.md", "---\ndescription: Use it.\n---\nBody.\n")
            .fifo("bot/skills/s/pipe")
            .fifo("bot/sandbox/workspace/pipe")
            .fifo("evals/a.eval.toml")
            .file("evals/evals.toml", ""),
        Duration::from_secs(30),
    );
    let files: Vec<_> =
        super::all_with(&project, "expected_file").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    for expected in [
        "bot/instructions.md",
        "bot/sandbox/workspace/pipe",
        "bot/skills/s/pipe",
        "bot/tools/x.toml",
        "evals/a.eval.toml",
    ] {
        assert!(files.iter().any(|f| f == expected), "{expected} not reported: {files:?}");
    }
    only(&project, "stray_file").warning().file("bot/tools/pipe");
    assert!(project.caps.seeds.is_empty(), "a FIFO is not a seed file");
    assert!(project.caps.skills[0].files.is_empty(), "a FIFO is not a skill file");
}

#[test]
fn huge_instructions_are_refused_unread() {
    //! Guards: a 10 MB instructions.md is file_too_large, not read into memory.
    let (_fx, project) = Fixture::bare().file("bot/instructions.md", "x".repeat(10 * 1024 * 1024)).load();
    only(&project, "file_too_large").error().file("bot/instructions.md");
    assert_none(&project, "missing_instructions");
    assert!(project.instructions.text.is_empty());
}

#[test]
fn large_instructions_warn() {
    //! Guards: 200 KB of instructions loads, with a warning about its per-call cost.
    let text = "Do the thing carefully.\n".repeat(200 * 1024 / 24);
    let (_fx, project) = Fixture::bare().file("bot/instructions.md", &text).load();
    only(&project, "large_instructions").warning().file("bot/instructions.md");
    assert!(!project.has_errors());
}

#[test]
fn huge_definition_file_is_refused() {
    //! Guards: TOML definitions have a size cap too.
    let body = format!("{TOOL}# {}\n", "x".repeat(2 * 1024 * 1024));
    let (_fx, project) = Fixture::new().file("bot/tools/x.toml", body).load();
    only(&project, "file_too_large").error().file("bot/tools/x.toml");
}

fn nested_properties(levels: usize) -> String {
    let mut schema = String::from("{ type = \"string\" }");
    for _ in 0..levels {
        schema = format!("{{ type = \"object\", properties = {{ a = {schema} }} }}");
    }
    schema
}

#[test]
fn moderately_nested_schema_is_fine() {
    //! Guards: realistic nesting (10 levels of properties) compiles.
    let (_fx, project) =
        Fixture::new().file("bot/tools/x.toml", format!("{TOOL}input_schema = {}\n", nested_properties(10))).load();
    assert_clean(&project);
}

#[test]
fn deeply_nested_schema_is_refused() {
    //! Guards: 200 levels of `properties.a` is schema_too_deep (or a TOML limit), never a crash.
    let (_fx, project) =
        Fixture::new().file("bot/tools/x.toml", format!("{TOOL}input_schema = {}\n", nested_properties(200))).load();
    let codes = super::codes(&project);
    assert!(
        codes == ["schema_too_deep"] || codes == ["toml_syntax"],
        "expected schema_too_deep or toml_syntax, got {codes:?}"
    );
    assert!(project.caps.tools.is_empty());
}

#[test]
fn just_over_the_depth_limit_is_schema_too_deep() {
    //! Guards: the depth limit itself (not the TOML parser's) refuses a schema a little too deep.
    let (_fx, project) =
        Fixture::new().file("bot/tools/x.toml", format!("{TOOL}input_schema = {}\n", nested_properties(32))).load();
    only(&project, "schema_too_deep").error().file("bot/tools/x.toml").line(3);
}

#[test]
fn hostile_toml_nesting_does_not_overflow_the_stack() {
    //! Guards: 5000 nested arrays or inline tables are an error, not a stack overflow.
    let arrays = format!("{TOOL}dry_run_result = {}1{}\n", "[".repeat(5000), "]".repeat(5000));
    let mut tables = String::from("1");
    for _ in 0..5000 {
        tables = format!("{{ a = {tables} }}");
    }
    let (_fx, project) = Fixture::new()
        .file("bot/tools/arrays.toml", arrays)
        .file("bot/tools/tables.toml", format!("{TOOL}[input_schema]\nproperties = {tables}\n"))
        .file("bot/tools/dotted.toml", format!("{TOOL}[needs_approval]\n{} = 1\n", vec!["a"; 5000].join(".")))
        .file("bot/tools/headers.toml", format!("{TOOL}[effect.{}]\n", vec!["a"; 5000].join(".")))
        .load();
    assert!(project.has_errors());
    assert!(project.caps.tools.is_empty(), "none of the hostile tools loads");
    for file in ["arrays", "tables", "dotted", "headers"] {
        let path = format!("bot/tools/{file}.toml");
        assert!(
            project.diagnostics.iter().any(|d| d.file.as_deref() == Some(path.as_str()) && d.is_error()),
            "{path} is reported: {:#?}",
            project.diagnostics
        );
    }
}

#[test]
fn empty_files_get_diagnostics_not_panics() {
    //! Guards: zero-byte files of every kind are reported by what they lack.
    let (_fx, project) = Fixture::bare()
        .file("bot/instructions.md", "")
        .file("bot/agent.toml", "")
        .file("bot/tools/t.toml", "")
        .file("bot/skills/s.md", "")
        .file("bot/skills/d/SKILL.md", "")
        .file("bot/hooks/h.toml", "")
        .file("bot/schedules/a.md", "")
        .file("bot/schedules/b.toml", "")
        .file("bot/mcp-connections/c.toml", "")
        .file("bot/channels/ch.toml", "")
        .file("bot/subagents/sub/agent.toml", "")
        .file("bot/artifacts.toml", "")
        .file("bot/ab.toml", "")
        .file("evals/evals.toml", "")
        .file("evals/e.eval.toml", "")
        .load();
    only(&project, "empty_instructions").file("bot/instructions.md");
    let expect = [
        ("missing_description", "bot/tools/t.toml"),
        ("tool_body_missing", "bot/tools/t.toml"),
        ("missing_description", "bot/skills/s.md"),
        ("missing_description", "bot/skills/d/SKILL.md"),
        ("missing_field", "bot/hooks/h.toml"),
        ("missing_field", "bot/schedules/a.md"),
        ("missing_field", "bot/schedules/b.toml"),
        ("connection_transport", "bot/mcp-connections/c.toml"),
        ("missing_field", "bot/channels/ch.toml"),
        ("missing_description", "bot/subagents/sub/agent.toml"),
        ("ab_arms", "bot/ab.toml"),
        ("eval_shape", "evals/e.eval.toml"),
    ];
    for (code, file) in expect {
        assert!(
            super::all_with(&project, code).iter().any(|d| d.file.as_deref() == Some(file)),
            "no [{code}] for {file}: {:#?}",
            project.diagnostics
        );
    }
}

#[test]
fn bom_only_files_count_as_empty() {
    //! Guards: a UTF-8 byte-order mark alone is empty content, and a BOM before TOML is harmless.
    let (_fx, project) = Fixture::bare()
        .file("bot/instructions.md", "\u{feff}")
        .file("bot/agent.toml", "\u{feff}")
        .file("bot/tools/t.toml", format!("\u{feff}{TOOL}"))
        .file("bot/skills/s.md", "\u{feff}---\ndescription: Use it.\n---\nBody.\n")
        .load();
    only(&project, "empty_instructions").error().file("bot/instructions.md");
    assert_eq!(project.diagnostics.len(), 1, "{:#?}", project.diagnostics);
    assert_eq!(project.caps.tools.len(), 1);
    assert_eq!(project.caps.skills[0].description, "Use it.");
}

#[test]
fn bom_does_not_shift_columns() {
    //! Guards: positions after a BOM match what an editor shows.
    let (_fx, project) = Fixture::new().file("bot/tools/t.toml", "\u{feff}description = = 1\n").load();
    only(&project, "toml_syntax").at(1, 15);
}

#[test]
fn a_clean_project_stays_clean_with_hidden_files() {
    //! Guards: dotfiles (editor swap files, .DS_Store) are skipped, not reported.
    let (_fx, project) =
        Fixture::new().file("bot/.DS_Store", b"\x00\x01").file("bot/tools/.x.toml.swp", b"\xff").load();
    assert_clean(&project);
}

#[test]
fn read_error_messages_do_not_repeat_the_path() {
    //! Guards: the path is the diagnostic's `file`; read errors say only what is wrong with it.
    let (_fx, project) = load_within(
        Fixture::new()
            .dir("bot/tools/dir.toml")
            .fifo("bot/tools/pipe.toml")
            .file("bot/tools/big.toml", format!("{TOOL}# {}\n", "x".repeat(2 * 1024 * 1024)))
            .file("bot/tools/bytes.toml", b"description = \"\xff\"\n")
            .fifo("bot/sandbox/workspace/pipe")
            .symlink("bot/sandbox/workspace/loop", "loop")
            .file("bot/hooks", "x"),
        Duration::from_secs(30),
    );
    let message = |code: &str, file: &str| {
        super::all_with(&project, code)
            .into_iter()
            .find(|d| d.file.as_deref() == Some(file))
            .map(|d| d.message.clone())
            .unwrap_or_else(|| panic!("no [{code}] for {file}: {:#?}", project.diagnostics))
    };
    assert_eq!(message("expected_file", "bot/tools/dir.toml"), "is a directory, expected a file");
    assert_eq!(message("expected_file", "bot/tools/pipe.toml"), "is a FIFO, socket or device, expected a regular file");
    assert_eq!(
        message("expected_file", "bot/sandbox/workspace/pipe"),
        "is a FIFO, socket or device, expected a regular file"
    );
    assert_eq!(
        message("file_too_large", "bot/tools/big.toml"),
        format!("is {} bytes, over the 1048576 byte limit for this kind of file", TOOL.len() + 3 + 2 * 1024 * 1024)
    );
    assert_eq!(message("not_utf8", "bot/tools/bytes.toml"), "is not valid UTF-8 (byte 15)");
    let walk_error = message("io_error", "bot/sandbox/workspace/loop");
    assert!(walk_error.starts_with("cannot be read: ") && !walk_error.contains("workspace"), "{walk_error}");
    assert_eq!(message("expected_directory", "bot/hooks"), "is a file, expected a folder");
}
