//! A session's record on disk, in two places: `session.json`, and, in the event log, the line of
//! the first event of each commit that changed it (under the key `sessionRecord`).
//!
//! The log is the durable copy: the record of an accepted message (its rotated continuation
//! token, status `running`) and a new session's first record are written inside the same group
//! commit as the events, so one `fdatasync` makes both durable. `session.json` is then replaced
//! without a sync (rename only): a cache of the newest record, which a power loss (or a kill
//! between the log's sync and the rename) can leave behind.
//!
//! Which copy is newer is decided by byte offsets in the log. `session.json` carries `logBytes`:
//! it accounts for every record embedded in the log before that offset. A record embedded at an
//! offset of `logBytes` or more is newer and wins. The writer sets `logBytes` to the end of the
//! line it embedded the record in; `update` and `update_derived` set it to the log's durable
//! length at the time (every record committed so far is older than what they write). So reading
//! a record costs one `stat` of the log besides the file: when the log is no longer than
//! `logBytes`, `session.json` is current; otherwise only the bytes past `logBytes` are scanned.
//!
//! Event readers are unaffected: an event line parses as the event whatever other keys it has,
//! and the in-memory events (tail, followers) never carry the record.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic::replace_atomic;
use super::open_index;
use crate::error::{Error, Result};
use crate::record::SessionRecord;

/// The key an event line carries its session's record under.
pub(crate) const EMBED_KEY: &str = "sessionRecord";
/// The key of `session.json` that says how much of the log it accounts for.
const LOG_BYTES: &str = "logBytes";

/// The files one session's record lives in besides the log: `session.json` and its marker in
/// the index of open sessions, and what the open log knows of that marker.
#[derive(Debug, Clone)]
pub(crate) struct RecordFiles {
    pub session_json: PathBuf,
    pub open_marker: PathBuf,
    /// This open log made the marker (or found it made) and keeps it while the session goes
    /// from turn to turn; [`RecordFiles::release_marker`] removes it once the log is released.
    pub marked: bool,
    /// The newest record written through this log is settled (`waiting`, `completed`, `failed`).
    pub settled: bool,
}

impl RecordFiles {
    pub fn new(session_json: PathBuf, open_marker: PathBuf) -> Self {
        RecordFiles { session_json, open_marker, marked: false, settled: false }
    }

    /// Replaces `session.json` with `record`, accounting for the log up to `log_bytes`, without
    /// a sync (the record is durable in the log, or derived from it). The open-session marker is
    /// made first when the record may have an open turn and this log has not made it. After a
    /// settled record a marker this log made stays while the log is open (the next message
    /// would make it again; `open_index.rs` says why a marker may outlive its turn) and goes
    /// when the log is released; one it did not make goes at once.
    pub fn replace(&mut self, record: &SessionRecord, log_bytes: u64) -> Result<()> {
        let bytes = encode(record, Some(log_bytes))?;
        let open = open_index::is_open(record.status);
        if open && !self.marked {
            open_index::mark_at(&self.open_marker)?;
            self.marked = true;
        }
        replace_atomic(&self.session_json, &bytes).map_err(|e| Error::io(&self.session_json, e))?;
        self.settled = !open;
        if !open && !self.marked {
            open_index::unmark_at(&self.open_marker);
        }
        Ok(())
    }

    /// The log is being released: removes the marker it kept past a settled record.
    pub fn release_marker(&mut self) {
        if self.marked && self.settled {
            open_index::unmark_at(&self.open_marker);
            self.marked = false;
        }
    }
}

/// What reading a session's record needs to know of its log in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogView {
    /// Open here, and `session.json` holds its newest record: the log need not be read.
    Current,
    /// Open here, with this durable length: nothing past it is committed yet.
    Open(u64),
    /// Not open here: no append is in flight, so the file's length is the durable one.
    Closed,
}

#[derive(Serialize)]
struct OnDisk<'a> {
    #[serde(flatten)]
    record: &'a SessionRecord,
    #[serde(rename = "logBytes", skip_serializing_if = "Option::is_none")]
    log_bytes: Option<u64>,
}

