//! Running a program with a time limit: a test that starts a process fails (the process
//! killed) instead of hanging when the process does not end.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any one command a test runs may take before the test fails (a `serve` that starts
/// instead of refusing must fail the test, not hang the suite).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

/// `Command::output` with a time limit. Stdin is empty, as with `output`; stdout and stderr are
/// drained while the command runs, so a chatty command cannot block on a full pipe.
pub trait OutputWithin {
    /// Within [`COMMAND_TIMEOUT`]: past it the child is killed and the test panics.
    fn output_within(&mut self) -> Output {
        let limit = COMMAND_TIMEOUT;
        self.output_until(limit).unwrap_or_else(|_| panic!("{} ran past {limit:?}", self.shown()))
    }

    /// Within `limit`: past it the child is killed and `Err` holds what it printed until then.
    fn output_until(&mut self, limit: Duration) -> Result<Output, Output> {
        self.try_output_until(limit).unwrap_or_else(|e| panic!("spawn {}: {e}", self.shown()))
    }

    /// [`output_until`](Self::output_until), with `Err` when the program cannot be started.
    fn try_output_until(&mut self, limit: Duration) -> std::io::Result<Result<Output, Output>>;

    /// The program and its arguments, for messages.
    fn shown(&self) -> String;
}

impl OutputWithin for Command {
    fn try_output_until(&mut self, limit: Duration) -> std::io::Result<Result<Output, Output>> {
        let mut child = self.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let pipes = (child.stdout.take(), child.stderr.take());
        let (Some(stdout), Some(stderr)) = pipes else { unreachable!("both pipes were asked for") };
        let (stdout, stderr) = (drain(Box::new(stdout)), drain(Box::new(stderr)));
        let (status, in_time) = wait_until(&mut child, limit);
        let joined = |drain: std::thread::JoinHandle<Vec<u8>>| drain.join().unwrap_or_default();
        let output = Output { status, stdout: joined(stdout), stderr: joined(stderr) };
        Ok(if in_time { Ok(output) } else { Err(output) })
    }

    fn shown(&self) -> String {
        format!("{:?} {:?}", self.get_program(), self.get_args().collect::<Vec<_>>())
    }
}

/// Waits for `child` up to `limit`, killing it past that: its exit status, and whether it
/// ended in time.
pub fn wait_until(child: &mut Child, limit: Duration) -> (ExitStatus, bool) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("wait for process {}: {e}", child.id())) {
            return (status, true);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let status = child.wait().unwrap_or_else(|e| panic!("wait for process {}: {e}", child.id()));
            return (status, false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
