//! Exit codes, one meaning each. docs/cli.md lists them; scripts rely on them.

use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did its work; warnings may have been printed.
    Ok = 0,
    /// The project has error diagnostics; for `bdk call`, also: the tool ran and reported
    /// `isError: true`.
    ProjectErrors = 1,
    // 2 is clap's: the command line could not be parsed.
    /// The command could not do its work (I/O, a refused target, an unknown template).
    Failure = 3,
    /// `bdk run`: a tool call needed approval and no `--approve` / `--deny` decided it; the
    /// turn was stopped.
    NeedsApproval = 4,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}
