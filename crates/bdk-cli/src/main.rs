//! The `bdk` binary: the library's command line with nothing embedded.

use std::process::ExitCode;

fn main() -> ExitCode {
    bdk_cli::main_with(bdk_cli::Embed::default())
}
