//! Opening an event log after a crash: scan every line, keep the longest valid prefix, and cut
//! off a torn final write. Damage followed by valid events is corruption, reported, not repaired.
//!
//! A line is valid when it ends in `\n`, parses as JSON, and carries `index` equal to its line
//! number. Appends are acknowledged only after fsync, so bytes past the last valid line were
//! never acknowledged and dropping them loses nothing anyone was told about.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

use super::syncs::SyncCounters;
use crate::error::{Error, Result, is_write_fault};

/// Every this-many events the log remembers a byte offset, so replay can seek.
pub(crate) const CHECKPOINT_EVERY: u64 = 128;

/// The state of a log file after recovery.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub len: u64,
    pub next_index: u64,
    /// `checkpoints[k]` is the byte offset of the line with index `k * CHECKPOINT_EVERY`.
    pub checkpoints: Vec<u64>,
    /// Bytes cut off the end of the file (0 when it was intact).
    pub dropped_bytes: u64,
    /// The torn tail could not be cut (the file system takes no writes): the file is longer
    /// than `len` until the writer cuts it.
    pub cut_pending: bool,
}

#[derive(Deserialize)]
struct Head {
    index: u64,
}

/// Scans the log at `path` (creating it if missing), truncates a torn tail and returns its state.
///
/// The scan reads only, so a log on a file system that takes no writes (full, read-only) still
/// opens for reading: a torn tail that cannot be cut then stays in the file, past `len`, and is
/// reported in `cut_pending` for the writer to cut before its first write.
pub(crate) fn recover(path: &Path, syncs: &SyncCounters) -> Result<Recovered> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => create(path, syncs)?,
        Err(e) => return Err(Error::io(path, e)),
    };
    let scan = scan(&file).map_err(|e| Error::io(path, e))?;
    if let Some((offset, reason)) = scan.valid_after_damage {
        return Err(Error::Corrupt { path: path.to_path_buf(), offset, reason });
    }
    let mut dropped_bytes = 0;
    let mut cut_pending = false;
    if let Some((offset, reason)) = scan.first_damage {
        dropped_bytes = scan.total - offset;
        let cut = OpenOptions::new().write(true).open(path).and_then(|file| {
            file.set_len(offset)?;
            syncs.data(&file)
        });
        match cut {
            Ok(()) => {}
            Err(e) if is_write_fault(&e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot cut a torn tail yet: the log opens read-only");
                cut_pending = true;
            }
            Err(e) => return Err(Error::io(path, e)),
        }
        tracing::warn!(
            path = %path.display(),
            kept_events = scan.next_index,
            dropped_bytes,
            reason = %reason,
            "dropped a torn final write from the event log"
        );
    }
    Ok(Recovered {
        len: scan.valid_len,
        next_index: scan.next_index,
        checkpoints: scan.checkpoints,
        dropped_bytes,
        cut_pending,
    })
}

/// Creates a missing log and makes its directory entry durable before anything is
/// acknowledged in it.
fn create(path: &Path, syncs: &SyncCounters) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    if let Some(dir) = path.parent() {
        syncs.dir(dir).map_err(|e| Error::io(dir, e))?;
    }
    Ok(file)
}

struct Scan {
    total: u64,
    valid_len: u64,
    next_index: u64,
    checkpoints: Vec<u64>,
    first_damage: Option<(u64, String)>,
    valid_after_damage: Option<(u64, String)>,
}

