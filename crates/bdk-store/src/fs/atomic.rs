//! File replacement through a temp file: durable ([`write_atomic`]: fsync it, rename it over
//! the target, fsync the directory) or not ([`replace_atomic`]: swapped in, no sync). Readers see
//! the old content or the new, never a mix.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::syncs::SyncCounters;

/// Replaces `path` with `bytes` atomically for readers, without fsync. A process kill leaves
/// the old content or the new; a power loss may also leave the file empty or torn. For data the
/// event log can rebuild (`session.json`, which `sessions.rs` reads back from the log then).
///
/// On Linux the new file is swapped in with `renameat2(RENAME_EXCHANGE)` and the old one
/// unlinked, rather than renamed over: ext4 (`auto_da_alloc`, on by default) starts writing a
/// file's data out when it is renamed over another file, which put a disk write on every turn's
/// path for a file that needs no durability of its own (see decision 0039). Where the swap is
/// not supported, or nothing is there to swap with, it is a plain rename.
pub(crate) fn replace_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        if swapped(&tmp, path) {
            // `tmp` names the old content now.
            return fs::remove_file(&tmp);
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Exchanges `a` and `b` atomically; `false` when that cannot be done here (`b` missing, a
/// file system or platform without the call), and nothing changed.
#[cfg(target_os = "linux")]
fn swapped(a: &Path, b: &Path) -> bool {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn swapped(_a: &Path, _b: &Path) -> bool {
    false
}

/// Creates `path` (which must not exist) with `bytes`, in place and without a sync: readers may
/// see it empty or partly written until this returns.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OpenOptions::new().write(true).create_new(true).open(path)?.write_all(bytes)
}

/// Replaces `path` with `bytes` atomically and durably: one file sync, one directory sync.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], syncs: &SyncCounters) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let tmp = temp_path(path);
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        syncs.data(&file)?;
        fs::rename(&tmp, path)?;
        syncs.dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A unique hidden sibling of `path`: `.<name>.<pid>.<n>.tmp`.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Read once: `std::process::id` is a system call each time.
    static PID: OnceLock<u32> = OnceLock::new();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = *PID.get_or_init(std::process::id);
    path.with_file_name(format!(".{name}.{pid}.{n}.tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        let syncs = SyncCounters::default();
        write_atomic(&path, b"one", &syncs).unwrap();
        write_atomic(&path, b"two", &syncs).unwrap();
        assert_eq!((syncs.stats().file_syncs, syncs.stats().dir_syncs), (2, 2));
        assert_eq!(fs::read(&path).unwrap(), b"two");
        replace_atomic(&path, b"three").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"three");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("session.json")]);
    }

    /// With nothing to swap with, the replacement creates the file (a plain rename).
    #[test]
    fn replacing_a_missing_file_creates_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        replace_atomic(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        replace_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("session.json")]);
    }
}
