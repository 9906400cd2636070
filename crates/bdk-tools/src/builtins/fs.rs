//! The file tools (read, ls, glob, grep, write, edit): blocking code run off the async threads,
//! each path confined to the workspace, each result capped. Errors are messages for the model.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use glob::{MatchOptions, Pattern};
use regex::RegexBuilder;
use serde_json::Value;
use walkdir::WalkDir;

use super::Builtin;
use crate::process::size;
use crate::workspace::confine;

/// The most text `read` returns.
pub const READ_MAX_BYTES: usize = 256 * 1024;
/// Lines `read` returns when no `limit` is given.
pub const READ_DEFAULT_LINES: usize = 2000;
/// Entries `ls` lists.
pub const LS_MAX_ENTRIES: usize = 1000;
/// Paths `glob` returns.
pub const GLOB_MAX_RESULTS: usize = 1000;
/// Matching lines `grep` returns.
pub const GREP_MAX_MATCHES: usize = 500;
/// Files larger than this are not searched.
pub const GREP_MAX_FILE: u64 = 8 * 1024 * 1024;
/// A matching line is cut to this many characters.
const GREP_LINE_CHARS: usize = 400;
/// The largest file `write` and `edit` produce.
pub const WRITE_MAX_BYTES: usize = 8 * 1024 * 1024;

type Outcome = Result<String, String>;

pub(super) fn run(builtin: Builtin, input: &Value, root: &Path, deadline: Instant) -> Outcome {
    match builtin {
        Builtin::Read => read(input, root),
        Builtin::Ls => ls(input, root),
        Builtin::Glob => glob(input, root, deadline),
        Builtin::Grep => grep(input, root, deadline),
        Builtin::Write => write(input, root),
        Builtin::Edit => edit(input, root),
        Builtin::Shell => Err("shell is not a file tool".to_owned()),
    }
}

fn text<'a>(input: &'a Value, key: &str) -> Result<&'a str, String> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| format!("`{key}` is required"))
}

fn opt_text<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

fn count(input: &Value, key: &str) -> Option<usize> {
    input.get(key).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok())
}

/// `path` relative to the canonical workspace root, for messages and listings.
fn shown(root: &Path, path: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    match path.strip_prefix(&root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

fn read(input: &Value, root: &Path) -> Outcome {
    let given = text(input, "path")?;
    let path = confine(root, given)?;
    if path.is_dir() {
        return Err(format!("`{given}` is a folder; use ls"));
    }
    let bytes = fs::read(&path).map_err(|e| format!("`{given}` cannot be read: {e}"))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(format!("`{given}` is a binary file ({})", size(bytes.len())));
    }
    let content = String::from_utf8_lossy(&bytes);
    let offset = count(input, "offset").unwrap_or(1).max(1);
    let limit = count(input, "limit").unwrap_or(READ_DEFAULT_LINES);
    let total = content.lines().count();
    let mut out = String::new();
    let mut shown_lines = 0;
    for line in content.lines().skip(offset - 1).take(limit) {
        if out.len() + line.len() + 1 > READ_MAX_BYTES {
            break;
        }
        out.push_str(line);
        out.push('\n');
        shown_lines += 1;
    }
    let last = offset - 1 + shown_lines;
    if offset > 1 || last < total {
        out.push_str(&format!(
            "[lines {offset}-{last} of {total}; call read with offset {} for more]\n",
            if last < total { last + 1 } else { 1 }
        ));
    }
    Ok(out)
}

fn ls(input: &Value, root: &Path) -> Outcome {
    let given = opt_text(input, "path").unwrap_or(".");
    let path = confine(root, given)?;
    let entries = fs::read_dir(&path).map_err(|e| format!("`{given}` cannot be listed: {e}"))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) { format!("{name}/") } else { name }
        })
        .collect();
    names.sort();
    let total = names.len();
    names.truncate(LS_MAX_ENTRIES);
    let mut out = names.join("\n");
    if total > LS_MAX_ENTRIES {
        out.push_str(&format!("\n[{} more entries not shown]", total - LS_MAX_ENTRIES));
    }
    if total == 0 {
        out.push_str("(empty)");
    }
    Ok(out)
}

fn pattern(text: &str) -> Result<Pattern, String> {
    Pattern::new(text).map_err(|e| format!("`{text}` is not a valid glob: {e}"))
}

const MATCH: MatchOptions =
    MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

/// Files under `dir` (not following symlinks out), skipping `.git`, in name order.
fn walk(dir: &Path) -> impl Iterator<Item = walkdir::DirEntry> {
    WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
}

