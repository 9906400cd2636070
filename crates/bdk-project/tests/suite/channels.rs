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

#[test]
fn a_declarative_route_sends_without_a_handler() {
    //! Guards: `send` replaces `handler`; its templates and declared headers reach the route.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/channels/tickets.toml",
            "[[routes]]\nmethod = \"POST\"\npath = \"/ticket/{id}\"\nheaders = [\"X-Request-Id\"]\n\
             send = { message = \"Ticket {{params.id}}: {{body.summary}}\", continuation_key = \"ticket:{{params.id}}\" }\n",
        )
        .load();
    assert_clean(&project);
    let route = &project.caps.channels[0].routes[0];
    assert!(route.handler.is_empty());
    assert_eq!(route.headers, ["x-request-id"]);
    let send = route.send.as_ref().expect("send");
    assert_eq!(send.continuation_key.as_deref(), Some("ticket:{{params.id}}"));
}

#[test]
fn declarative_routes_refuse_bad_templates_and_a_second_body() {
    //! Guards: a placeholder outside body/params/query/headers, an unclosed `{{`, and `send`
    //! beside `handler` are reported on the route.
    for (send, code) in [
        ("send = { message = \"{{secrets.x}}\" }\n", "invalid_value"),
        ("send = { message = \"hi {{body.x\" }\n", "invalid_value"),
        ("send = { message = \"hi\" }\nhandler = [\"t\"]\n", "invalid_route"),
        ("send = { message = \" \" }\n", "missing_field"),
    ] {
        let (_fx, project) = Fixture::new()
            .file("bot/channels/c.toml", format!("[[routes]]\nmethod = \"POST\"\npath = \"/x\"\n{send}"))
            .load();
        only(&project, code).error().file("bot/channels/c.toml");
        assert!(project.caps.channels.is_empty(), "{send}");
    }
}

#[test]
fn kind_table_choices_are_checked() {
    //! Guards: `reply`, `algorithm`, `reply_mode` and `continuation` take only their words.
    let (_fx, project) = Fixture::new()
        .file("bot/channels/h.toml", format!("kind = \"webhook\"\n{ROUTE}[webhook]\nalgorithm = \"md5\"\n"))
        .file("bot/lib/h.py", "")
        .load();
    only(&project, "invalid_value").error().file("bot/channels/h.toml");
}
