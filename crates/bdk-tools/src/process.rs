//! Child processes as the runtime uses them: each in its own process group, killed as a group
//! (timeouts, cancellation, drop), with stdout read up to a cap and stderr kept as a tail, and
//! the result taken when the process exits (not when the last holder of its stdout closes it).
//! Nothing here knows about tools or JSON; finding escaped processes is `contain.rs`.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::contain::Contained;

/// How long stdout and stderr may stay open once the process exited and everything it started
/// was ended; past that, what was read is the output.
pub(crate) const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// `ETXTBSY`: a script written a moment ago is still open for writing in a forked sibling.
const TEXT_FILE_BUSY: i32 = 26;

/// Sends SIGKILL to every process of group `pgid`. A group that is already gone is fine.
pub(crate) fn kill_group(pgid: i32) {
    if let Some(pid) = Pid::from_raw(pgid) {
        // ESRCH (nobody left) is the common answer once the tool exited on its own.
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

/// Kills a process group when dropped, unless disarmed. Owners of a child put one beside it so a
/// dropped call future (the engine aborting a task) leaves no process behind.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    pub(crate) fn new(child: &Child) -> Self {
        Self { pgid: child.id().and_then(|id| i32::try_from(id).ok()) }
    }

    /// Kills the group now. The guard stays armed: killing twice is harmless while the group
    /// leader has not been reaped.
    pub(crate) fn kill(&self) {
        if let Some(pgid) = self.pgid {
            kill_group(pgid);
        }
    }

    /// Kills the group and disarms the guard (call once the leader has exited, to sweep up
    /// children it left behind, and before its pid can be reused).
    pub(crate) fn finish(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Puts `command` in a new process group with piped stdio and spawns it, retrying briefly on
/// `ETXTBSY` (a freshly written script).
pub(crate) async fn spawn(command: &mut Command) -> io::Result<Child> {
    command.process_group(0).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut delay = Duration::from_millis(5);
    for _ in 0..6 {
        match command.spawn() {
            Err(error) if error.raw_os_error() == Some(TEXT_FILE_BUSY) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    command.spawn()
}

/// What reading stdout up to a cap gave.
#[derive(Debug)]
pub(crate) enum Capped {
    Complete(Vec<u8>),
    /// More than the cap arrived; reading stopped.
    Exceeded,
}

/// What a process gave: its exit status, its stdout (or why not) and the tail of its stderr.
#[derive(Debug)]
pub(crate) struct Collected {
    pub status: io::Result<ExitStatus>,
    pub stdout: io::Result<Capped>,
    pub stderr: Vec<u8>,
}

/// Waits for `child` while reading its output. Once it exits, its group and every process
/// carrying its tag are ended, and the pipes get [`DRAIN_GRACE`] to close: a grandchild that
/// escaped and holds stdout cannot hold up the result. A stdout flood past `max_output` kills
/// the group at once.
pub(crate) async fn collect(
    child: &mut Child,
    stdout: ChildStdout,
    stderr: ChildStderr,
    (max_output, stderr_keep): (usize, usize),
    contained: &Contained,
) -> Collected {
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let mut out = Vec::new();
    let mut err = Vec::new();
    let (status, read) = {
        let reading = async {
            let stdout = async {
                let read = read_capped_into(stdout, max_output, &mut out).await;
                if matches!(read, Ok(true))
                    && let Some(pgid) = pgid
                {
                    kill_group(pgid);
                }
                read
            };
            tokio::join!(stdout, read_tail_into(stderr, stderr_keep, &mut err)).0
        };
        let waiting = async {
            let status = child.wait().await;
            // The leader is gone: sweep up whatever it left running, in its group or not.
            if let Some(pgid) = pgid {
                kill_group(pgid);
            }
            contained.sweep().await;
            status
        };
        tokio::pin!(reading, waiting);
        let mut read = None;
        let status = loop {
            tokio::select! {
                status = &mut waiting => break status,
                done = &mut reading, if read.is_none() => read = Some(done),
            }
        };
        let read = match read {
            Some(done) => Some(done),
            None => tokio::time::timeout(DRAIN_GRACE, &mut reading).await.ok(),
        };
        (status, read)
    };
    let stdout = match read {
        Some(Ok(true)) => Ok(Capped::Exceeded),
        Some(Err(error)) => Err(error),
        // Complete, or still held open past the grace: what arrived is the output.
        Some(Ok(false)) | None => Ok(Capped::Complete(out)),
    };
    Collected { status, stdout, stderr: err }
}

/// Reads `reader` to EOF into `out`; `Ok(true)` once more than `cap` bytes arrived (reading
/// stops).
async fn read_capped_into(mut reader: impl AsyncRead + Unpin, cap: usize, out: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut chunk).await?;
        if n == 0 {
            return Ok(false);
        }
        if out.len() + n > cap {
            return Ok(true);
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Reads `reader` to EOF into `tail`, keeping only the last `keep` bytes.
async fn read_tail_into(mut reader: impl AsyncRead + Unpin, keep: usize, tail: &mut Vec<u8>) {
    let mut chunk = vec![0u8; 16 * 1024];
    while let Ok(n) = reader.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > keep * 2 {
            let cut = tail.len() - keep;
            tail.drain(..cut);
        }
    }
    if tail.len() > keep {
        let cut = tail.len() - keep;
        tail.drain(..cut);
    }
}

/// The last bytes of a stream as text, marked when cut.
pub(crate) fn tail_text(bytes: &[u8], keep: usize) -> String {
    if bytes.len() <= keep {
        return String::from_utf8_lossy(bytes).trim_end().to_owned();
    }
    let text = String::from_utf8_lossy(&bytes[bytes.len() - keep..]).trim_end().to_owned();
    format!("…{text}")
}

/// A human size: `1 MiB`, `64 KiB`, `12 bytes`.
pub(crate) fn size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// A timeout as the model reads it: `500ms`, `30s`, `2m`.
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 || !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_well() {
        assert_eq!(size(1024 * 1024), "1 MiB");
        assert_eq!(size(4096), "4 KiB");
        assert_eq!(size(10), "10 bytes");
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
        assert_eq!(duration(Duration::from_secs(30)), "30s");
        assert_eq!(duration(Duration::from_secs(120)), "2m");
    }

    #[test]
    fn tails_keep_the_end() {
        assert_eq!(tail_text(b"abcdef", 3), "…def");
        assert_eq!(tail_text(b"abc\n", 10), "abc");
    }
}
