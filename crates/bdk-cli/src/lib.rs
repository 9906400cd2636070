//! The `bdk` command as a library, so a Rust program can ship its own `bdk` binary with native
//! tools (DESIGN.md §1): the same grammar, commands and exit codes, plus what an [`Embed`] adds
//! to every project.
//!
//! ```ignore
//! fn main() -> std::process::ExitCode {
//!     bdk_cli::main_with(bdk_cli::Embed::new().native(Add))
//! }
//! ```
//!
//! `crates/bdk/examples/custom_bdk.rs` is a whole one.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod embed;
mod exit;
mod live;
mod report;
mod templates;

pub use embed::Embed;

/// Parses the command line, runs one command with what `embed` adds, and maps its outcome to
/// the documented exit codes (docs/cli.md). The `bdk` binary is `main_with(Embed::default())`.
pub fn main_with(embed: Embed) -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli, &embed) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("bdk: {err:#}");
            exit::Exit::Failure.into()
        }
    }
}
