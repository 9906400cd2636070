//! Checks on argv commands (tool `command`, route `handler`, hook `command`, schedule `run`,
//! reminder and result `command`): relative paths they name must exist under the folder the
//! command runs in. This module looks at the filesystem but starts nothing.

use std::path::Path;

use crate::diag::{Code, Diagnostics};
use crate::source::{Pos, SourceFile};

/// Whether an argv element looks like a path into the agent folder: it holds a `/`, does not
/// start with `-`, `/`, `$` or `~`, and holds no whitespace, `$` or `://` (flags, absolute
/// paths, placeholders and URLs are not checked).
pub fn looks_like_relative_path(arg: &str) -> bool {
    arg.contains('/')
        && !arg.starts_with(['-', '/', '~'])
        && !arg.contains('$')
        && !arg.contains("://")
        && !arg.contains(char::is_whitespace)
}

/// Warns (`missing_command_file`) for every element of `argv`, the program included, that looks
/// like a relative path and does not exist under `cwd`, the folder the command runs in. `key`
/// names the command in messages (`command`, `routes[0].handler`).
pub fn check_files(
    argv: &[String],
    cwd: &Path,
    src: &SourceFile,
    key: &str,
    pos: Option<Pos>,
    diags: &mut Diagnostics,
) {
    for arg in argv.iter().filter(|a| looks_like_relative_path(a)) {
        if !cwd.join(arg).exists() {
            diags.report(
                Code::MissingCommandFile,
                Some(&src.rel),
                pos,
                format!("{}: `{arg}` in `{key}` does not exist under {}", src.rel, folder_shown(src, cwd)),
            );
        }
    }
}

/// `cwd` as the project names it (`bot/`, `bot/extensions/ci/`), worked out from the definition
/// file's own project-relative name; the absolute path when the file does not sit under it.
fn folder_shown(src: &SourceFile, cwd: &Path) -> String {
    if let Ok(inner) = src.path.strip_prefix(cwd) {
        let parts: Vec<&str> = src.rel.split('/').collect();
        let keep = parts.len().saturating_sub(inner.components().count());
        if keep > 0 {
            return format!("{}/", parts[..keep].join("/"));
        }
    }
    format!("{}/", cwd.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_paths_are_checked() {
        for arg in ["lib/x.py", "./run.sh", "../shared/a.py", "scripts/deploy"] {
            assert!(looks_like_relative_path(arg), "{arg}");
        }
        for arg in [
            "python3",
            "-m",
            "--out=lib/x",
            "/usr/bin/env",
            "~/x/y",
            "$HOME/x",
            "lib/${X}.py",
            "a b/c",
            "https://x.example/a",
        ] {
            assert!(!looks_like_relative_path(arg), "{arg}");
        }
    }
}
