//! Your own `bdk` binary: the whole command line, with a native Rust tool in every project it
//! reads. `info` lists `add` with `source: "native"`; `call`, `run` and `serve` run it.
//!
//! ```sh
//! cargo run -p bdk --example custom_bdk -- info --dir examples/hello
//! cargo run -p bdk --example custom_bdk -- call add --dir examples/hello --input '{"a": 1, "b": 2}'
//! ```

use std::process::ExitCode;

use bdk::{Embed, NativeTool, Predicate, ToolContext, ToolError};
use serde_json::{Value, json};

// `schemars` derives the input's JSON Schema (doc comments become descriptions, which the model
// reads) and the registry validates every call against it before `call` runs.
/// Two whole numbers to add.
#[derive(serde::Deserialize, bdk::schemars::JsonSchema)]
#[schemars(crate = "bdk::schemars")]
struct AddInput {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

/// Each project gets a clone of the tool, so it is `Clone` (wrap shared state in an `Arc`).
#[derive(Clone)]
struct Add;

impl NativeTool for Add {
    type Input = AddInput;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Add two numbers exactly; use it instead of doing arithmetic in your head."
    }

    fn effect(&self) -> Predicate {
        Predicate::Always(false)
    }

    async fn call(&self, input: AddInput, _ctx: ToolContext) -> Result<Value, ToolError> {
        // An `Err` is told to the model as an `isError` result.
        let sum = input.a.checked_add(input.b).ok_or_else(|| ToolError::new("the sum overflows a 64-bit integer"))?;
        Ok(json!({ "sum": sum }))
    }
}

fn main() -> ExitCode {
    bdk::main_with(Embed::new().native(Add))
}
