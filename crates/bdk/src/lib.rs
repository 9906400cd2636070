//! BDK as a library: what a Rust program needs to embed an agent's tools or to ship its own
//! binary with native tools. It re-exports; it owns no logic.
//!
//! A native tool is a type implementing [`NativeTool`], with an input type deriving
//! [`schemars::JsonSchema`] and `serde::Deserialize`. Register it on the registry builder next
//! to the project's file-defined tools:
//!
//! ```no_run
//! # use bdk::{NativeTool, Predicate, ProjectTools, ToolContext, ToolError};
//! # use serde_json::{Value, json};
//! #[derive(serde::Deserialize, bdk::schemars::JsonSchema)]
//! #[schemars(crate = "bdk::schemars")]
//! struct Input { city: String }
//!
//! struct Weather;
//!
//! impl NativeTool for Weather {
//!     type Input = Input;
//!     fn name(&self) -> &str { "weather" }
//!     fn description(&self) -> &str { "Read the current weather." }
//!     fn effect(&self) -> Predicate { Predicate::Always(false) }
//!     async fn call(&self, input: Input, _ctx: ToolContext) -> Result<Value, ToolError> {
//!         Ok(json!({ "city": input.city, "temperatureF": 72 }))
//!     }
//! }
//!
//! let project = bdk::load_project(std::path::Path::new("."), false);
//! let tools = ProjectTools::builder(&project).native(Weather).build()?;
//! # Ok::<(), bdk::tools::Error>(())
//! ```
//!
//! `examples/native_tool.rs` runs one end to end. A tool that needs files calls
//! [`ToolContext::workspace`] (`let dir = ctx.workspace()?;`): the folder is created on first use,
//! so a direct call's scratch folder costs nothing to a tool that never asks for it.
//!
//! To ship your own `bdk` binary (the same commands, with your native tools in every project:
//! `info` lists them with `source: "native"`, `serve`, `run` and `call` run them), hand them to
//! [`main_with`]; `examples/custom_bdk.rs` is one:
//!
//! ```ignore
//! fn main() -> std::process::ExitCode {
//!     bdk::main_with(bdk::Embed::new().native(Weather)) // Weather: NativeTool + Clone
//! }
//! ```

pub use bdk_cli::{Embed, main_with};
pub use bdk_project as project;
pub use bdk_project::model::{Predicate, ToolDef};
pub use bdk_project::{Project, discover, load_project};
pub use bdk_protocol as protocol;
pub use bdk_tools as tools;
pub use bdk_tools::native::native_def;
pub use bdk_tools::{
    Effect, HostAccess, HostError, HostServices, NativeTool, NoTools, ProjectTools, ProjectToolsBuilder,
    RegistryOptions, Scope, ToolContext, ToolError, ToolInfo, ToolInvocation, ToolKind, ToolOutcome, ToolRegistry,
    ToolSpec,
};
pub use schemars;
pub use serde_json;
pub use tokio_util::sync::CancellationToken;
