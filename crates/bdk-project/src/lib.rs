//! Discovers a BDK project folder (`bot/`, or the legacy `agent/`, with `evals/` beside it) into
//! typed definitions and diagnostics, and describes it as the wire manifest.
//!
//! This crate reads files and nothing else: it starts no process, opens no socket and resolves
//! no model. `discover` never panics on a broken project; every problem is a [`Diagnostic`].
//!
//! [`Diagnostic`]: bdk_protocol::Diagnostic

pub mod checks;
pub mod commands;
pub mod diag;
pub mod formats;
#[doc(hidden)]
pub mod fuzzing;
pub mod manifest;
pub mod model;
pub mod parse;
pub mod project;
pub mod schema;
pub mod source;
pub mod suggest;
pub mod walk;

pub use diag::Code;
pub use manifest::{manifest, manifest_at};
pub use model::Project;
pub use project::{Discovery, discover, is_valid_slug, load_project};

/// The model an agent runs on when it declares none.
pub const DEFAULT_MODEL: &str = "grok-4.5";
/// The provider of [`DEFAULT_MODEL`].
pub const DEFAULT_PROVIDER: &str = "xai";
