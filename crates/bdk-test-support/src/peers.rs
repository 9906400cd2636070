//! Real interoperability peers (an MCP server from npm, a Python MCP client from PyPI, a
//! headless Chromium) installed by the project's own scripts, once per checkout.
//!
//! A peer is a script `scripts/peers/<name>.sh DEST`: it installs into `DEST` (under
//! `target/peers/<name>`) and exits 0, or exits 77 when a prerequisite the project cannot
//! install itself is absent (no `node`, no `python3`), printing why. Any other exit is a
//! failure of the test that asked: a peer that should install and does not must not turn into
//! a silent pass. The first caller installs under a lock; later callers (other test binaries
//! too) find the `.ready` stamp and return at once.
//!
//! ```no_run
//! let Some(dir) = bdk_test_support::peers::require("mcp-everything") else { return };
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Exit status a peer script uses for "a prerequisite is missing here: skip".
pub const SKIP_EXIT: i32 = 77;

/// How long one install may take before the test fails (npm and pip on a slow link).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// What [`ensure`] found.
#[derive(Debug)]
pub enum Peer {
    /// Installed; the folder the script filled.
    Ready(PathBuf),
    /// A prerequisite is absent on this machine; the script's reason.
    Missing(String),
}

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Install `name` if it is not installed yet, and say where it is.
///
/// # Panics
/// When the script is missing, fails, or runs past [`INSTALL_TIMEOUT`]: the test that needs the
/// peer fails with the script's output.
pub fn ensure(name: &str) -> Peer {
    let root = workspace_root();
    let script = root.join("scripts/peers").join(format!("{name}.sh"));
    assert!(script.is_file(), "no peer script {}", script.display());
    let base =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target")).join("peers");
    let dest = base.join(name);
    let ready = dest.join(".ready");
    if ready.is_file() {
        return Peer::Ready(dest);
    }
    fs::create_dir_all(&base).unwrap_or_else(|e| panic!("create {}: {e}", base.display()));
    let _lock = Lock::take(&base.join(format!("{name}.lock")));
    if ready.is_file() {
        return Peer::Ready(dest);
    }
    fs::create_dir_all(&dest).unwrap_or_else(|e| panic!("create {}: {e}", dest.display()));
    let log = dest.join("install.log");
    let out = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
    let err = out.try_clone().unwrap_or_else(|e| panic!("dup log: {e}"));
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(&dest)
        .current_dir(&root)
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("wait: {e}")) {
            break status;
        }
        if started.elapsed() > INSTALL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("peer {name}: install ran past {INSTALL_TIMEOUT:?}; log: {}", tail(&log));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    match status.code() {
        Some(0) => {
            File::create(&ready).unwrap_or_else(|e| panic!("stamp {}: {e}", ready.display()));
            Peer::Ready(dest)
        }
        Some(SKIP_EXIT) => Peer::Missing(tail(&log)),
        _ => panic!("peer {name}: install failed ({status}); log:\n{}", tail(&log)),
    }
}

/// [`ensure`], printing a loud skip notice and returning `None` when a prerequisite is absent.
pub fn require(name: &str) -> Option<PathBuf> {
    match ensure(name) {
        Peer::Ready(dir) => Some(dir),
        Peer::Missing(why) => {
            let line = format!("SKIPPED: peer {name} is not available here: {}", why.trim());
            eprintln!("\n{}\n{line}\n{}\n", "=".repeat(line.len()), "=".repeat(line.len()));
            None
        }
    }
}

fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let start = text.len().saturating_sub(4000);
    let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    text[start..].to_string()
}

/// An exclusive lock held by creating a file; stale locks (a killed test) expire.
struct Lock(PathBuf);

impl Lock {
    fn take(path: &Path) -> Lock {
        let started = Instant::now();
        loop {
            match OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(mut file) => {
                    let _ = writeln!(file, "{}", std::process::id());
                    return Lock(path.to_path_buf());
                }
                Err(_) if stale(path) => {
                    let _ = fs::remove_file(path);
                }
                Err(_) if started.elapsed() > INSTALL_TIMEOUT => {
                    panic!("peer lock {} held past {INSTALL_TIMEOUT:?}", path.display())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    }
}

/// A lock whose holder process is gone.
fn stale(path: &Path) -> bool {
    let Ok(text) = fs::read_to_string(path) else { return false };
    match text.trim().parse::<u32>() {
        Ok(pid) => !Path::new(&format!("/proc/{pid}")).exists(),
        Err(_) => false,
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
