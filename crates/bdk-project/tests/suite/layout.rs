//! Where things sit: the project folder, the `bot/` and legacy `agent/` layouts, serve roots of
//! several projects and their slugs, and what is reported about everything else under `bot/`.

use bdk_project::model::Layout;

use super::fixture::Fixture;
use super::{assert_clean, assert_no_errors, assert_none, codes, find, only};

#[test]
fn minimal_project_is_clean() {
    //! Guards: `bot/instructions.md` alone is a valid project named and slugged by its folder.
    let (_fx, project) = Fixture::new().load();
    assert_clean(&project);
    assert_eq!(project.slug, "proj");
    assert_eq!(project.name, "proj");
    assert_eq!(project.layout, Layout::Bot);
    assert_eq!(project.instructions.files, ["bot/instructions.md"]);
    assert_eq!(project.instructions.text, "You are a test agent.");
}

#[test]
fn missing_root_instructions_is_an_error() {
    //! Guards: the root agent must have instructions.md (or an instructions/ folder).
    let (_fx, project) = Fixture::bare().file("bot/agent.toml", "description = \"x\"\n").load();
    only(&project, "missing_instructions").error().file("bot");
}

#[test]
fn instructions_folder_is_joined_in_filename_order() {
    //! Guards: `instructions/*.md` are joined in filename order, not directory order.
    let (_fx, project) = Fixture::bare()
        .file("bot/instructions/20-tools.md", "Second.\n")
        .file("bot/instructions/10-identity.md", "First.\n")
        .load();
    assert_clean(&project);
    assert_eq!(project.instructions.files, ["bot/instructions/10-identity.md", "bot/instructions/20-tools.md"]);
    assert_eq!(project.instructions.text, "First.\n\nSecond.");
}

#[test]
fn instructions_folder_reports_what_is_not_markdown() {
    //! Guards: a subfolder or non-.md file in instructions/ is reported by kind, never read.
    let (_fx, project) = Fixture::bare()
        .file("bot/instructions/10-identity.md", "First.\n")
        .file("bot/instructions/notes.txt", "x")
        .file("bot/instructions/more/20.md", "x")
        .load();
    only(&project, "stray_file").warning().file("bot/instructions/notes.txt");
    only(&project, "unknown_folder").warning().file("bot/instructions/more");
    assert_eq!(project.instructions.text, "First.");
}

#[test]
fn instructions_file_and_folder_together_warn() {
    //! Guards: with both instructions.md and instructions/, the folder is ignored and reported.
    let (_fx, project) = Fixture::new().file("bot/instructions/a.md", "Ignored.\n").load();
    only(&project, "stray_file").warning().file("bot/instructions");
    assert_eq!(project.instructions.text, "You are a test agent.");
}

#[test]
fn empty_instructions_are_an_error() {
    //! Guards: whitespace-only instructions are reported, not sent as an empty prompt.
    let (_fx, project) = Fixture::bare().file("bot/instructions.md", "  \n\n").load();
    only(&project, "empty_instructions").error().file("bot/instructions.md");
}

#[test]
fn unknown_folders_and_stray_files_warn() {
    //! Guards: anything under bot/ that is not part of the format is a warning, never loaded.
    let (_fx, project) = Fixture::new()
        .file("bot/stuff/readme.md", "x")
        .file("bot/notes.txt", "x")
        .file("bot/tools/readme.md", "x")
        .dir("bot/tools/nested")
        .load();
    find(&project, "unknown_folder").warning().file("bot/stuff");
    find(&project, "stray_file").warning().file("bot/notes.txt");
    let strays: Vec<_> = super::all_with(&project, "stray_file").iter().filter_map(|d| d.file.clone()).collect();
    assert_eq!(strays, ["bot/notes.txt", "bot/tools/readme.md"]);
    let folders: Vec<_> = super::all_with(&project, "unknown_folder").iter().filter_map(|d| d.file.clone()).collect();
    assert_eq!(folders, ["bot/stuff", "bot/tools/nested"]);
    assert!(project.caps.tools.is_empty());
    assert_no_errors(&project);
}

#[test]
fn a_folder_inside_tools_is_reported() {
    //! Guards: a folder where tool files belong is reported, not walked.
    let (_fx, project) = Fixture::new().dir("bot/tools/nested").load();
    find(&project, "unknown_folder").warning().file("bot/tools/nested");
}

