//! Commands (tool `command`, route and GitHub `handler`, hook `command`, schedule `run`, reminder
//! and result `command`): relative paths they name must exist under the folder they run in.

use super::fixture::Fixture;
use super::{assert_clean, find};

/// (file, message) of every missing_command_file, in report order.
fn missing(project: &bdk_project::Project) -> Vec<(String, String)> {
    super::all_with(project, "missing_command_file")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.message.clone()))
        .collect()
}

#[test]
fn every_kind_of_command_is_checked() {
    //! Guards: each command-bearing definition warns for a relative path that does not exist.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/t.toml", "description = \"T.\"\ncommand = [\"python3\", \"lib/tool.py\"]\n")
        .file(
            "bot/channels/c.toml",
            "[[routes]]\nmethod = \"POST\"\npath = \"/a\"\nhandler = [\"true\"]\n\
             [[routes]]\nmethod = \"POST\"\npath = \"/b\"\nhandler = [\"python3\", \"lib/route.py\"]\n",
        )
        .file("bot/channels/gh.toml", "kind = \"github\"\n[github]\nhandler = [\"python3\", \"lib/gh.py\"]\n")
        .file("bot/hooks/h.toml", "events = [\"*\"]\ncommand = [\"python3\", \"lib/hook.py\"]\n")
        .file("bot/schedules/s.toml", "cron = \"0 9 * * *\"\nrun = [\"python3\", \"lib/sched.py\"]\n")
        .file("bot/reminders/r.toml", "command = [\"python3\", \"lib/remind.py\"]\n")
        .file("bot/result.toml", "command = [\"python3\", \"lib/result.py\"]\n")
        .load();
    assert_eq!(
        missing(&project),
        [
            (
                "bot/channels/c.toml".to_owned(),
                "`lib/route.py` in `routes[1].handler` does not exist under bot/".to_owned()
            ),
            ("bot/channels/gh.toml".to_owned(), "`lib/gh.py` in `github.handler` does not exist under bot/".to_owned()),
            ("bot/hooks/h.toml".to_owned(), "`lib/hook.py` in `command` does not exist under bot/".to_owned()),
            ("bot/reminders/r.toml".to_owned(), "`lib/remind.py` in `command` does not exist under bot/".to_owned()),
            ("bot/result.toml".to_owned(), "`lib/result.py` in `command` does not exist under bot/".to_owned()),
            ("bot/schedules/s.toml".to_owned(), "`lib/sched.py` in `run` does not exist under bot/".to_owned()),
            ("bot/tools/t.toml".to_owned(), "`lib/tool.py` in `command` does not exist under bot/".to_owned()),
        ]
    );
    find(&project, "missing_command_file").warning();
    let route = super::all_with(&project, "missing_command_file")
        .into_iter()
        .find(|d| d.file.as_deref() == Some("bot/channels/c.toml"))
        .expect("route");
    assert_eq!(route.line, Some(8), "a route's warning sits on its own handler line");
    assert!(!project.has_errors(), "{:#?}", project.diagnostics);
    assert_eq!(project.caps.tools.len(), 1, "the definitions still load");
}

#[test]
fn existing_files_and_non_paths_are_quiet() {
    //! Guards: only relative paths are checked (not flags, absolute paths, placeholders, URLs or
    //! words), and a path that exists relative to the agent folder passes, program included.
    let (_fx, project) = Fixture::new()
        .file("bot/lib/ok.py", "")
        .file("bot/lib/run", "")
        .file(
            "bot/tools/t.toml",
            "description = \"T.\"\ncommand = [\"lib/run\", \"lib/ok.py\", \"./lib/ok.py\", \"lib\", \"--out=x/y\", \
             \"-o\", \"/usr/bin/env\", \"~/x/y\", \"$HOME/x\", \"lib/${NAME}.py\", \"https://x.example/a\", \"a b/c\"]\n",
        )
        .load();
    assert_clean(&project);
}

#[test]
fn the_program_itself_is_checked() {
    //! Guards: argv[0] that is a relative path (`./run.sh`, `bin/tool`) must exist too.
    let (_fx, project) =
        Fixture::new().file("bot/tools/t.toml", "description = \"T.\"\ncommand = [\"./run.sh\", \"--fast\"]\n").load();
    let found = missing(&project);
    assert_eq!(
        found,
        [("bot/tools/t.toml".to_owned(), "`./run.sh` in `command` does not exist under bot/".to_owned())]
    );
    super::only(&project, "missing_command_file").line(2);
}

#[test]
fn extension_commands_resolve_in_the_extension_folder() {
    //! Guards: an extension's commands run in its own folder, and the message names that folder.
    let (_fx, project) = Fixture::new()
        .file("bot/lib/jobs.py", "")
        .file("bot/extensions/ci/tools/jobs.toml", "description = \"J.\"\ncommand = [\"python3\", \"lib/jobs.py\"]\n")
        .file("bot/extensions/ci/lib/ok.py", "")
        .file("bot/extensions/ci/hooks/h.toml", "events = [\"*\"]\ncommand = [\"python3\", \"lib/ok.py\"]\n")
        .load();
    assert_eq!(
        missing(&project),
        [(
            "bot/extensions/ci/tools/jobs.toml".to_owned(),
            "`lib/jobs.py` in `command` does not exist under bot/extensions/ci/".to_owned()
        )]
    );
}
