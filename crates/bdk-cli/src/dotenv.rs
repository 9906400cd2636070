//! `.env` in a project folder, for development: `KEY=VALUE` lines (`#` comments, an optional
//! `export ` prefix, values optionally in single or double quotes) that fill in variables the
//! environment does not set. Precedence: the process environment, then `.env`, then defaults;
//! a `.env` never overrides a variable that is set, even to an empty value.
//!
//! The variables must be in place before any code reads the environment, and setting them in a
//! running process is unsound, so the command re-executes itself once with them added
//! (`BDK_DOTENV_LOADED` marks the second run).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Set in the re-executed process so it does not load again.
const LOADED: &str = "BDK_DOTENV_LOADED";

/// Parses `.env` text into (name, value) pairs; malformed lines are skipped with their number.
pub fn parse(text: &str) -> (Vec<(String, String)>, Vec<usize>) {
    let mut vars = Vec::new();
    let mut bad = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((name, value)) = line.split_once('=') else {
            bad.push(i + 1);
            continue;
        };
        let name = name.trim();
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            bad.push(i + 1);
            continue;
        }
        let value = value.trim();
        let value = match (value.chars().next(), value.chars().last()) {
            (Some(q @ ('"' | '\'')), Some(end)) if value.len() >= 2 && end == q => &value[1..value.len() - 1],
            // An unquoted value ends at ` #` (a trailing comment).
            _ => value.split(" #").next().unwrap_or(value).trim_end(),
        };
        vars.push((name.to_string(), value.to_string()));
    }
    (vars, bad)
}

/// The variables the `.env` files of `dirs` add to the environment (first file wins a name).
pub fn missing(dirs: &[PathBuf]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for dir in dirs {
        let path = dir.join(".env");
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let (vars, bad) = parse(&text);
        for line in bad {
            eprintln!("warning: {}:{line}: not a NAME=VALUE line; skipped", path.display());
        }
        for (name, value) in vars {
            if std::env::var_os(&name).is_none() && !out.iter().any(|(n, _)| *n == name) {
                out.push((name, value));
            }
        }
    }
    out
}

/// Re-executes the command with the `.env` variables of `dirs` added, when there are any and
/// this is not already the second run. Returns only when nothing needs loading (or on a
/// platform without `exec`, after the child exits, with its code).
pub fn load(dirs: &[PathBuf]) -> Option<std::process::ExitCode> {
    if std::env::var_os(LOADED).is_some() {
        return None;
    }
    let vars = missing(dirs);
    if vars.is_empty() {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    reexec(&exe, &args, &vars)
}

#[cfg(unix)]
fn reexec(exe: &Path, args: &[OsString], vars: &[(String, String)]) -> Option<std::process::ExitCode> {
    use std::os::unix::process::CommandExt as _;
    let error = std::process::Command::new(exe).args(args).envs(vars.iter().cloned()).env(LOADED, "1").exec();
    eprintln!("warning: could not load .env ({error}); continuing without it");
    None
}

#[cfg(not(unix))]
fn reexec(exe: &Path, args: &[OsString], vars: &[(String, String)]) -> Option<std::process::ExitCode> {
    let status = std::process::Command::new(exe).args(args).envs(vars.iter().cloned()).env(LOADED, "1").status();
    match status {
        Ok(status) => Some(std::process::ExitCode::from(status.code().unwrap_or(3) as u8)),
        Err(error) => {
            eprintln!("warning: could not load .env ({error}); continuing without it");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_exports_quotes_and_bad_lines() {
        let text = "# a comment\nexport A=1\nB = \"two words\"\nC='x # y'\nD=plain # note\nnot a line\n1X=bad\nE=\n";
        let (vars, bad) = parse(text);
        let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("A"), Some("1"));
        assert_eq!(get("B"), Some("two words"));
        assert_eq!(get("C"), Some("x # y"));
        assert_eq!(get("D"), Some("plain"));
        assert_eq!(get("E"), Some(""));
        assert_eq!(bad, vec![6, 7]);
    }
}