#[test]
fn typescript_leftovers_warn() {
    //! Guards: `.ts`/`.js` definitions from the Node original are reported as not loaded.
    let (_fx, project) = Fixture::new()
        .file("bot/agent.ts", "export default defineAgent({})\n")
        .file("bot/tools/search.ts", "export default defineTool({})\n")
        .file("bot/mcp-connections/gh.ts", "export default {}\n")
        .file("bot/subagents/helper/agent.ts", "export default {}\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "typescript_definition").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(
        files,
        ["bot/agent.ts", "bot/mcp-connections/gh.ts", "bot/subagents/helper/agent.ts", "bot/tools/search.ts"]
    );
    find(&project, "typescript_definition").warning();
    assert!(project.caps.tools.is_empty());
}

#[test]
fn legacy_agent_layout_is_discovered() {
    //! Guards: a project with only `agent/` loads it as the legacy layout.
    let (_fx, project) = Fixture::bare()
        .file("agent/instructions.md", "Legacy.\n")
        .file("agent/tools/t.toml", "description = \"T.\"\ncommand = [\"true\"]\n")
        .load();
    assert_clean(&project);
    assert_eq!(project.layout, Layout::Agent);
    assert!(project.bot_dir.ends_with("agent"));
    assert_eq!(project.caps.tools[0].file.as_deref(), Some("agent/tools/t.toml"));
}

#[test]
fn bot_and_agent_together_warn_and_agent_is_ignored() {
    //! Guards: with both layouts present, bot/ wins and agent/ is reported.
    let (_fx, project) = Fixture::new().file("agent/tools/t.toml", "this is not toml").load();
    only(&project, "both_layouts").warning().file("agent");
    assert_eq!(project.layout, Layout::Bot);
    assert_none(&project, "toml_syntax");
}

#[test]
fn lib_is_never_discovered() {
    //! Guards: files under bot/lib/ are never parsed, however broken or bot-shaped.
    let (_fx, project) = Fixture::new()
        .file("bot/lib/broken.toml", "= = =")
        .file("bot/lib/tools/x.toml", "[[[")
        .file("bot/lib/helper.ts", "export {}")
        .load();
    assert_clean(&project);
    assert!(project.caps.tools.is_empty());
}

#[test]
fn evals_inside_bot_warn() {
    //! Guards: evals/ belongs beside bot/, and one inside it is reported and ignored.
    let (_fx, project) = Fixture::new().file("bot/evals/a.eval.toml", "message = \"hi\"\n").load();
    only(&project, "evals_inside_bot").warning().file("bot/evals");
    assert!(project.evals.is_none());
}

#[test]
fn serve_root_discovers_each_child_project_by_slug() {
    //! Guards: a folder of projects is a serve root; each child is an agent slugged by its name.
    let fx = Fixture::serve_root()
        .file("beta/bot/instructions.md", "B.\n")
        .file("alpha/bot/instructions.md", "A.\n")
        .file("legacy-one/agent/instructions.md", "L.\n")
        .file("not-a-project/readme.md", "x")
        .build();
    let discovery = fx.discover();
    assert_clean(&discovery);
    let slugs: Vec<&str> = discovery.projects.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(slugs, ["alpha", "beta", "legacy-one"]);
}

#[test]
fn reserved_and_invalid_slugs_are_errors_in_a_serve_root() {
    //! Guards: `v1`, `playground`, `docs` and names outside the slug rule cannot be routed.
    let mut fx = Fixture::serve_root().file("good/bot/instructions.md", "G.\n");
    for name in ["v1", "playground", "docs", "has space", "_under", "dot.ted"] {
        fx = fx.file(&format!("{name}/bot/instructions.md"), "x\n");
    }
    let discovery = fx.build().discover();
    for project in &discovery.projects {
        if project.slug == "good" {
            assert_clean(project);
        } else {
            only(project, "invalid_slug").error();
        }
    }
    assert_eq!(discovery.projects.len(), 7);
}

#[test]
fn an_invalid_slug_outside_a_serve_root_only_warns() {
    //! Guards: a single project in an oddly named folder still validates (it is served alone).
    let fx = Fixture::serve_root().file("My Agent/bot/instructions.md", "x\n").build();
    let discovery = bdk_project::discover(&[fx.path("My Agent")]);
    assert_eq!(discovery.projects.len(), 1);
    only(&discovery, "invalid_slug").warning();
    assert!(!discovery.has_errors());
}

