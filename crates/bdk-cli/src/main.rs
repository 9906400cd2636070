//! The `bdk` binary: parses the command line, runs one command, and maps its outcome to the
//! documented exit codes (docs/cli.md).

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod exit;
mod report;
mod templates;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("bdk: {err:#}");
            exit::Exit::Failure.into()
        }
    }
}