fn glob(input: &Value, root: &Path, deadline: Instant) -> Outcome {
    let glob = pattern(text(input, "pattern")?)?;
    let given = opt_text(input, "path").unwrap_or(".");
    let dir = confine(root, given)?;
    let mut found = Vec::new();
    let mut more = false;
    for entry in walk(&dir) {
        if Instant::now() > deadline {
            return Err("glob ran out of time; narrow the pattern or the path".to_owned());
        }
        let rel = entry.path().strip_prefix(&dir).unwrap_or(entry.path());
        if glob.matches_path_with(rel, MATCH) {
            if found.len() == GLOB_MAX_RESULTS {
                more = true;
                break;
            }
            found.push(shown(root, entry.path()));
        }
    }
    if found.is_empty() {
        return Ok("(no matches)".to_owned());
    }
    let mut out = found.join("\n");
    if more {
        out.push_str(&format!("\n[stopped after {GLOB_MAX_RESULTS} paths; narrow the pattern]"));
    }
    Ok(out)
}

fn grep(input: &Value, root: &Path, deadline: Instant) -> Outcome {
    let source = text(input, "pattern")?;
    let ignore_case = input.get("ignore_case").and_then(Value::as_bool).unwrap_or(false);
    let regex = RegexBuilder::new(source)
        .case_insensitive(ignore_case)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("`{source}` is not a valid regular expression: {e}"))?;
    let filter = opt_text(input, "glob").map(pattern).transpose()?;
    let given = opt_text(input, "path").unwrap_or(".");
    let base = confine(root, given)?;
    let mut out = String::new();
    let mut matches = 0;
    for entry in walk(&base) {
        if Instant::now() > deadline {
            out.push_str("[grep ran out of time; results are partial]\n");
            break;
        }
        let rel = entry.path().strip_prefix(&base).unwrap_or(entry.path());
        if let Some(filter) = &filter {
            let name_only = entry.path().file_name().is_some_and(|n| filter.matches_with(&n.to_string_lossy(), MATCH));
            if !filter.matches_path_with(rel, MATCH) && !name_only {
                continue;
            }
        }
        if entry.metadata().map(|m| m.len() > GREP_MAX_FILE).unwrap_or(true) {
            continue;
        }
        let mut bytes = Vec::new();
        if fs::File::open(entry.path()).and_then(|mut f| f.read_to_end(&mut bytes)).is_err()
            || bytes.iter().take(8192).any(|b| *b == 0)
        {
            continue;
        }
        let content = String::from_utf8_lossy(&bytes);
        let name = shown(root, entry.path());
        for (index, line) in content.lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            if matches == GREP_MAX_MATCHES {
                out.push_str(&format!("[stopped after {GREP_MAX_MATCHES} matches; narrow the pattern]\n"));
                return Ok(out);
            }
            matches += 1;
            let line: String = line.chars().take(GREP_LINE_CHARS).collect();
            out.push_str(&format!("{name}:{}:{line}\n", index + 1));
        }
    }
    if matches == 0 {
        out.push_str("(no matches)");
    }
    Ok(out)
}

fn write(input: &Value, root: &Path) -> Outcome {
    let given = text(input, "path")?;
    let content = text(input, "content")?;
    if content.len() > WRITE_MAX_BYTES {
        return Err(format!("the content is larger than {}", size(WRITE_MAX_BYTES)));
    }
    let path = confine(root, given)?;
    if path.is_dir() {
        return Err(format!("`{given}` is a folder"));
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("the folder for `{given}` cannot be created: {e}"))?;
    }
    fs::write(&path, content).map_err(|e| format!("`{given}` cannot be written: {e}"))?;
    Ok(format!("wrote {} to {}", size(content.len()), shown(root, &path)))
}

fn edit(input: &Value, root: &Path) -> Outcome {
    let given = text(input, "path")?;
    let old = text(input, "old_string")?;
    let new = text(input, "new_string")?;
    let all = input.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
    if old.is_empty() {
        return Err("`old_string` is empty".to_owned());
    }
    let path = confine(root, given)?;
    let content = fs::read_to_string(&path).map_err(|e| format!("`{given}` cannot be read as text: {e}"))?;
    let found = content.matches(old).count();
    let updated = match (found, all) {
        (0, _) => return Err(format!("`old_string` does not occur in `{given}`; read the file and copy it exactly")),
        (1, _) | (_, true) => content.replace(old, new),
        (n, false) => {
            return Err(format!(
                "`old_string` occurs {n} times in `{given}`; add surrounding lines to make it unique, or set replace_all"
            ));
        }
    };
    if updated.len() > WRITE_MAX_BYTES {
        return Err(format!("the edited file would be larger than {}", size(WRITE_MAX_BYTES)));
    }
    fs::write(&path, updated).map_err(|e| format!("`{given}` cannot be written: {e}"))?;
    let noun = if found == 1 { "occurrence" } else { "occurrences" };
    Ok(format!("replaced {found} {noun} in {}", shown(root, &path)))
}
