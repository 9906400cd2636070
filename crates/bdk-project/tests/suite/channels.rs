//! `channels/<id>.toml`: routes with distinct method+path, schemas that compile, handlers, and
//! the kind-specific tables.

use bdk_project::model::ChannelKind;
use serde_json::json;

use super::fixture::Fixture;
use super::{assert_clean, find, only};

const ROUTE: &str = "[[routes]]\nmethod = \"POST\"\npath = \"/ingest\"\nhandler = [\"python3\", \"lib/h.py\"]\n";

#[test]
fn a_custom_channel_loads() {
    //! Guards: routes, schemas, auth and admission reach the typed channel.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/channels/intake.toml",
            format!(
                "description = \"Intake.\"\nadmission = \"coalesce\"\n\
                 [[auth]]\nkind = \"bearer\"\ntoken_env = \"INTAKE_TOKEN\"\n\
                 {ROUTE}body_schema = {{ type = \"object\", required = [\"text\"] }}\n\
                 [[routes]]\nmethod = \"get\"\npath = \"/status\"\nhandler = [\"true\"]\n\
                 query_schema = {{ type = \"object\" }}\n"
            ),
        )
        .file("bot/lib/h.py", "")
        .load();
    assert_clean(&project);
    let ch = &project.caps.channels[0];
    assert_eq!(ch.id, "intake");
    assert_eq!(ch.kind, ChannelKind::Custom);
    assert_eq!(ch.routes.len(), 2);
    assert_eq!(ch.routes[0].body_schema, Some(json!({"type": "object", "required": ["text"]})));
    assert_eq!(ch.routes[1].method, "GET");
}

#[test]
fn duplicate_route_is_reported_at_the_second_route() {
    //! Guards: two routes with one method and path are refused, pointing at the repeat.
    let (_fx, project) = Fixture::new().file("bot/channels/c.toml", format!("{ROUTE}{ROUTE}")).load();
    only(&project, "duplicate_route").error().file("bot/channels/c.toml").line(7);
    assert!(project.caps.channels.is_empty());
}

#[test]
fn get_route_with_body_schema_is_refused() {
    //! Guards: GET carries no body, so body_schema on GET is invalid_route.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/channels/c.toml",
            "[[routes]]\nmethod = \"GET\"\npath = \"/x\"\nhandler = [\"true\"]\nbody_schema = { type = \"object\" }\n",
        )
        .load();
    only(&project, "invalid_route").error().file("bot/channels/c.toml").line(5);
}

#[test]
fn route_without_handler_is_refused() {
    //! Guards: every route runs a handler command.
    let (_fx, project) = Fixture::new()
        .file("bot/channels/c.toml", format!("{ROUTE}[[routes]]\nmethod = \"PUT\"\npath = \"/y\"\n"))
        .load();
    only(&project, "missing_field").error().file("bot/channels/c.toml").line(7);
    assert!(project.caps.channels.is_empty());
}

#[test]
fn invalid_body_schema_is_reported() {
    //! Guards: route body schemas compile with the same engine as tool inputs.
    let (_fx, project) = Fixture::new()
        .file("bot/channels/c.toml", format!("{ROUTE}body_schema = {{ type = \"object\", required = 3 }}\n"))
        .load();
    only(&project, "invalid_schema").error().file("bot/channels/c.toml").line(5);
}

#[test]
fn bad_methods_and_paths_are_invalid_routes() {
    //! Guards: methods come from a fixed set and paths start with `/`.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/channels/c.toml",
            "[[routes]]\nmethod = \"FETCH\"\npath = \"/x\"\nhandler = [\"t\"]\n\
             [[routes]]\nmethod = \"POST\"\npath = \"y\"\nhandler = [\"t\"]\n",
        )
        .load();
    let lines: Vec<_> = super::all_with(&project, "invalid_route").iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(2), Some(7)]);
}

#[test]
fn a_custom_channel_needs_routes() {
    //! Guards: a custom channel with no routes serves nothing and is reported.
    let (_fx, project) = Fixture::new().file("bot/channels/c.toml", "description = \"Nothing.\"\n").load();
    only(&project, "missing_field").error().file("bot/channels/c.toml");
}

#[test]
fn kind_tables_must_match_the_kind() {
    //! Guards: `[github]` on a custom channel is an unknown key.
    let (_fx, project) =
        Fixture::new().file("bot/channels/c.toml", format!("{ROUTE}[github]\nbot_name = \"x\"\n")).load();
    find(&project, "unknown_key").error().file("bot/channels/c.toml").line(5);
}