#[test]
fn an_invalid_slug_among_repeated_dirs_is_an_error() {
    //! Guards: several --dir projects are routed by slug, so an unusable one is an error there too.
    let fx =
        Fixture::serve_root().file("My Agent/bot/instructions.md", "x\n").file("ok/bot/instructions.md", "x\n").build();
    let discovery = bdk_project::discover(&[fx.path("My Agent"), fx.path("ok")]);
    only(&discovery, "invalid_slug").error();
}

#[test]
fn duplicate_slugs_across_repeated_dirs_are_errors() {
    //! Guards: two --dir projects with the same folder name cannot share one host.
    let fx = Fixture::serve_root()
        .file("a/same/bot/instructions.md", "1\n")
        .file("b/same/bot/instructions.md", "2\n")
        .build();
    let discovery = bdk_project::discover(&[fx.path("a/same"), fx.path("b/same")]);
    assert_eq!(discovery.projects.len(), 2);
    only(&discovery.diagnostics[..], "duplicate_slug").error();

    let twice = bdk_project::discover(&[fx.path("a/same"), fx.path("a/same")]);
    only(&twice.diagnostics[..], "duplicate_slug").error();

    let roots = bdk_project::discover(&[fx.path("a"), fx.path("b")]);
    only(&roots.diagnostics[..], "duplicate_slug").error();
}

#[test]
fn a_folder_without_projects_is_no_project() {
    //! Guards: --dir at a folder with no bot/ anywhere (or at nothing) is an error, not silence.
    let fx = Fixture::serve_root().file("readme.md", "x").build();
    let discovery = fx.discover();
    assert!(discovery.projects.is_empty());
    only(&discovery, "no_project").error();

    let missing = bdk_project::discover(&[fx.path("does-not-exist")]);
    only(&missing, "no_project").error();
}

#[test]
fn capability_folders_must_be_folders() {
    //! Guards: a file named `tools` (or `lib`) where a folder belongs is expected_directory.
    let (_fx, project) = Fixture::new().file("bot/tools", "x").file("bot/lib", "x").load();
    let files: Vec<_> =
        super::all_with(&project, "expected_directory").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/lib", "bot/tools"]);
    find(&project, "expected_directory").error();
}

#[test]
fn root_definition_files_must_be_files() {
    //! Guards: `agent.toml/` as a directory is reported as expected_file.
    let (_fx, project) = Fixture::new().dir("bot/agent.toml").dir("bot/artifacts.toml").load();
    let files: Vec<_> =
        super::all_with(&project, "expected_file").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/agent.toml", "bot/artifacts.toml"]);
    assert_eq!(codes(&project), ["expected_file"]);
}

#[test]
fn recursive_trees_skip_hidden_entries() {
    //! Guards: sandbox seeds, a skill's sibling files and evals/ skip `.name` files and folders
    //! (`.env`, `.git/`), as the listing of a folder's direct children does.
    let (_fx, project) = Fixture::new()
        .file("bot/sandbox/workspace/README.md", "x")
        .file("bot/sandbox/workspace/.env", "SECRET=1")
        .file("bot/sandbox/workspace/.git/config", "x")
        .file("bot/sandbox/workspace/src/.cache/blob", "x")
        .file("bot/skills/s/SKILL.md", "---\ndescription: Use it.\n---\nBody.\n")
        .file("bot/skills/s/.notes.md", "x")
        .file("bot/skills/s/refs/.DS_Store", b"\x00\xff")
        .file("bot/skills/s/refs/a.md", "x")
        .file("evals/evals.toml", "")
        .file("evals/.drafts/broken.eval.toml", "not toml = =")
        .file("evals/.wip.eval.toml", "garbage")
        .load();
    assert_clean(&project);
    let seeds: Vec<&str> = project.caps.seeds.iter().map(|s| s.rel.as_str()).collect();
    assert_eq!(seeds, ["README.md"]);
    assert_eq!(project.caps.skills[0].files, ["refs/a.md"]);
    assert!(project.evals.as_ref().is_some_and(|e| e.cases.is_empty()));
}

#[test]
fn no_project_messages_do_not_repeat_the_path() {
    //! Guards: the `--dir` is the diagnostic's file; the message only says what is wrong with it.
    let fx = Fixture::serve_root().file("readme.md", "x").build();
    let empty = fx.discover();
    let message = &only(&empty, "no_project").0.message;
    assert_eq!(message, "holds no bot/ or agent/ folder, and no folder directly under it does");
    let missing = bdk_project::discover(&[fx.path("does-not-exist")]);
    assert_eq!(only(&missing, "no_project").0.message, "is not a directory");
}
