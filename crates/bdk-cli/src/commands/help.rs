//! `bdk help [COMMAND...] [--json]` and `bdk completions SHELL`: the command tree for people
//! (clap's long help), for machines (`--json`: every command with its flags, as the reference's
//! `help <cmd> --json`), and for shells (clap_complete scripts).

use std::io::Write as _;

use anyhow::bail;
use clap::CommandFactory as _;
use serde_json::{Value, json};

use crate::cli::{Cli, CompletionsArgs, HelpArgs};
use crate::exit::Exit;

pub fn help(args: &HelpArgs) -> anyhow::Result<Exit> {
    let mut command = Cli::command();
    command.build();
    let mut current = &mut command;
    for name in &args.command {
        let known: Vec<String> = current.get_subcommands().map(|c| c.get_name().to_string()).collect();
        match current.find_subcommand_mut(name) {
            Some(sub) => current = sub,
            None => bail!("no command `{name}`; the commands are: {}", known.join(", ")),
        }
    }
    if args.json {
        let mut out = serde_json::to_string_pretty(&tree(current))?;
        out.push('\n');
        std::io::stdout().write_all(out.as_bytes())?;
    } else {
        let mut stdout = std::io::stdout();
        current.write_long_help(&mut stdout)?;
        stdout.flush()?;
    }
    Ok(Exit::Ok)
}

/// A command and its subcommands as JSON.
fn tree(command: &clap::Command) -> Value {
    let args: Vec<Value> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .map(|a| {
            let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
            json!({
                "name": a.get_id().as_str(),
                "long": a.get_long(),
                "short": a.get_short().map(String::from),
                "positional": a.is_positional(),
                "help": a.get_help().map(ToString::to_string),
                "required": a.is_required_set(),
                "takesValue": takes_value,
                "valueNames": a.get_value_names().map(|v| v.iter().map(ToString::to_string).collect::<Vec<_>>()),
                "default": a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>(),
                "possibleValues": a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect::<Vec<_>>(),
                "repeatable": matches!(a.get_action(), clap::ArgAction::Append | clap::ArgAction::Count),
                "env": a.get_env().map(|e| e.to_string_lossy().into_owned()),
            })
        })
        .collect();
    let subcommands: Vec<Value> = command.get_subcommands().filter(|c| !c.is_hide_set()).map(tree).collect();
    json!({
        "name": command.get_name(),
        "about": command.get_about().map(ToString::to_string),
        "args": args,
        "subcommands": subcommands,
    })
}

pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Exit> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "bdk", &mut script);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(Exit::Ok)
}