/// `session.json`'s bytes for `record`.
pub(crate) fn encode(record: &SessionRecord, log_bytes: Option<u64>) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(&OnDisk { record, log_bytes }).map_err(Error::Encode)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Parses `session.json`: the record, and how much of the log it accounts for (`None` in a
/// file written before records were embedded in the log).
pub(crate) fn decode(bytes: &[u8]) -> serde_json::Result<(SessionRecord, Option<u64>)> {
    let mut record: SessionRecord = serde_json::from_slice(bytes)?;
    let log_bytes = record.extra.remove(LOG_BYTES).and_then(|v| v.as_u64());
    Ok((record, log_bytes))
}

/// Appends `record` to an event's encoded JSON object in `line` (no newline yet), under
/// [`EMBED_KEY`].
pub(crate) fn embed(line: &mut Vec<u8>, record: &SessionRecord) -> serde_json::Result<()> {
    debug_assert_eq!(line.last(), Some(&b'}'));
    line.pop();
    line.extend_from_slice(b",\"");
    line.extend_from_slice(EMBED_KEY.as_bytes());
    line.extend_from_slice(b"\":");
    serde_json::to_writer(&mut *line, record)?;
    line.push(b'}');
    Ok(())
}

#[derive(Deserialize)]
struct Embedded {
    #[serde(rename = "sessionRecord")]
    record: Option<SessionRecord>,
}

/// The newest record embedded in the log at `path` at or past byte `from` (a line start), and the
/// offset just past its line. Reads complete lines only, and none past `end` when it is set (the
/// durable length of an open log). A missing log has none.
pub(crate) fn newest_embedded(path: &Path, from: u64, end: Option<u64>) -> Result<Option<(SessionRecord, u64)>> {
    let io = |e| Error::io(path, e);
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    file.seek(SeekFrom::Start(from)).map_err(io)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::with_capacity(1024);
    let mut offset = from;
    let mut newest = None;
    let needle = format!("\"{EMBED_KEY}\":");
    loop {
        if end.is_some_and(|end| offset >= end) {
            break;
        }
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)? as u64;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        offset += n;
        if !contains(&line, needle.as_bytes()) {
            continue;
        }
        // A line that does not parse is a torn tail recovery will cut: nothing past it counts.
        match serde_json::from_slice::<Embedded>(&line) {
            Ok(Embedded { record: Some(record) }) => newest = Some((record, offset)),
            Ok(Embedded { record: None }) => {}
            Err(_) => break,
        }
    }
    Ok(newest)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The length of the log at `path` (0 when it is missing).
pub(crate) fn log_len(path: &Path) -> Result<u64> {
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use bdk_protocol::SessionId;
    use bdk_protocol::event::SessionMode;

    use super::*;

    #[test]
    fn log_bytes_round_trips_and_stays_out_of_the_record() {
        let record = SessionRecord::new(SessionId::generate(), SessionMode::Chat, "http", "p");
        let (back, log_bytes) = decode(&encode(&record, Some(42)).unwrap()).unwrap();
        assert_eq!((back, log_bytes), (record.clone(), Some(42)));
        let (_, none) = decode(&serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn the_newest_embedded_record_past_an_offset_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let mut one = SessionRecord::new(SessionId::generate(), SessionMode::Chat, "http", "p");
        one.continuation_token = Some("one".into());
        let mut two = one.clone();
        two.continuation_token = Some("two".into());
        let mut content = Vec::new();
        for (i, record) in [Some(&one), None, Some(&two), None].into_iter().enumerate() {
            let mut line = format!("{{\"type\":\"session.waiting\",\"index\":{i},\"data\":{{}}}}").into_bytes();
            if let Some(record) = record {
                embed(&mut line, record).unwrap();
            }
            line.push(b'\n');
            content.extend(line);
        }
        let first_end = content.iter().position(|b| *b == b'\n').unwrap() as u64 + 1;
        content.extend_from_slice(b"{\"torn");
        fs::write(&path, &content).unwrap();
        let (newest, _) = newest_embedded(&path, 0, None).unwrap().unwrap();
        assert_eq!(newest.continuation_token.as_deref(), Some("two"));
        let (upto, end) = newest_embedded(&path, 0, Some(first_end)).unwrap().unwrap();
        assert_eq!((upto.continuation_token.as_deref(), end), (Some("one"), first_end));
        let lines: Vec<&[u8]> = content.split(|b| *b == b'\n').collect();
        let past_two: u64 = lines[..3].iter().map(|l| l.len() as u64 + 1).sum();
        assert!(newest_embedded(&path, past_two, None).unwrap().is_none());
    }
}
