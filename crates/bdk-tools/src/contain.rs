//! Containment of the processes a tool call starts (decision 0013). Every process a command or
//! `shell` call spawns carries a tag in its environment (`BDK_PROCESS_TAG`), inherited by all it
//! starts in turn, so one that leaves the process group (`setsid`, a double fork) is still found
//! through `/proc` and ended when its call ends. The tags of running calls sit in a ledger folder
//! under the state root, so the next start ends what a killed host left running. A global cap
//! bounds how many tool processes run at once.
//!
//! It does not spawn or read processes (`process.rs`) and knows nothing of tools.
//! A process that clears its environment before `exec` loses its tag: that is the limit of
//! this approach, documented in docs/formats.md.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rustix::process::{Pid, Signal, kill_process};
use tokio::process::Command;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The environment variable that marks a process as started by one tool call.
pub const TAG_VAR: &str = "BDK_PROCESS_TAG";

/// The ledger's folder under an agent's state directory.
pub const LEDGER_DIR: &str = "processes";

/// Default cap on tool processes running at once in this host: four per CPU, at least 8.
pub fn default_max_processes() -> usize {
    let cpus = std::thread::available_parallelism().map(usize::from).unwrap_or(2);
    (cpus * 4).max(8)
}

/// Most rounds of "find, stop" before the tagged processes are killed (a fork storm).
const STOP_ROUNDS: usize = 64;
/// How long the killed processes get to be gone before [`end_tagged`] returns. A SIGKILLed
/// process still shows (with its environment) until the kernel has run its exit, which on a
/// loaded machine can take longer than a few scans of `/proc`.
const KILL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

static PROCESS_SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
static MAX_PROCESSES: OnceLock<usize> = OnceLock::new();
static LEDGER: OnceLock<PathBuf> = OnceLock::new();
static NEXT_TAG: AtomicU64 = AtomicU64::new(0);

/// Sets the cap on tool processes running at once. Only the first setting (or first use)
/// counts; returns whether this call set it.
pub fn set_max_processes(max: usize) -> bool {
    let max = max.max(1);
    let set = PROCESS_SLOTS.set(Arc::new(Semaphore::new(max))).is_ok();
    if set {
        let _ = MAX_PROCESSES.set(max);
    }
    set
}

/// The cap on tool processes running at once in this host.
pub fn max_processes() -> usize {
    MAX_PROCESSES.get().copied().unwrap_or_else(default_max_processes)
}

fn slots() -> Arc<Semaphore> {
    Arc::clone(PROCESS_SLOTS.get_or_init(|| Arc::new(Semaphore::new(default_max_processes()))))
}

/// Waits for a slot under the global process cap. Dropping the permit frees the slot.
pub(crate) async fn admit() -> Option<OwnedSemaphorePermit> {
    slots().acquire_owned().await.ok()
}

/// Uses `dir` as the ledger of running tool calls, after ending the processes a previous host
/// left there. The first ledger set is used for new calls; every ledger given is swept. Returns
/// how many leftover processes were ended.
pub fn adopt_ledger(dir: &Path) -> io::Result<usize> {
    let ended = sweep_ledger(dir)?;
    let _ = LEDGER.set(dir.to_path_buf());
    Ok(ended)
}

/// Ends the processes of every call listed in the ledger `dir` and empties it. Returns how
/// many processes were ended.
pub fn sweep_ledger(dir: &Path) -> io::Result<usize> {
    fs::create_dir_all(dir)?;
    let mut tags = Vec::new();
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str() {
            tags.push(name.to_owned());
            files.push(entry.path());
        }
    }
    let ended = if tags.is_empty() { 0 } else { end_tagged(&tags) };
    for file in files {
        let _ = fs::remove_file(file);
    }
    if ended > 0 {
        tracing::warn!(processes = ended, ledger = %dir.display(), "ended tool processes a previous run left running");
    }
    Ok(ended)
}

/// The marks of one call's processes. Ends them all when dropped (or [`Contained::end`]).
#[derive(Debug)]
pub(crate) struct Contained {
    tag: String,
    entry: Option<PathBuf>,
    ended: bool,
    /// A sweep ran after the leader exited: nothing carrying the tag can be left.
    swept: AtomicBool,
}

