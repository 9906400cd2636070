//! One module per verb; each returns the exit code it earned.

use crate::cli::{Cli, Command};
use crate::exit::Exit;

mod info;
mod init;
mod serve;
mod validate;

pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Info(args) => info::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Serve(args) => serve::run(&args),
    }
}
