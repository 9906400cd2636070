//! Agent tools (`execution = "agent"`): the script is placed in the session workspace and run
//! there with the bare input on stdin; they are never callable on the host by a direct call.

use bdk_project::model::{Execution, ToolBody};
use bdk_tools::workspace::agent_tool_path;
use bdk_tools::{ToolKind, ToolRegistry};
use serde_json::json;

use super::{Bot, call, def, error_text};

const ECHO: &str = "#!/bin/sh\nset -eu\n\
message=$(python3 -c 'import json,sys; print(json.load(sys.stdin)[\"message\"])')\n\
printf '%s|%s\\n' \"$message\" \"$(pwd)\"\n";

fn echo_tool(bot: &Bot) -> bdk_tools::ProjectTools {
    let mut tool = def("echo_here", ToolBody::Script(ECHO.into()), &bot.bot());
    tool.execution = Execution::Agent;
    tool.input_schema = json!({
        "type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}
    });
    bot.registry(vec![tool, bot.command("server_side", &["true"])])
}

#[tokio::test]
async fn agent_tools_run_in_the_workspace() {
    //! Guards: the script lands in `.bdk/tools/<name>` (executable), reads the input alone on
    //! stdin and runs with the workspace as cwd.
    let bot = Bot::new();
    let tools = echo_tool(&bot);
    let outcome = call(&tools, bot.invocation("echo_here", json!({"message": "hi"}))).await;
    let workspace = bot.workspace().canonicalize().unwrap();
    assert_eq!(outcome.result, json!(format!("hi|{}", workspace.display())), "{outcome:?}");
    let script = agent_tool_path(&bot.workspace(), "echo_here");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), ECHO);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o111, 0o111);
}

#[tokio::test]
async fn agent_tools_need_a_workspace() {
    //! Guards: with no workspace the call is an error, never a run on the host.
    let bot = Bot::new();
    let tools = echo_tool(&bot);
    let mut invocation = bot.invocation("echo_here", json!({"message": "hi"}));
    invocation.workspace = None;
    assert!(error_text(&call(&tools, invocation).await).contains("agent tool"));
}

#[test]
fn agent_tools_are_not_directly_callable() {
    //! Guards: lookup reports the kind and `callable: false`; callable names leave them out.
    let bot = Bot::new();
    let tools = echo_tool(&bot);
    let info = tools.lookup("echo_here").unwrap();
    assert_eq!(info.kind, ToolKind::Agent);
    assert!(!info.callable);
    assert!(tools.lookup("server_side").unwrap().callable);
    assert_eq!(tools.callable_names(), vec!["server_side".to_owned()]);
    assert!(tools.specs().iter().any(|s| s.name == "echo_here"), "the model still sees it");
}
