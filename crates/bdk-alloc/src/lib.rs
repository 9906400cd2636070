//! Gives the memory a burst of sessions freed back to the operating system.
//!
//! glibc's allocator keeps freed memory in its arenas: only the top of each heap shrinks by
//! itself, and a burst leaves its freed pages under the long-lived allocations made meanwhile.
//! Measured with the serve benchmark, a server that had started a few thousand sessions kept
//! its peak resident size after every session went idle and its actor retired; `malloc_trim(0)`
//! then gave most of it back (decision 0031). So a long-running process starts a [`Trimmer`]:
//! a thread that reads the resident size every few seconds and trims once it has grown well past
//! what the last trim left and has stopped growing (a burst is over). A steady load that reuses
//! its memory never grows past the threshold, so it is never trimmed.
//!
//! It owns the decision ([`Policy`]) and the one call into glibc (`glibc.rs`); it does not know
//! sessions. Elsewhere than Linux with glibc it does nothing.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// What the allocator holds, read one interval apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Bytes in use by the program.
    pub in_use: u64,
    /// Free bytes the allocator keeps in its arenas (given back or not: glibc counts a page it
    /// gave back as free still).
    pub free: u64,
}

/// When to trim. Pure, so tests drive it.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Trim once the allocator holds this much more free memory than after the last trim...
    pub growth_bytes: u64,
    /// ...and the memory in use grew by no more than this since the previous reading (the
    /// burst is over).
    pub settled_bytes: u64,
    /// Free bytes held after the last trim, lowered whenever fewer are held (what was reused
    /// is resident again, so what is freed next counts in full).
    baseline: u64,
    last_in_use: u64,
}

impl Policy {
    /// Starts from what the allocator holds now.
    pub fn new(now: Reading) -> Self {
        Policy { growth_bytes: 8 << 20, settled_bytes: 1 << 20, baseline: now.free, last_in_use: now.in_use }
    }

    /// Takes a reading; `true` means trim now.
    pub fn observe(&mut self, now: Reading) -> bool {
        let settled = now.in_use <= self.last_in_use.saturating_add(self.settled_bytes);
        self.last_in_use = now.in_use;
        self.baseline = self.baseline.min(now.free);
        settled && now.free >= self.baseline.saturating_add(self.growth_bytes)
    }

    /// Records what a trim left: growth is counted from there.
    pub fn trimmed(&mut self, now: Reading) {
        self.baseline = now.free;
        self.last_in_use = now.in_use;
    }
}

/// The trimming thread; it stops when this is dropped.
#[derive(Debug)]
pub struct Trimmer {
    _stop: Option<mpsc::Sender<()>>,
}

impl Trimmer {
    /// How often the resident size is read.
    pub const INTERVAL: Duration = Duration::from_secs(5);

    /// Starts the thread (a no-op where the allocator is not glibc's).
    pub fn start() -> Self {
        Self::start_every(Self::INTERVAL)
    }

    pub fn start_every(interval: Duration) -> Self {
        if !supported() {
            return Trimmer { _stop: None };
        }
        let Some(now) = reading() else { return Trimmer { _stop: None } };
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = thread::Builder::new().name("bdk-trim".into()).spawn(move || {
            let mut policy = Policy::new(now);
            // Ends when the sender is dropped (`recv_timeout` reports the disconnection).
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let Some(now) = reading() else { return };
                if policy.observe(now) {
                    let before = resident_bytes();
                    trim();
                    tracing::debug!(?before, after = ?resident_bytes(), free = now.free, "returned freed memory to the OS");
                    policy.trimmed(reading().unwrap_or(now));
                }
            }
        });
        match spawned {
            Ok(_) => Trimmer { _stop: Some(stop) },
            Err(error) => {
                tracing::warn!(%error, "cannot start the memory trimming thread");
                Trimmer { _stop: None }
            }
        }
    }
}

/// Whether this build can give freed memory back (Linux with glibc).
pub fn supported() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu"))
}

/// What glibc's allocator holds now (`None` elsewhere).
pub fn reading() -> Option<Reading> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    return Some(glibc::reading());
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Gives every arena's free pages back to the OS now (glibc), or does nothing.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
}

/// This process's resident size in bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn held(in_use: u64, free: u64) -> Reading {
        Reading { in_use: in_use * MIB, free: free * MIB }
    }

    #[test]
    fn trims_once_a_burst_has_freed_memory_and_stopped() {
        let mut policy = Policy::new(held(30, 2));
        assert!(!policy.observe(held(31, 6)), "little held free");
        assert!(!policy.observe(held(120, 40)), "in use is growing: the burst is on");
        assert!(!policy.observe(held(200, 60)), "still growing");
        assert!(policy.observe(held(200, 60)), "settled, 58 MiB more held free");
        policy.trimmed(held(200, 60));
        assert!(!policy.observe(held(200, 60)), "nothing freed since the trim");
        // The sessions retire: in use falls, free grows.
        assert!(policy.observe(held(60, 200)));
        policy.trimmed(held(60, 200));
        assert!(!policy.observe(held(60, 200)));
    }

    #[test]
    fn memory_reused_then_freed_again_counts_in_full() {
        let mut policy = Policy::new(held(30, 100));
        assert!(!policy.observe(held(120, 10)), "the free memory was reused");
        assert!(!policy.observe(held(120, 10)));
        assert!(policy.observe(held(30, 100)), "and freed again: 90 MiB over the lowest");
    }

    #[test]
    fn the_resident_size_reads_and_a_trim_runs() {
        if supported() {
            assert!(resident_bytes().is_some_and(|rss| rss > 0));
            assert!(reading().is_some_and(|now| now.in_use > 0));
        }
        trim();
        drop(Trimmer::start_every(Duration::from_millis(1)));
    }
}