impl Contained {
    /// Tags `command` so every process it starts can be found again, and notes the tag in the
    /// ledger when there is one.
    pub(crate) fn tag(command: &mut Command) -> Self {
        let n = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let tag = format!("bdk-{}-{n}-{nanos:08x}", std::process::id());
        command.env(TAG_VAR, &tag);
        let entry = LEDGER.get().map(|dir| dir.join(&tag));
        if let Some(entry) = &entry
            && let Err(error) = fs::write(entry, b"")
        {
            tracing::warn!(%error, path = %entry.display(), "cannot note a tool call in the process ledger");
        }
        Self { tag, entry, ended: false, swept: AtomicBool::new(false) }
    }

    /// Ends every process carrying this call's tag, on a blocking thread (it reads `/proc`).
    /// Call it once the call's leader process has exited: afterwards nothing can carry the tag.
    pub(crate) async fn sweep(&self) {
        let tag = self.tag.clone();
        let _ = tokio::task::spawn_blocking(move || end_tagged(&[tag])).await;
        self.swept.store(true, Ordering::Release);
    }

    /// Ends every process still carrying this call's tag (unless a sweep after the leader's
    /// exit already did), then forgets the tag.
    pub(crate) async fn end(mut self) {
        self.ended = true;
        let tag = std::mem::take(&mut self.tag);
        let entry = self.entry.take();
        if self.swept.load(Ordering::Acquire) {
            if let Some(entry) = entry {
                let _ = fs::remove_file(entry);
            }
            return;
        }
        let _ = tokio::task::spawn_blocking(move || finish(&tag, entry)).await;
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let tag = std::mem::take(&mut self.tag);
        let entry = self.entry.take();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || finish(&tag, entry));
            }
            Err(_) => finish(&tag, entry),
        }
    }
}

fn finish(tag: &str, entry: Option<PathBuf>) {
    end_tagged(&[tag.to_owned()]);
    if let Some(entry) = entry {
        let _ = fs::remove_file(entry);
    }
}

/// Ends every process carrying one of `tags`: first stops them (so a fork storm cannot outrun
/// the search), then kills them and waits (up to [`KILL_GRACE`]) until none is left, so a
/// caller that returns afterwards leaves nothing running. Returns how many were found.
pub fn end_tagged(tags: &[String]) -> usize {
    let wanted: Vec<Vec<u8>> = tags.iter().map(|t| format!("{TAG_VAR}={t}").into_bytes()).collect();
    let me = std::process::id();
    let mut seen: HashSet<i32> = HashSet::new();
    for _ in 0..STOP_ROUNDS {
        let found: Vec<i32> = tagged(&wanted, me).into_iter().filter(|pid| !seen.contains(pid)).collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            signal(pid, Signal::STOP);
            seen.insert(pid);
        }
    }
    for pid in &seen {
        signal(*pid, Signal::KILL);
    }
    let deadline = std::time::Instant::now() + KILL_GRACE;
    loop {
        let found = tagged(&wanted, me);
        if found.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            // Not gone yet (a process stuck in the kernel): say so rather than claim an end.
            tracing::warn!(pids = ?found, "tool processes still present {KILL_GRACE:?} after SIGKILL");
            break;
        }
        for pid in found {
            signal(pid, Signal::KILL);
            seen.insert(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    seen.len()
}

fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        // ESRCH: it ended meanwhile. EPERM: not ours.
        let _ = kill_process(pid, signal);
    }
}

/// Pids whose environment holds one of the `wanted` `NAME=value` entries (not `me`). A zombie
/// or a process of another user has no readable environment and is skipped.
fn tagged(wanted: &[Vec<u8>], me: u32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(environ) = fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|b| *b == 0).any(|var| wanted.iter().any(|w| w.as_slice() == var))
            && let Ok(pid) = i32::try_from(pid)
        {
            out.push(pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cap_has_a_floor() {
        assert!(default_max_processes() >= 8);
    }

    #[test]
    fn an_unknown_tag_ends_nothing() {
        assert_eq!(end_tagged(&["bdk-no-such-tag".to_owned()]), 0);
    }
}

/// The containment of one long-lived process tree started outside this crate (an MCP server):
/// the same tag and ledger entry as a tool call's, so [`Containment::end`] (or dropping it)
/// ends every process the tree started, and a killed host's leftovers are ended at the next
/// start.
#[derive(Debug)]
pub struct Containment(Contained);

impl Containment {
    /// Tags `command` (set before it is spawned).
    pub fn tag(command: &mut Command) -> Self {
        Self(Contained::tag(command))
    }

    /// Ends every process still carrying the tag.
    pub async fn end(self) {
        self.0.end().await;
    }
}
