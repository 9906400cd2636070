//! The `bdk` binary: the library's command line with nothing embedded.

use std::process::ExitCode;

/// With the `mimalloc` feature (off by default: the system allocator measured better, see
/// docs/decisions/0009-hot-path.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    bdk_cli::main_with(bdk_cli::Embed::default())
}
