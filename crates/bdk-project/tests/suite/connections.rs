//! `mcp-connections/` and `host-connections/`: exactly one transport, `${NAME}` placeholders
//! checked against the environment, and what host connections may not do.

use bdk_project::model::{Advertise, ConnectionScope, Transport};

use super::fixture::Fixture;
use super::{assert_clean, assert_none, find, only};

#[test]
fn stdio_http_and_peer_connections_load() {
    //! Guards: each transport loads into its typed form, placeholders kept verbatim.
    let (_fx, project) = Fixture::new()
        .file("bot/mcp-connections/gh.toml", "command = \"gh-mcp\"\nargs = [\"--ro\"]\nenv = { TOKEN = \"${PATH}\" }\n")
        .file(
            "bot/host-connections/linear.toml",
            "url = \"https://mcp.linear.app/mcp\"\nheaders = { Authorization = \"Bearer ${PATH}\" }\n",
        )
        .file("bot/mcp-connections/peer.toml", "agent = \"other\"\nadvertise_tools = true\n")
        .load();
    // Alone, the peer `other` is not mounted with it: that one error, on the peer's file.
    only(&project, "unknown_peer").error().file("bot/mcp-connections/peer.toml");
    let conns = &project.caps.connections;
    assert_eq!(conns.len(), 3);
    let gh = conns.iter().find(|c| c.name == "gh").expect("gh");
    assert_eq!(gh.scope, ConnectionScope::Model);
    assert_eq!(
        gh.transport,
        Transport::Stdio {
            command: "gh-mcp".into(),
            args: vec!["--ro".into()],
            env: vec![("TOKEN".into(), "${PATH}".into())]
        }
    );
    assert_eq!(gh.placeholders, ["PATH"]);
    let linear = conns.iter().find(|c| c.name == "linear").expect("linear");
    assert_eq!(linear.scope, ConnectionScope::Host);
    let peer = conns.iter().find(|c| c.name == "peer").expect("peer");
    assert_eq!(peer.transport, Transport::Agent { slug: "other".into() });
    assert_eq!(peer.advertise, Advertise::All);
}

#[test]
fn no_transport_is_an_error() {
    //! Guards: a connection with none of command, url and agent is refused.
    let (_fx, project) = Fixture::new().file("bot/mcp-connections/x.toml", "description = \"X.\"\n").load();
    only(&project, "connection_transport").error().file("bot/mcp-connections/x.toml");
    assert!(project.caps.connections.is_empty());
}

#[test]
fn several_transports_are_an_error() {
    //! Guards: a connection with both command and url is refused.
    let (_fx, project) =
        Fixture::new().file("bot/mcp-connections/x.toml", "command = \"srv\"\nurl = \"https://x.example\"\n").load();
    only(&project, "connection_transport").error().file("bot/mcp-connections/x.toml");
    assert!(project.caps.connections.is_empty());
}

#[test]
fn transport_specific_keys_must_match() {
    //! Guards: headers on stdio, or args on HTTP, are reported.
    let (_fx, project) = Fixture::new()
        .file("bot/mcp-connections/a.toml", "command = \"srv\"\nheaders = { X = \"y\" }\n")
        .file("bot/mcp-connections/b.toml", "url = \"https://b.example\"\nargs = [\"-v\"]\n")
        .load();
    let files: Vec<_> = super::all_with(&project, "connection_transport")
        .iter()
        .map(|d| (d.file.clone().unwrap_or_default(), d.line))
        .collect();
    assert_eq!(
        files,
        [("bot/mcp-connections/a.toml".to_owned(), Some(2)), ("bot/mcp-connections/b.toml".into(), Some(2))]
    );
}

#[test]
fn unset_placeholder_warns() {
    //! Guards: `${NAME}` naming a variable absent from the environment is a warning.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/mcp-connections/x.toml",
            "url = \"https://x.example/mcp\"\nheaders = { Authorization = \"Bearer ${BDK_TEST_SURELY_UNSET_7F3A91}\" }\n",
        )
        .load();
    only(&project, "unset_placeholder").warning().file("bot/mcp-connections/x.toml");
    assert_eq!(project.caps.connections.len(), 1, "the connection still loads");
}

