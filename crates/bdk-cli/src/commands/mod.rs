//! One module per verb; each returns the exit code it earned.

use crate::cli::{Cli, Command};
use crate::exit::Exit;

mod call;
mod cost;
mod cost_url;
mod info;
mod init;
mod run;
mod serve;
mod trajectory;
mod validate;

pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Info(args) => info::run(&args),
        Command::Init(args) => init::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Trajectory(args) => trajectory::run(&args),
        Command::Cost(args) => cost::run(&args),
        Command::Call(args) => call::run(&args),
    }
}
