//! `bdk serve --dev` hot reload, the CLI's half: watches the served folders and, once a change
//! has settled, discovers and validates again. With no error it hands the discovery to the
//! server's [`Reloader`], which swaps the definitions new turns use; with errors it prints
//! them as `validate` does and the last good definitions keep serving. The server's status
//! (`GET /v1/health` `reload`) records either way.
//!
//! Watching polls the files' sizes and modification times (see decision note "dev hot reload"):
//! no dependency and no OS watch limits, for a loop that runs only under `--dev`. State
//! directories, dot folders and dependency folders (`node_modules`, `__pycache__`, `target`,
//! `venv`) are not watched. Production `serve` does not start it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bdk_server::reload::{Outcome, Reloader};

use crate::Embed;
use crate::report;

/// How often the folders are scanned for a change.
const POLL: Duration = Duration::from_millis(250);
/// A change is reloaded once two scans this far apart agree (an editor's save settles).
const DEBOUNCE: Duration = Duration::from_millis(200);
/// Folders never watched (besides dot folders and the agents' state directories).
const SKIPPED: &[&str] = &["node_modules", "__pycache__", "target", "venv"];
/// Most files one scan looks at; a folder tree beyond it is watched only in part (and says so).
const MAX_FILES: usize = 20_000;

/// Size and modification time of every watched file.
type Fingerprint = BTreeMap<PathBuf, (u64, Option<SystemTime>)>;

/// What the watcher scans and how it reloads.
pub struct Watch {
    pub reloader: Arc<Reloader>,
    /// The `--dir` folders, discovered again on a change.
    pub dirs: Vec<PathBuf>,
    /// Never scanned: the agents' state directories.
    pub skip: Vec<PathBuf>,
    pub embed: Embed,
}

/// Starts watching on the current runtime; the task ends with it.
pub fn spawn(mut watch: Watch) {
    // Absolute, so state directories are recognised under any spelling of `--dir`.
    watch.skip = watch.skip.iter().map(|p| absolute(p)).collect();
    let dirs: Vec<String> = watch.dirs.iter().map(|d| d.display().to_string()).collect();
    tracing::info!(dirs = %dirs.join(", "), "watching for changes (--dev): new turns get the reloaded definitions");
    tokio::spawn(run(Arc::new(watch)));
}

async fn run(watch: Arc<Watch>) {
    let mut roots = roots(&watch.dirs, &[]);
    let mut seen = scan(&watch, &roots).await;
    loop {
        tokio::time::sleep(POLL).await;
        let mut latest = scan(&watch, &roots).await;
        if latest == seen {
            continue;
        }
        loop {
            tokio::time::sleep(DEBOUNCE).await;
            let again = scan(&watch, &roots).await;
            if again == latest {
                break;
            }
            latest = again;
        }
        let task = watch.clone();
        match tokio::task::spawn_blocking(move || reload(&task)).await {
            Ok(extensions) => roots = self::roots(&watch.dirs, &extensions),
            Err(error) => tracing::error!(%error, "the reload task failed"),
        }
        // What the reload itself may have touched (nothing under the watched roots, normally)
        // does not count as a change.
        seen = scan(&watch, &roots).await;
    }
}

/// The `--dir` folders and the extension folders that lie outside them, absolute.
fn roots(dirs: &[PathBuf], extensions: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = dirs.iter().map(|d| absolute(d)).collect();
    for path in extensions.iter().map(|p| absolute(p)) {
        if !roots.iter().any(|root| path.starts_with(root)) {
            roots.push(path);
        }
    }
    roots
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

async fn scan(watch: &Arc<Watch>, roots: &[PathBuf]) -> Fingerprint {
    let watch = watch.clone();
    let roots = roots.to_vec();
    tokio::task::spawn_blocking(move || fingerprint(&roots, &watch.skip)).await.unwrap_or_default()
}

/// Every file under `roots`, skipping `skip` and the folders no project file lives in.
fn fingerprint(roots: &[PathBuf], skip: &[PathBuf]) -> Fingerprint {
    let mut out = Fingerprint::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if !skipped(&path, skip) {
                    stack.push(path);
                }
            } else if out.len() < MAX_FILES {
                out.insert(path, (meta.len(), meta.modified().ok()));
            }
        }
    }
    out
}

fn skipped(dir: &Path, skip: &[PathBuf]) -> bool {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    name.starts_with('.') || SKIPPED.contains(&name) || skip.iter().any(|s| s == dir)
}

/// Discovers again and applies what it found; prints what happened on stderr. Returns the
/// extension folders of the discovery (watched from now on).
fn reload(watch: &Watch) -> Vec<PathBuf> {
    let discovery = watch.embed.discover(&watch.dirs);
    let extensions =
        discovery.projects.iter().flat_map(|p| p.extensions.iter().map(|e| e.path.clone())).collect::<Vec<_>>();
    let outcome = watch.reloader.apply(&discovery);
    match outcome {
        Outcome::Failed { error: None } => {
            eprint!("{}", report::diagnostics_text(&discovery));
            eprintln!("error: reload failed: fix the errors above; the last good definitions keep serving");
        }
        Outcome::Failed { error: Some(error) } => {
            eprintln!("error: reload failed: {error}; the last good definitions keep serving");
        }
        Outcome::Swapped { agents, needs_restart } => {
            for diagnostic in discovery.all_diagnostics() {
                eprintln!("{}", report::one_line(diagnostic));
            }
            if agents.is_empty() {
                eprintln!("reloaded: no mounted agent was found again; nothing changed");
            } else {
                eprintln!("reloaded: {} (new turns use the new definitions)", agents.join(", "));
            }
            for note in needs_restart {
                eprintln!("note: {note}");
            }
        }
    }
    extensions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_skips_state_dot_and_dependency_folders() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for sub in ["bot/tools", ".bdk", "node_modules/x", "state"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("bot/tools/a.toml"), "a").unwrap();
        std::fs::write(root.join(".bdk/log"), "x").unwrap();
        std::fs::write(root.join("node_modules/x/y.js"), "x").unwrap();
        std::fs::write(root.join("state/s.json"), "x").unwrap();
        let seen = fingerprint(std::slice::from_ref(&root), &[root.join("state")]);
        let files: Vec<_> = seen.keys().map(|p| p.strip_prefix(&root).unwrap().to_path_buf()).collect();
        assert_eq!(files, vec![PathBuf::from("bot/tools/a.toml")]);
    }

    #[test]
    fn a_changed_size_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::write(root.join("a.md"), "a").unwrap();
        let before = fingerprint(std::slice::from_ref(&root), &[]);
        std::fs::write(root.join("a.md"), "ab").unwrap();
        assert_ne!(before, fingerprint(std::slice::from_ref(&root), &[]));
    }

    #[test]
    fn extension_folders_outside_the_dirs_are_roots() {
        let dirs = vec![PathBuf::from("/p")];
        let got = roots(&dirs, &[PathBuf::from("/p/ext"), PathBuf::from("/q/ext")]);
        assert_eq!(got, vec![PathBuf::from("/p"), PathBuf::from("/q/ext")]);
    }
}