#[test]
fn set_placeholder_is_quiet() {
    //! Guards: a placeholder naming a variable that is set gives no warning.
    assert!(std::env::var_os("PATH").is_some());
    let (_fx, project) = Fixture::new().file("bot/mcp-connections/x.toml", "command = \"${PATH}/srv\"\n").load();
    assert_none(&project, "unset_placeholder");
    assert_clean(&project);
}

#[test]
fn host_connections_cannot_advertise() {
    //! Guards: host connections are never shown to the model, so advertise_tools is refused.
    let (_fx, project) =
        Fixture::new().file("bot/host-connections/x.toml", "command = \"srv\"\nadvertise_tools = [\"a\"]\n").load();
    only(&project, "invalid_value").error().file("bot/host-connections/x.toml").line(2);
}

#[test]
fn urls_must_be_http() {
    //! Guards: an HTTP connection's url is http(s) (or a placeholder).
    let (_fx, project) = Fixture::new().file("bot/mcp-connections/x.toml", "url = \"ftp://x\"\n").load();
    only(&project, "invalid_value").error().file("bot/mcp-connections/x.toml").line(1);
}

#[test]
fn connection_names_clash_across_scopes() {
    //! Guards: one connection name means one connection, model or host.
    let (_fx, project) = Fixture::new()
        .file("bot/mcp-connections/x.toml", "command = \"a\"\n")
        .file("bot/host-connections/x.toml", "command = \"b\"\n")
        .load();
    find(&project, "name_clash").error();
}

#[test]
fn a_peer_mounted_in_the_same_host_resolves() {
    //! Guards: `agent = "<slug>"` naming a project discovered with it is clean; the error
    //! `unknown_peer` is only for a slug no discovered project has.
    let root = tempfile::tempdir().unwrap();
    for (slug, peer) in [("front", "back"), ("back", "nobody")] {
        let bot = root.path().join(slug).join("bot");
        std::fs::create_dir_all(bot.join("mcp-connections")).unwrap();
        std::fs::write(bot.join("instructions.md"), "Be brief.\n").unwrap();
        std::fs::write(bot.join("mcp-connections/peer.toml"), format!("agent = \"{peer}\"\n")).unwrap();
    }
    let discovery = bdk_project::discover(&[root.path().to_path_buf()]);
    let front = discovery.projects.iter().find(|p| p.slug == "front").unwrap();
    assert!(front.diagnostics.iter().all(|d| d.code != "unknown_peer"), "{:?}", front.diagnostics);
    let back = discovery.projects.iter().find(|p| p.slug == "back").unwrap();
    let unknown: Vec<_> = back.diagnostics.iter().filter(|d| d.code == "unknown_peer").collect();
    assert_eq!(unknown.len(), 1, "{:?}", back.diagnostics);
    assert_eq!(unknown[0].file.as_deref(), Some("bot/mcp-connections/peer.toml"));
    assert!(unknown[0].message.contains("`nobody`"));
}

#[test]
fn allow_deny_and_timeout_load_and_an_excluded_advertised_tool_is_an_error() {
    //! Guards: `allow_tools`, `deny_tools` and `timeout` load (and show in the manifest); an
    //! `advertise_tools` name the lists exclude is `invalid_value` on `advertise_tools`.
    let (_fx, project) = Fixture::new()
        .file(
            "bot/mcp-connections/gh.toml",
            "command = \"gh-mcp\"\nallow_tools = [\"get_issue\", \"list_prs\"]\ndeny_tools = [\"list_prs\"]\ntimeout = \"5s\"\n",
        )
        .load();
    assert_clean(&project);
    let gh = &project.caps.connections[0];
    assert_eq!(gh.timeout, std::time::Duration::from_secs(5));
    assert!(gh.admits("get_issue"));
    assert!(!gh.admits("list_prs"), "deny wins");
    assert!(!gh.admits("delete_repo"), "not in allow_tools");
    let info = bdk_project::manifest(&project);
    assert_eq!(info.connections[0].allow_tools, Some(vec!["get_issue".to_owned(), "list_prs".to_owned()]));
    assert_eq!(info.connections[0].deny_tools, ["list_prs"]);

    let (_fx, project) = Fixture::new()
        .file("bot/mcp-connections/gh.toml", "command = \"gh-mcp\"\ndeny_tools = [\"x\"]\nadvertise_tools = [\"x\"]\n")
        .load();
    only(&project, "invalid_value").error().file("bot/mcp-connections/gh.toml");
}
