//! `bdk sandbox-exec` (hidden): the launcher of `local.sandbox` tools. It confines this fresh
//! process with Landlock, then `exec`s the command, which inherits the ruleset with everything
//! it starts (`bdk_tools::sandbox` builds the command line). Nothing else runs before the
//! confinement, so no thread escapes it.

use std::os::unix::process::CommandExt;

use anyhow::bail;
use bdk_tools::sandbox::{Confinement, confine_self};

use crate::cli::SandboxExecArgs;
use crate::exit::Exit;

pub fn run(args: &SandboxExecArgs) -> anyhow::Result<Exit> {
    let Some((program, rest)) = args.command.split_first() else {
        bail!("sandbox-exec needs a command after `--`");
    };
    let confinement =
        Confinement { read_write: args.read_write.clone(), read_only: args.read_only.clone(), network: args.network };
    let shown = program.to_string_lossy();
    match confine_self(&confinement) {
        Ok(()) => {}
        Err(error) if args.allow_unconfined => eprintln!("warning: `{shown}` runs unconfined: {error}"),
        Err(error) => bail!("cannot confine `{shown}`: {error}"),
    }
    // `exec` returns only when the program could not be started.
    let error = std::process::Command::new(program).args(rest).exec();
    bail!("cannot run `{shown}` in the sandbox: {error}")
}
