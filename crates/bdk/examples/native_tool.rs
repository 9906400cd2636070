//! A native Rust tool with a schemars-derived input, registered beside a project's tools and
//! called through the registry the engine uses. Run: `cargo run -p bdk --example native_tool`.

use std::error::Error;

use bdk::{
    CancellationToken, NativeTool, Predicate, ProjectTools, ToolContext, ToolError, ToolInvocation, ToolRegistry,
};
use serde_json::{Value, json};

/// The input the model sends; doc comments become schema descriptions.
#[derive(serde::Deserialize, bdk::schemars::JsonSchema)]
#[schemars(crate = "bdk::schemars")]
struct ConvertInput {
    /// A temperature in degrees Fahrenheit.
    fahrenheit: f64,
    /// Decimal places to round to (default 1).
    #[serde(default)]
    digits: Option<u32>,
}

struct Convert;

impl NativeTool for Convert {
    type Input = ConvertInput;

    fn name(&self) -> &str {
        "to_celsius"
    }

    fn description(&self) -> &str {
        "Convert a Fahrenheit temperature to Celsius."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: ConvertInput, ctx: ToolContext) -> Result<Value, ToolError> {
        let digits = input.digits.unwrap_or(1).min(6);
        let scale = 10f64.powi(digits as i32);
        let celsius = ((input.fahrenheit - 32.0) * 5.0 / 9.0 * scale).round() / scale;
        Ok(json!({ "celsius": celsius, "callId": ctx.call_id.to_string() }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    // A throwaway project: one instructions file, no file-defined tools.
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("bot"))?;
    std::fs::write(dir.path().join("bot/instructions.md"), "You convert units.\n")?;
    let project = bdk::load_project(dir.path(), false);

    let tools = ProjectTools::builder(&project).without_builtins().native(Convert).build()?;
    for spec in tools.specs() {
        println!("{}: {}\n  input schema: {}", spec.name, spec.description, spec.input_schema);
    }

    let outcome = tools
        .call(
            ToolInvocation::generate("to_celsius", json!({ "fahrenheit": 72, "digits": 2 })),
            CancellationToken::new(),
        )
        .await;
    println!("to_celsius(72 °F) -> isError={} {}", outcome.is_error, outcome.result);

    let refused = tools
        .call(ToolInvocation::generate("to_celsius", json!({ "fahrenheit": "hot" })), CancellationToken::new())
        .await;
    println!("to_celsius(\"hot\") -> isError={} {}", refused.is_error, refused.result);
    Ok(())
}
