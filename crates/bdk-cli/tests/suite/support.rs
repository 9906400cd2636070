//! Running the `bdk` binary and snapshotting its output with machine-specific parts filtered.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use bdk_test_support::process::{COMMAND_TIMEOUT, OutputWithin, wait_until};

pub fn bdk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bdk"))
}

/// A finished command's stdout and stderr, for failure messages.
pub fn text(output: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Runs `bdk` with `args`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let Output { status, stdout, stderr } = bdk().args(args).output_within();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn example(name: &str) -> String {
    repo_root().join("examples").join(name).display().to_string()
}

/// Filters for snapshots: absolute paths and clock-dependent schedule times.
pub fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r#""nextFireAt": "[0-9T:\-]+Z""#, r#""nextFireAt": "[next fire]""#),
        (r"next \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "next [next fire]"),
        (r"/tmp/[^\s\x22)]+", "[tmp]"),
        (r"/[^\s\x22]*/examples/", "[repo]/examples/"),
    ]
}

#[macro_export]
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({ filters => $crate::suite::support::filters(), prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}
