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

mod browser;
mod cli;
mod commands;
mod dotenv;
mod embed;
mod exit;
mod live;
mod otel;
mod report;
mod templates;
mod watch;

pub use embed::Embed;

/// Parses the command line, runs one command with what `embed` adds, and maps its outcome to
/// the documented exit codes (docs/cli.md). The `bdk` binary is `main_with(Embed::default())`.
///
/// Every error line starts `error: ` (as clap's own do). A closed stdout (`bdk info | head`)
/// ends the command quietly with exit 0.
pub fn main_with(embed: Embed) -> ExitCode {
    quiet_broken_pipes();
    let cli = cli::Cli::parse();
    if let Some(code) = dotenv::load(&cli.command.dirs()) {
        return code;
    }
    match commands::run(cli, &embed) {
        Ok(code) => code.into(),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            exit::Exit::Failure.into()
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// `print!` panics when stdout is a closed pipe; that is the reader going away, not a bug.
fn quiet_broken_pipes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("Broken pipe") && message.contains("failed printing to") {
            std::process::exit(0);
        }
        default(info);
    }));
}
