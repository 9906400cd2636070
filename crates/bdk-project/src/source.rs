//! Reading project files without ever panicking: size caps, UTF-8 checks, directories where
//! files belong, unreadable entries and symlink loops all become diagnostics.

use std::fs;
use std::path::{Path, PathBuf};

use crate::diag::{Code, Diagnostics};

/// Definition files (TOML) larger than this are refused unread.
pub const MAX_DEFINITION_BYTES: u64 = 1024 * 1024;
/// Markdown (instructions, skills, schedules) larger than this is refused unread.
pub const MAX_MARKDOWN_BYTES: u64 = 1024 * 1024;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

/// A file read as UTF-8, with its path relative to the project for diagnostics.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub rel: String,
    pub text: String,
}

impl SourceFile {
    /// The line and column of a byte offset (columns count characters).
    pub fn pos_at(&self, offset: usize) -> Pos {
        pos_in(&self.text, offset)
    }

    /// Best-effort position of a key: the first line whose first token is `key` followed by
    /// `=` or `:`, or a `[key]`/`[[key]]` table header. Used for semantic diagnostics on
    /// values that parsed fine.
    pub fn pos_of_key(&self, key: &str) -> Option<Pos> {
        let mut offset = 0;
        for line in self.text.split_inclusive('\n') {
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            let bare = trimmed.trim_start_matches('[').trim_start_matches('"');
            if let Some(rest) = bare.strip_prefix(key) {
                let rest = rest.trim_start_matches('"').trim_start();
                if rest.starts_with('=') || rest.starts_with(':') || rest.starts_with(']') || rest.starts_with('.') {
                    return Some(self.pos_at(offset + indent));
                }
            }
            offset += line.len();
        }
        None
    }
}

pub fn pos_in(text: &str, offset: usize) -> Pos {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    Pos { line: u32::try_from(line).unwrap_or(u32::MAX), column: u32::try_from(column).unwrap_or(u32::MAX) }
}

/// Turns absolute paths into project-relative, `/`-separated names.
#[derive(Debug, Clone)]
pub struct Rel {
    root: PathBuf,
}

impl Rel {
    pub fn new(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    pub fn of(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
    }
}

/// Reads `path` as UTF-8 text, refusing files over `limit` bytes.
pub fn read_text(path: &Path, rel: &Rel, limit: u64, diags: &mut Diagnostics) -> Option<SourceFile> {
    let name = rel.of(path);
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) => {
            diags.report(Code::IoError, Some(&name), None, format!("cannot be read: {err}"));
            return None;
        }
    };
    if meta.is_dir() {
        diags.report(Code::ExpectedFile, Some(&name), None, "is a directory, expected a file");
        return None;
    }
    if !meta.is_file() {
        // FIFOs, sockets and devices would block or never end: never open them.
        diags.report(Code::ExpectedFile, Some(&name), None, "is a FIFO, socket or device, expected a regular file");
        return None;
    }
    if meta.len() > limit {
        diags.report(
            Code::FileTooLarge,
            Some(&name),
            None,
            format!("is {} bytes, over the {} byte limit for this kind of file", meta.len(), limit),
        );
        return None;
    }
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) => {
            diags.report(Code::IoError, Some(&name), None, format!("cannot be read: {err}"));
            return None;
        }
    };
    // A leading byte-order mark is not content: dropped, so a BOM-only file is empty and
    // columns on line 1 match what an editor shows.
    let bytes = match bytes.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    match String::from_utf8(bytes) {
        Ok(text) => Some(SourceFile { path: path.to_path_buf(), rel: name, text }),
        Err(err) => {
            let valid = err.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(err.as_bytes());
            let pos = pos_in(&text, valid);
            diags.report(Code::NotUtf8, Some(&name), Some(pos), format!("is not valid UTF-8 (byte {valid})"));
            None
        }
    }
}

/// One directory entry, classified without following it twice.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    pub name: String,
    pub is_dir: bool,
}

impl Entry {
    /// The file name without its last extension.
    pub fn stem(&self) -> &str {
        self.name.rsplit_once('.').map_or(self.name.as_str(), |(stem, _)| stem)
    }

    pub fn extension(&self) -> Option<&str> {
        self.name.rsplit_once('.').map(|(_, ext)| ext)
    }
}

/// Lists a directory sorted by name. Hidden entries (`.name`) are skipped. Entries that cannot be
/// inspected (broken symlinks, loops, permissions) are reported and left out.
pub fn list_dir(dir: &Path, rel: &Rel, diags: &mut Diagnostics) -> Vec<Entry> {
    let iter = match fs::read_dir(dir) {
        Ok(iter) => iter,
        Err(err) => {
            let name = rel.of(dir);
            diags.report(Code::IoError, Some(&name), None, format!("cannot be listed: {err}"));
            return Vec::new();
        }
    };
    let mut entries = Vec::new();
    for item in iter {
        let item = match item {
            Ok(item) => item,
            Err(err) => {
                let name = rel.of(dir);
                diags.report(Code::IoError, Some(&name), None, format!("cannot be listed: {err}"));
                continue;
            }
        };
        let path = item.path();
        let Some(name) = item.file_name().to_str().map(str::to_owned) else {
            let shown = rel.of(&path);
            diags.report(Code::InvalidName, Some(&shown), None, "file name is not valid UTF-8");
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        match fs::metadata(&path) {
            Ok(meta) => entries.push(Entry { path, name, is_dir: meta.is_dir() }),
            Err(err) => {
                let shown = rel.of(&path);
                diags.report(Code::IoError, Some(&shown), None, format!("cannot be inspected: {err}"));
            }
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// Every regular file under `dir`, recursively, relative to `dir`, sorted. Hidden entries
/// (`.name`, and everything under a hidden folder) are skipped, as [`list_dir`] skips them.
/// Follows symlinks and reports loops instead of walking them; FIFOs, sockets and devices are
/// reported and left out, since whoever reads or copies them later would block.
pub fn walk_files(dir: &Path, rel: &Rel, diags: &mut Diagnostics) -> Vec<String> {
    let mut files = Vec::new();
    let walk = walkdir::WalkDir::new(dir)
        .follow_links(true)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for item in walk {
        match item {
            Ok(entry) if entry.file_type().is_file() => {
                if let Ok(inner) = entry.path().strip_prefix(dir) {
                    files.push(Rel::new(Path::new("")).of(inner));
                }
            }
            Ok(entry) if !entry.file_type().is_dir() => {
                let shown = rel.of(entry.path());
                diags.report(
                    Code::ExpectedFile,
                    Some(&shown),
                    None,
                    "is a FIFO, socket or device, expected a regular file",
                );
            }
            Ok(_) => {}
            Err(err) => {
                let shown = err.path().map_or_else(|| rel.of(dir), |p| rel.of(p));
                // walkdir's own message names the path again; keep only the cause.
                let message = if err.loop_ancestor().is_some() {
                    "is a symlink loop".to_owned()
                } else if let Some(io) = err.io_error() {
                    format!("cannot be read: {io}")
                } else {
                    format!("cannot be read: {err}")
                };
                diags.report(Code::IoError, Some(&shown), None, message);
            }
        }
    }
    files
}
