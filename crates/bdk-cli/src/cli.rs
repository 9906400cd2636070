//! The command-line grammar. Every flag is documented in docs/cli.md.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bdk",
    version,
    about = "Build, check and serve filesystem-first LLM agents.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a project and print every diagnostic; exits 1 when there are errors.
    Validate(ProjectArgs),
    /// Describe what a project exposes: model, tools, skills, channels, schedules, ...
    Info(ProjectArgs),
    /// Scaffold a new project that passes `bdk validate`.
    Init(InitArgs),
}

#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// A project folder (holding bot/ or agent/) or a folder of projects. Repeatable.
    #[arg(long = "dir", value_name = "DIR", default_value = ".")]
    pub dirs: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to create (it must not exist, or be empty).
    #[arg(value_name = "DIR", required_unless_present = "list")]
    pub dir: Option<PathBuf>,
    /// The template to start from.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub template: String,
    /// The agent's display name, written to bot/agent.toml (default: the folder name).
    #[arg(long)]
    pub name: Option<String>,
    /// List the templates and exit.
    #[arg(long)]
    pub list: bool,
}
