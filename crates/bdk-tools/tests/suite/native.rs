//! Native Rust tools: schemas derived by schemars, input validated and deserialized, the typed
//! context, errors and panics as error results.

use bdk_project::model::Predicate;
use bdk_protocol::info::Source;
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError, ToolKind, ToolRegistry};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Bot, call, error_text};

#[derive(Deserialize, JsonSchema)]
struct AddInput {
    /// The first number.
    a: i64,
    b: i64,
}

struct Add;

impl NativeTool for Add {
    type Input = AddInput;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Add two integers."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: AddInput, ctx: ToolContext) -> Result<Value, ToolError> {
        if input.a < 0 {
            return Err(ToolError::new("negative numbers are not supported"));
        }
        if input.a == 13 {
            panic!("unlucky");
        }
        Ok(json!({"sum": input.a + input.b, "callId": ctx.call_id.to_string(), "dryRun": ctx.dry_run}))
    }
}

fn tools(bot: &Bot) -> ProjectTools {
    ProjectTools::empty(bot.bot()).without_builtins().native(Add).build().unwrap()
}

#[tokio::test]
async fn a_native_tool_is_called_with_its_typed_input() {
    //! Guards: the derived schema is advertised, the call gets typed input and context.
    let bot = Bot::new();
    let tools = tools(&bot);
    let spec = tools.specs().into_iter().find(|s| s.name == "add").unwrap();
    assert_eq!(spec.input_schema["type"], json!("object"));
    assert_eq!(spec.input_schema["required"], json!(["a", "b"]));
    assert!(spec.input_schema.get("$schema").is_none());
    let info = tools.lookup("add").unwrap();
    assert_eq!((info.kind, info.source, info.callable), (ToolKind::Native, Source::Native, true));
    assert_eq!(tools.native_defs().len(), 1);

    let invocation = bot.invocation("add", json!({"a": 2, "b": 3}));
    let call_id = invocation.call_id.to_string();
    let outcome = call(&tools, invocation).await;
    assert_eq!(outcome.result, json!({"sum": 5, "callId": call_id, "dryRun": false}));
}

#[tokio::test]
async fn native_errors_and_panics_are_error_results() {
    //! Guards: schema violations, `Err` and a panic all come back as isError outcomes.
    let bot = Bot::new();
    let tools = tools(&bot);
    let text = error_text(&call(&tools, bot.invocation("add", json!({"a": "x", "b": 1}))).await);
    assert!(text.contains("/a"), "{text}");
    let text = error_text(&call(&tools, bot.invocation("add", json!({"a": -1, "b": 1}))).await);
    assert_eq!(text, "negative numbers are not supported");
    let text = error_text(&call(&tools, bot.invocation("add", json!({"a": 13, "b": 1}))).await);
    assert!(text.contains("panicked"), "{text}");
}

#[test]
fn the_workspace_is_created_on_first_use() {
    //! Guards: a scratch path is handed over uncreated; `ctx.workspace()` makes it (parents too),
    //! and a call with no workspace is `NotFound`.
    let dir = tempfile::tempdir().unwrap();
    let mut invocation = bdk_tools::ToolInvocation::generate("add", json!({}));
    let scratch = dir.path().join("tool-calls").join(invocation.call_id.as_str());
    let ctx = ToolContext::from_invocation(&invocation, None);
    assert_eq!(ctx.workspace().unwrap_err().kind(), std::io::ErrorKind::NotFound);

    invocation.workspace = Some(scratch.clone());
    let ctx = ToolContext::from_invocation(&invocation, None);
    assert!(!scratch.exists(), "nothing is created before the tool asks");
    assert_eq!(ctx.workspace().unwrap(), scratch.as_path());
    assert!(scratch.is_dir());
    assert_eq!(ctx.workspace().unwrap(), scratch.as_path(), "asking again is fine");
}
