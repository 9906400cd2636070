//! `bdk mcp list`: opens each connection of a project and lists its tools (the reference MCP
//! server from npm over stdio), and a server that cannot start is reported with exit code 3.

use std::fs;

use super::support::run;

#[test]
fn mcp_list_shows_each_servers_tools_and_failures() {
    let Some(dir) = bdk_test_support::peers::require("mcp-everything") else { return };
    let entry = fs::read_to_string(dir.join("entry")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bot = tmp.path().join("bot");
    fs::create_dir_all(bot.join("mcp-connections")).unwrap();
    fs::create_dir_all(bot.join("host-connections")).unwrap();
    fs::write(bot.join("instructions.md"), "Be brief.\n").unwrap();
    fs::write(
        bot.join("mcp-connections/everything.toml"),
        format!("description = \"The reference server.\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\ndeny_tools = [\"get-env\"]\n", entry.trim()),
    )
    .unwrap();
    let project = tmp.path().display().to_string();

    let (code, stdout, stderr) = run(&["mcp", "list", "--dir", &project, "--json"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let listing: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let server = &listing["agents"][0]["servers"][0];
    assert_eq!(server["name"], "everything");
    assert_eq!(server["transport"], "stdio");
    let names: Vec<&str> = server["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(!names.contains(&"get-env"), "deny_tools applies: {names:?}");

    fs::write(bot.join("host-connections/broken.toml"), "command = \"/nonexistent/server\"\n").unwrap();
    let (code, stdout, _) = run(&["mcp", "list", "--dir", &project]);
    assert_eq!(code, 3, "{stdout}");
    assert!(stdout.contains("everything (stdio, model)"), "{stdout}");
    assert!(stdout.contains("broken (stdio, host)"), "{stdout}");
    assert!(stdout.contains("cannot run `/nonexistent/server`"), "{stdout}");
}
