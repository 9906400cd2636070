//! Running the `bdk` binary and snapshotting its output with machine-specific parts filtered.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long any one command a test runs may take before the test fails (a `serve` that starts
/// instead of refusing must fail the test, not hang the suite).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

pub fn bdk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bdk"))
}

/// `Command::output` with a time limit. Stdin is empty, as with `output`; stdout and stderr are
/// drained while the command runs, so a chatty command cannot block on a full pipe.
pub trait OutputWithin {
    /// Within [`COMMAND_TIMEOUT`]: past it the child is killed and the test panics.
    fn output_within(&mut self) -> Output {
        let limit = COMMAND_TIMEOUT;
        self.output_until(limit).unwrap_or_else(|_| panic!("{} ran past {limit:?}", self.shown()))
    }

    /// Within `limit`: past it the child is killed and `Err` holds what it printed until then.
    fn output_until(&mut self, limit: Duration) -> Result<Output, Output>;

    /// The program and its arguments, for messages.
    fn shown(&self) -> String;
}

impl OutputWithin for Command {
    fn output_until(&mut self, limit: Duration) -> Result<Output, Output> {
        let mut child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.shown()));
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        let (status, in_time) = wait_until(&mut child, limit);
        let output = Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
        if in_time { Ok(output) } else { Err(output) }
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
        if let Some(status) = child.try_wait().unwrap() {
            return (status, true);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            return (child.wait().unwrap(), false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A finished command's stdout and stderr, for failure messages.
pub fn text(output: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Runs `bdk` with `args`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let Output { status, stdout, stderr } = bdk().args(args).output_within();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn example(name: &str) -> String {
    repo_root().join("examples").join(name).display().to_string()
}

/// Filters for snapshots: absolute paths and clock-dependent schedule times.
pub fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r#""nextFireAt": "[0-9T:\-]+Z""#, r#""nextFireAt": "[next fire]""#),
        (r"next \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "next [next fire]"),
        (r"/tmp/[^\s\x22)]+", "[tmp]"),
        (r"/[^\s\x22]*/examples/", "[repo]/examples/"),
    ]
}

#[macro_export]
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({ filters => $crate::suite::support::filters(), prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}
