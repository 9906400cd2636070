//! One module per verb; each returns the exit code it earned. The commands that read projects
//! get the [`Embed`] and see its native tools.

use crate::Embed;
use crate::cli::{Cli, Command};
use crate::exit::Exit;

mod call;
mod chat;
mod cost;
mod cost_url;
mod eval;
mod github;
mod help;
mod info;
mod init;
mod mcp;
mod migrate;
mod run;
mod sandbox_exec;
mod schedules;
mod serve;
mod trajectory;
mod validate;

pub fn run(cli: Cli, embed: &Embed) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Validate(args) => validate::run(&args, embed),
        Command::Info(args) => info::run(&args, embed),
        Command::Init(args) => init::run(&args),
        Command::Serve(args) => serve::run(&args, embed),
        Command::Run(args) => run::run(&args, embed),
        Command::Chat(args) => chat::run(&args, embed),
        Command::Trajectory(args) => trajectory::run(&args),
        Command::Cost(args) => cost::run(&args),
        Command::Call(args) => call::run(&args, embed),
        Command::Schedules(args) => schedules::run(&args, embed),
        Command::Eval(args) => eval::run(&args, embed),
        Command::Help(args) => help::help(&args),
        Command::Completions(args) => help::completions(&args),
        Command::SandboxExec(args) => sandbox_exec::run(&args),
        Command::Github(args) => github::run(&args),
        Command::Mcp(command) => mcp::run(&command, embed),
        Command::Migrate(args) => migrate::run(&args),
    }
}
