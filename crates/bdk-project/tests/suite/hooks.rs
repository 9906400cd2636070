//! `hooks/<name>.toml`: one sink (a command or a built-in file/http sink) and known event types.

use bdk_project::model::HookSink;

use super::fixture::Fixture;
use super::{assert_clean, only};

#[test]
fn command_and_builtin_sinks_load() {
    //! Guards: each sink form loads into the typed hook.
    let (_fx, project) = Fixture::new()
        .file("bot/hooks/audit.toml", "events = [\"*\"]\ncommand = [\"python3\", \"lib/audit.py\"]\n")
        .file("bot/lib/audit.py", "")
        .file("bot/hooks/log.toml", "events = [\"turn.completed\"]\n[sink]\nkind = \"file\"\npath = \"hooks.ndjson\"\n")
        .file("bot/hooks/post.toml", "events = [\"*\"]\nsink = { kind = \"http\", url = \"https://h.example\" }\n")
        .load();
    assert_clean(&project);
    let sinks: Vec<&HookSink> = project.caps.hooks.iter().map(|h| &h.sink).collect();
    assert!(matches!(sinks[0], HookSink::Command(c) if c[0] == "python3"));
    assert_eq!(sinks[1], &HookSink::File("hooks.ndjson".into()));
    assert!(matches!(sinks[2], HookSink::Http { url, .. } if url == "https://h.example"));
}

#[test]
fn hook_without_sink_is_an_error() {
    //! Guards: a hook with neither command nor sink (or both) is refused.
    let (_fx, project) = Fixture::new()
        .file("bot/hooks/a.toml", "events = [\"*\"]\n")
        .file("bot/hooks/b.toml", "events = [\"*\"]\ncommand = [\"x\"]\nsink = { kind = \"file\", path = \"p\" }\n")
        .load();
    let files: Vec<_> =
        super::all_with(&project, "hook_sink").iter().map(|d| d.file.clone().unwrap_or_default()).collect();
    assert_eq!(files, ["bot/hooks/a.toml", "bot/hooks/b.toml"]);
    assert!(project.caps.hooks.is_empty());
}

#[test]
fn bad_sink_values_are_errors() {
    //! Guards: an empty command or a non-http URL is a hook_sink error.
    let (_fx, project) = Fixture::new()
        .file("bot/hooks/a.toml", "events = [\"*\"]\ncommand = []\n")
        .file("bot/hooks/b.toml", "events = [\"*\"]\nsink = { kind = \"http\", url = \"ftp://x\" }\n")
        .load();
    assert_eq!(super::all_with(&project, "hook_sink").len(), 2);
}

#[test]
fn unknown_event_warns_and_the_hook_still_loads() {
    //! Guards: an unknown event type never fires; it is a warning, not an error.
    let (_fx, project) = Fixture::new()
        .file("bot/hooks/a.toml", "command = [\"cat\"]\nevents = [\"turn.completed\", \"turn.exploded\"]\n")
        .load();
    only(&project, "unknown_event").warning().file("bot/hooks/a.toml").line(2);
    assert_eq!(project.caps.hooks.len(), 1);
}

#[test]
fn hook_with_no_events_is_an_error() {
    //! Guards: an empty events list subscribes to nothing.
    let (_fx, project) = Fixture::new().file("bot/hooks/a.toml", "events = []\ncommand = [\"cat\"]\n").load();
    only(&project, "missing_field").error().file("bot/hooks/a.toml").line(1);
    assert!(project.caps.hooks.is_empty());
}

#[test]
fn unset_placeholders_in_http_sinks_warn() {
    //! Guards: `${NAME}` in an HTTP sink's url or header values is checked like a connection's.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/hooks/post.toml",
            "events = [\"*\"]\n[sink]\nkind = \"http\"\nurl = \"https://h.example/${BDK_TEST_UNSET_HOOK_PATH_5E1}\"\n\
             headers = { Authorization = \"Bearer ${BDK_TEST_UNSET_HOOK_TOKEN_5E1}\", X-Path = \"${PATH}\" }\n",
        )
        .file("bot/hooks/cmd.toml", "events = [\"*\"]\ncommand = [\"echo\", \"${BDK_TEST_UNSET_HOOK_TOKEN_5E1}\"]\n")
        .load();
    let found: Vec<(String, String)> = super::all_with(&project, "unset_placeholder")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.message.clone()))
        .collect();
    assert_eq!(
        found,
        [
            (
                "bot/hooks/post.toml".to_owned(),
                "${BDK_TEST_UNSET_HOOK_PATH_5E1} is not set in this environment".to_owned()
            ),
            (
                "bot/hooks/post.toml".to_owned(),
                "${BDK_TEST_UNSET_HOOK_TOKEN_5E1} is not set in this environment".to_owned()
            ),
        ]
    );
    super::find(&project, "unset_placeholder").warning();
    assert_eq!(project.caps.hooks.len(), 2, "the hooks still load");
}