fn scan(file: &File) -> io::Result<Scan> {
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut line = Vec::with_capacity(1024);
    let mut scan = Scan {
        total: 0,
        valid_len: 0,
        next_index: 0,
        checkpoints: Vec::new(),
        first_damage: None,
        valid_after_damage: None,
    };
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            break;
        }
        let offset = scan.total;
        scan.total += n;
        let complete = line.last() == Some(&b'\n');
        let head = if complete { serde_json::from_slice::<Head>(&line).ok() } else { None };
        match (&scan.first_damage, head) {
            (None, Some(head)) if head.index == scan.next_index => {
                if scan.next_index.is_multiple_of(CHECKPOINT_EVERY) {
                    scan.checkpoints.push(offset);
                }
                scan.next_index += 1;
                scan.valid_len = scan.total;
            }
            (None, Some(head)) => {
                let reason = format!("line has index {} where {} was expected", head.index, scan.next_index);
                scan.first_damage = Some((offset, reason));
            }
            (None, None) => {
                let reason = if complete { "line is not a valid event" } else { "final line is incomplete" };
                scan.first_damage = Some((offset, reason.to_owned()));
            }
            (Some((damage, reason)), Some(_)) => {
                let reason = format!("{reason} (at byte {damage}), and valid events follow it");
                scan.valid_after_damage = Some((*damage, reason));
                break;
            }
            (Some(_), None) => {}
        }
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn line(index: u64) -> String {
        format!(
            "{{\"type\":\"session.waiting\",\"index\":{index},\"sessionId\":\"ses_a\",\"at\":\"2025-01-01T00:00:00.000Z\",\"data\":{{}}}}\n"
        )
    }

    #[test]
    fn intact_logs_are_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let content: String = (0..300).map(line).collect();
        fs::write(&path, &content).unwrap();
        let r = recover(&path, &SyncCounters::default()).unwrap();
        assert_eq!((r.next_index, r.len, r.dropped_bytes), (300, content.len() as u64, 0));
        let offset = |n: u64| (0..n).map(|i| line(i).len() as u64).sum::<u64>();
        assert_eq!(r.checkpoints, vec![0, offset(128), offset(256)]);
    }

    #[test]
    fn missing_logs_are_created_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let r = recover(&path, &SyncCounters::default()).unwrap();
        assert_eq!((r.next_index, r.len), (0, 0));
        assert!(path.exists());
    }

    #[test]
    fn trailing_garbage_lines_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let good = format!("{}{}", line(0), line(1));
        fs::write(&path, format!("{good}\0\0\0\n\0\0{{\"ty")).unwrap();
        let r = recover(&path, &SyncCounters::default()).unwrap();
        assert_eq!(r.next_index, 2);
        assert_eq!(fs::read_to_string(&path).unwrap(), good);
    }

    #[test]
    fn damage_before_valid_events_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let content = format!("{}not json\n{}", line(0), line(2));
        fs::write(&path, &content).unwrap();
        let err = recover(&path, &SyncCounters::default()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { offset, .. } if offset == line(0).len() as u64), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), content, "nothing is cut");
    }

    #[test]
    fn out_of_order_indices_are_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        fs::write(&path, format!("{}{}", line(0), line(5))).unwrap();
        let r = recover(&path, &SyncCounters::default()).unwrap();
        assert_eq!(r.next_index, 1);
        assert_eq!(r.dropped_bytes, line(5).len() as u64);
    }

    mod props {
        use proptest::prelude::*;

        use super::*;

        /// A valid line `index` whose payload is `pad` bytes long.
        fn padded(index: u64, pad: usize) -> String {
            let data = "x".repeat(pad);
            format!(
                "{{\"type\":\"message.appended\",\"index\":{index},\"sessionId\":\"ses_a\",\"at\":\"2025-01-01T00:00:00.000Z\",\"data\":{{\"delta\":\"{data}\"}}}}\n"
            )
        }

        proptest! {
            /// Any torn tail (the log cut at any byte, then any partial write without a newline)
            /// recovers exactly the complete lines before the cut, truncates the file to them,
            /// and a second recovery finds nothing to drop.
            #[test]
            fn any_torn_tail_keeps_exactly_the_complete_lines(
                pads in prop::collection::vec(0usize..40, 0..20),
                cut in any::<prop::sample::Index>(),
                torn in prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..64),
            ) {
                let lines: Vec<String> = pads.iter().enumerate().map(|(i, pad)| padded(i as u64, *pad)).collect();
                let content = lines.concat().into_bytes();
                let cut = cut.index(content.len() + 1);
                let mut written = content[..cut].to_vec();
                written.extend_from_slice(&torn);

                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("events.ndjson");
                fs::write(&path, &written).unwrap();
                let r = recover(&path, &SyncCounters::default()).unwrap();

                let mut kept = 0u64;
                let mut kept_len = 0usize;
                for line in &lines {
                    if kept_len + line.len() > cut {
                        break;
                    }
                    kept_len += line.len();
                    kept += 1;
                }
                prop_assert_eq!(r.next_index, kept);
                prop_assert_eq!(r.len, kept_len as u64);
                prop_assert_eq!(r.dropped_bytes, (written.len() - kept_len) as u64);
                prop_assert_eq!(fs::read(&path).unwrap(), content[..kept_len].to_vec());

                let again = recover(&path, &SyncCounters::default()).unwrap();
                prop_assert_eq!((again.next_index, again.len, again.dropped_bytes), (kept, kept_len as u64, 0));
            }
        }
    }
}
