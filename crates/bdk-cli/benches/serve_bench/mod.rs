//! The serve benchmark: a real `bdk serve` child on loopback, in front of an OpenAI-compatible
//! stub process (`stub.py`, answers at once), driven by a Rust client (plain HTTP/1.1 on
//! `std::net`), Python's `http.client` (`client.py`) and `curl`. It prints, for text and tool
//! turns: p50/p95 latency, the server's CPU per turn (user + system from `/proc/<pid>/stat`,
//! which counts the server alone, not the tool processes it runs), syscalls per turn (when
//! `strace` can attach), turns/s at 1, 8 and 32 clients beside the stub's own ceiling, RSS idle
//! and after the follow-ups, and the ratio of the last follow-up's latency to the first's on one
//! conversation; RSS before and after answers far past the per-step output cap; then 32 clients
//! start new sessions for 15 s, and RSS is read at the end of that burst, 10 s and 30 s later,
//! and 40 s later, once every session's actor has retired (does memory go back?), with what
//! each session adds; and the same for sessions made by a text turn and by a tool turn. `--soak SECS` adds turns/s per 10 s window over a long run.
//!
//! Figures only: nothing here passes or fails on a time. Shared by the bench target (`serve.rs`)
//! and the suite, which runs the quick mode (`Options::quick`) on the debug binary.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const STUB: &str = include_str!("stub.py");
const CLIENT: &str = include_str!("client.py");
const WAIT: Duration = Duration::from_secs(60);

/// A persistent Python tool: one process answers every call.
const WARM_PY: &str = r#"import json, sys
for line in sys.stdin:
    request = json.loads(line)
    text = request["input"]["text"]
    print(json.dumps({"id": request["id"], "result": {"words": len(text.split())}}), flush=True)
"#;
/// The same tool as a plain command: a new interpreter per call.
const COLD_PY: &str = r#"import json, sys
request = json.load(sys.stdin)
json.dump({"words": len(request["input"]["text"].split())}, sys.stdout)
"#;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `bdk` binary to serve with.
    pub bdk: PathBuf,
    /// Where state lives (its disk decides what an fsync costs).
    pub place: PathBuf,
    /// Few turns of each kind: checks that every part runs (the suite uses this).
    pub quick: bool,
    /// Seconds of 32-client load after the rest, reported per 10 s window (0: none).
    pub soak_secs: u64,
    /// Only the memory parts (the burst of new sessions, idle sessions by path).
    pub memory_only: bool,
    /// The agent's `storage.toml` `policy.debounce_ms` (0: none, every commit synced).
    pub debounce_ms: u64,
}

/// The figures the suite checks for sanity (all turns answered, counters read).
#[derive(Debug, Default)]
pub struct Summary {
    pub lines: Vec<String>,
    pub text_turns: usize,
    pub tool_turns: usize,
    pub cpu_ms_per_text_turn: f64,
    pub rss_idle_kib: u64,
    pub followup_ratio: f64,
}

impl Summary {
    fn say(&mut self, line: String) {
        println!("{line}");
        self.lines.push(line);
    }
}

/// A warning when `place` is on a file system mounted with `discard`: deleting a large tree
/// there (a previous run's state) sends discards that the next journal commits wait for, so a
/// run right after one is slower whatever the build (see decision 0039).
fn discard_note(place: &Path) -> Option<String> {
    let place = place.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    // The mount the state goes to: the longest mount point that holds it.
    let (point, options) = mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, point, _, options) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
            Some((point, options))
        })
        .filter(|(point, _)| place.starts_with(point))
        .max_by_key(|(point, _)| point.len())?;
    options.split(',').any(|o| o == "discard").then(|| {
        format!(
            "note: {point} is mounted with `discard`: a run soon after deleting a large tree there \
             (such as a previous run's state) pays for its discards; compare builds in runs with no \
             deletes between them"
        )
    })
}

/// A child process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs every part once and prints as it goes.
pub fn run(options: &Options) -> Summary {
    let mut out = Summary::default();
    let scale = |quick: usize, full: usize| if options.quick { quick } else { full };
    let dir = tempfile::tempdir_in(&options.place).unwrap();
    let (_stub, stub_port) = start_stub(dir.path());
    let project = write_project(dir.path(), stub_port, options.debounce_ms);
    let state = dir.path().join("state");
    let (server, addr) = start_bdk(&options.bdk, &project, &state.join("main"));
    let pid = server.0.id();
    out.say(format!(
        "bdk serve pid {pid} on {addr}, state on {}{}, stub on 127.0.0.1:{stub_port}{}",
        options.place.display(),
        match options.debounce_ms {
            0 => String::new(),
            ms => format!(" (write debouncing: synced every {ms} ms at most)"),
        },
        if options.quick { " (quick mode)" } else { "" }
    ));
    if let Some(note) = discard_note(&options.place) {
        out.say(note);
    }
    out.rss_idle_kib = rss_kib(pid);
    // RSS counts the binary's code pages too, and how many of those are mapped depends on what
    // the page cache holds (the kernel maps pages around each fault): the anonymous part is
    // what the server itself allocated.
    out.say(format!(
        "RSS idle: {:.1} MB ({:.1} MB anonymous, {:.1} MB mapped from files)",
        out.rss_idle_kib as f64 / 1024.0,
        status_kib(pid, "RssAnon:") as f64 / 1024.0,
        status_kib(pid, "RssFile:") as f64 / 1024.0
    ));

    // The stub alone: what the model side allows.
    let stub_addr: SocketAddr = format!("127.0.0.1:{stub_port}").parse().unwrap();
    let stub_one = stub_load(stub_addr, 1, Duration::from_millis(scale(200, 3000) as u64));
    let stub_many = stub_load(stub_addr, 32, Duration::from_millis(scale(200, 3000) as u64));
    out.say(format!(
        "stub alone: p50 {} per completion; ceiling {:.0} req/s at 1 client, {:.0} req/s at 32",
        ms(stub_one.percentile(0.5)),
        stub_one.rate(),
        stub_many.rate()
    ));

    // Warm up (first turns open files, start pools).
    for _ in 0..3 {
        new_session_turn(addr, "warm up");
    }

    if options.memory_only {
        memory(&mut out, (addr, pid), (&options.bdk, &project, &state), options.quick);
        out.say(format!("RSS at the end: {:.1} MB", rss_kib(pid) as f64 / 1024.0));
        return out;
    }

    // New-session text turns, Rust client: POST and stream on one kept-alive connection.
    let turns = scale(8, 100);
    let cpu = CpuMeter::start(pid);
    let mut rust = Samples::default();
    for _ in 0..turns {
        rust.push(new_session_turn(addr, "hello"));
    }
    let cpu_ms = cpu.ms_per(turns);
    out.text_turns += turns;
    out.cpu_ms_per_text_turn = cpu_ms;
    out.say(format!(
        "text turn, new session, Rust client (POST + stream on one kept-alive connection), {turns} turns: {}, server CPU {cpu_ms:.3} ms/turn, host overhead over the stub p50 {}",
        rust.describe(),
        ms(rust.percentile(0.5).saturating_sub(stub_one.percentile(0.5)))
    ));

    // The same through Python's http.client, kept-alive and fresh connections.
    for mode in ["keepalive", "fresh"] {
        let turns = scale(4, 50);
        let cpu = CpuMeter::start(pid);
        match python_turns(dir.path(), addr, turns, mode) {
            Some(samples) => {
                out.text_turns += turns;
                out.say(format!(
                    "text turn, new session, python3 http.client ({mode}), {turns} turns: {}, server CPU {:.3} ms/turn",
                    samples.describe(),
                    cpu.ms_per(turns)
                ));
            }
            None => out.say(format!("python3 http.client ({mode}): skipped (python3 failed)")),
        }
    }

    // curl: one process per request, a fresh connection each (the POST's own time_total).
    let turns = scale(3, 30);
    let cpu = CpuMeter::start(pid);
    match curl_turns(addr, turns) {
        Some(samples) => {
            out.text_turns += turns;
            out.say(format!(
                "text turn, new session, curl POST /v1/session (fresh connection, time_total), {turns} turns: {}, server CPU {:.3} ms/turn",
                samples.describe(),
                cpu.ms_per(turns)
            ));
        }
        None => out.say("curl: skipped (not found)".into()),
    }

    // Syscalls per new-session text turn.
    let turns = scale(3, 30);
    match strace_turns(pid, addr, turns) {
        Ok(summary) => out.say(format!("syscalls per text turn (strace -c -f, {turns} turns): {summary}")),
        Err(why) => out.say(format!("syscalls: skipped ({why})")),
    }

    // Tool turns on one conversation each: a persistent and a per-call python3 tool.
    for (tool, what) in [("warm", "persistent python3 tool"), ("cold", "python3 command tool (process per call)")] {
        let turns = scale(3, 100);
        let mut conversation = Conversation::start(addr, &format!("tool:{tool}"));
        let cpu = CpuMeter::start(pid);
        let mut samples = Samples::default();
        for _ in 0..turns {
            samples.push(conversation.follow_up(&format!("tool:{tool}")));
        }
        out.tool_turns += turns;
        out.say(format!(
            "tool turn ({what}), follow-ups, {turns} turns: {}, server CPU {:.3} ms/turn (without the tool's process); RSS after: {:.1} MB",
            samples.describe(),
            cpu.ms_per(turns),
            rss_kib(pid) as f64 / 1024.0
        ));
    }

    // One long conversation: does a follow-up get slower as the log grows?
    let turns = scale(10, 200);
    let mut conversation = Conversation::start(addr, "hello");
    let mut latencies = Vec::new();
    for _ in 0..turns {
        latencies.push(conversation.follow_up("hello again"));
    }
    let first = latencies[0].as_secs_f64();
    let last = latencies[turns - 1].as_secs_f64();
    let window = 10.min(turns / 2).max(1);
    let median = |slice: &[Duration]| {
        let mut s = Samples::default();
        slice.iter().for_each(|d| s.push(*d));
        s.percentile(0.5).as_secs_f64()
    };
    out.followup_ratio = median(&latencies[turns - window..]) / median(&latencies[..window]);
    out.text_turns += turns;
    out.say(format!(
        "one conversation, {turns} text follow-ups: #1 {}, #{turns} {} (ratio {:.2}); median of the last {window} / first {window}: {:.2}; RSS after: {:.1} MB",
        ms(latencies[0]),
        ms(latencies[turns - 1]),
        last / first,
        out.followup_ratio,
        rss_kib(pid) as f64 / 1024.0
    ));

    // Throughput: N clients, each on its own conversation, text follow-ups back to back.
    for clients in [1, 8, 32] {
        let load = follow_up_load(addr, pid, clients, Duration::from_millis(scale(200, 3000) as u64));
        out.text_turns += load.samples.len();
        out.say(format!(
            "{clients} clients, text follow-ups: {:.0} turns/s, {}, server CPU {:.3} ms/turn",
            load.rate,
            load.samples.describe(),
            load.cpu_ms_per_turn
        ));
    }

    // A model that answers far past the per-step output cap (1 MiB): the turn is cut off, and
    // what it took must not stay (the log keeps the capped text about once).
    let before = rss_kib(pid);
    let big = scale(2, 20) * 1024 * 1024;
    for _ in 0..scale(1, 3) {
        new_session_turn(addr, &format!("big:{big}"));
    }
    out.say(format!(
        "answers of {} MiB (capped): RSS before {:.1} MB, after {:.1} MB",
        big / (1024 * 1024),
        before as f64 / 1024.0,
        rss_kib(pid) as f64 / 1024.0
    ));

    memory(&mut out, (addr, pid), (&options.bdk, &project, &state), options.quick);

    if options.soak_secs > 0 {
        out.say(format!("soak: 32 clients for {} s, turns/s per 10 s window:", options.soak_secs));
        let windows = options.soak_secs.div_ceil(10);
        for w in 0..windows {
            let load = follow_up_load(addr, pid, 32, Duration::from_secs(10));
            out.say(format!(
                "  window {w}: {:.0} turns/s, p50 {}, RSS {:.1} MB",
                load.rate,
                ms(load.samples.percentile(0.5)),
                rss_kib(pid) as f64 / 1024.0
            ));
        }
    }
    out.say(format!("RSS at the end: {:.1} MB", rss_kib(pid) as f64 / 1024.0));
    out
}

/// What an idle session costs by the path that made it; then memory returns: many new sessions
/// at once, and the server idle past the sessions' idle timeout (their actors end).
fn memory(
    out: &mut Summary,
    (addr, pid): (SocketAddr, u32),
    (bdk, project, state): (&Path, &Path, &Path),
    quick: bool,
) {
    let scale = |q: usize, full: usize| if quick { q } else { full };
    // What an idle session costs by the path that created it: sessions made by a text turn and
    // by a tool turn, 8 clients, then RSS while they idle and once their actors have retired.
    // Each on a server of its own, so that neither reuses what the other freed.
    for (what, message) in [("text turn", "hello"), ("tool turn", "tool:warm")] {
        let (server, addr) = start_bdk(bdk, project, &state.join(message.replace(':', "-")));
        let pid = server.0.id();
        for _ in 0..3 {
            new_session_turn(addr, message);
        }
        let before = rss_kib(pid);
        let made = sessions_by(addr, 8, scale(8, 1000), message);
        let ended = Instant::now();
        out.text_turns += made;
        out.say(format!(
            "idle sessions made by a {what} ({made}, 8 clients): {}",
            idle_rss(pid, ended, before, made, &[scale(100, 10_000), scale(500, 40_000)])
        ));
    }

    let before = rss_kib(pid);
    let load = new_session_load(addr, pid, 32, Duration::from_millis(scale(200, 15_000) as u64));
    let ended = Instant::now();
    let sessions = load.samples.len();
    out.text_turns += sessions;
    out.say(format!(
        "32 clients, new sessions: {sessions} sessions, {:.0} sessions/s, server CPU {:.3} ms/session; RSS before {:.1} MB, after the burst {:.1} MB",
        load.rate,
        load.cpu_ms_per_turn,
        before as f64 / 1024.0,
        rss_kib(pid) as f64 / 1024.0
    ));
    out.say(format!(
        "  {}",
        idle_rss(pid, ended, before, sessions, &[scale(100, 10_000), scale(300, 30_000), scale(500, 40_000)])
    ));
}

// --- processes -------------------------------------------------------------------------------

fn start_stub(dir: &Path) -> (Proc, u16) {
    let script = dir.join("stub.py");
    std::fs::write(&script, STUB).unwrap();
    let mut child =
        Command::new("python3").arg(&script).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().strip_prefix("listening on ").and_then(|p| p.parse().ok());
    let port = port.unwrap_or_else(|| panic!("the stub printed {line:?}"));
    (Proc(child), port)
}

fn write_project(dir: &Path, stub_port: u16, debounce_ms: u64) -> PathBuf {
    let project = dir.join("bench");
    let bot = project.join("bot");
    std::fs::create_dir_all(bot.join("tools")).unwrap();
    std::fs::create_dir_all(bot.join("lib")).unwrap();
    std::fs::write(
        bot.join("agent.toml"),
        format!(
            "name = \"bench\"\nmax_running_turns = 64\n\n[model]\nid = \"stub\"\nprovider = \"openai-compatible\"\nbase_url = \"http://127.0.0.1:{stub_port}/v1\"\n"
        ),
    )
    .unwrap();
    std::fs::write(bot.join("instructions.md"), "Answer briefly.\n").unwrap();
    if debounce_ms > 0 {
        std::fs::write(bot.join("storage.toml"), format!("[policy]\ndebounce_ms = {debounce_ms}\n")).unwrap();
    }
    let schema =
        "[input_schema]\ntype = \"object\"\nrequired = [\"text\"]\nproperties = { text = { type = \"string\" } }\n";
    std::fs::write(
        bot.join("tools/warm.toml"),
        format!("description = \"Counts words.\"\neffect = \"read\"\ncommand = [\"python3\", \"lib/warm.py\"]\npersistent = true\n\n{schema}"),
    )
    .unwrap();
    std::fs::write(
        bot.join("tools/cold.toml"),
        format!(
            "description = \"Counts words.\"\neffect = \"read\"\ncommand = [\"python3\", \"lib/cold.py\"]\n\n{schema}"
        ),
    )
    .unwrap();
    std::fs::write(bot.join("lib/warm.py"), WARM_PY).unwrap();
    std::fs::write(bot.join("lib/cold.py"), COLD_PY).unwrap();
    project
}

fn start_bdk(bdk: &Path, project: &Path, state: &Path) -> (Proc, SocketAddr) {
    let mut command = Command::new(bdk);
    command.args(["serve", "--mode", "single", "--port", "0", "--dir"]).arg(project).arg("--state-root").arg(state);
    for var in ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY", "BDK_BEARER_TOKEN"] {
        command.env_remove(var);
    }
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on http://").and_then(|a| a.parse().ok());
    let addr = addr.unwrap_or_else(|| panic!("bdk serve printed {line:?}"));
    (Proc(child), addr)
}

// --- the Rust client -------------------------------------------------------------------------

/// One HTTP/1.1 connection, kept alive across requests.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Conn { stream, buf: Vec::new() }
    }

    fn send(&mut self, method: &str, path: &str, body: &str) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(needle.len()).position(|w| w == needle) {
                return self.buf.drain(..at + needle.len()).collect();
            }
            self.fill();
        }
    }

    /// One response with a `Content-Length` body, which is returned.
    fn response(&mut self) -> String {
        let head = String::from_utf8(self.read_until(b"\r\n\r\n")).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap();
        while self.buf.len() < length {
            self.fill();
        }
        String::from_utf8(self.buf.drain(..length).collect()).unwrap()
    }
}

const WAITING: &[u8] = br#""type":"session.waiting""#;

fn field(body: &str, name: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body).unwrap();
    value[name].as_str().unwrap_or_else(|| panic!("no {name} in {body}")).to_owned()
}

/// POST /v1/session, then its stream on the same connection until `session.waiting`.
fn new_session_turn(addr: SocketAddr, message: &str) -> Duration {
    let started = Instant::now();
    let mut conn = Conn::open(addr);
    conn.send("POST", "/v1/session", &serde_json::json!({ "message": message }).to_string());
    let id = field(&conn.response(), "sessionId");
    conn.send("GET", &format!("/v1/session/{id}/stream?startIndex=0"), "");
    conn.read_until(WAITING);
    started.elapsed()
}

/// A session with its stream open on one connection and follow-ups posted on another.
struct Conversation {
    post: Conn,
    stream: Conn,
    id: String,
    token: String,
}

impl Conversation {
    fn start(addr: SocketAddr, message: &str) -> Conversation {
        let mut post = Conn::open(addr);
        post.send("POST", "/v1/session", &serde_json::json!({ "message": message }).to_string());
        let body = post.response();
        let (id, token) = (field(&body, "sessionId"), field(&body, "continuationToken"));
        let mut stream = Conn::open(addr);
        stream.send("GET", &format!("/v1/session/{id}/stream?startIndex=0"), "");
        stream.read_until(WAITING);
        Conversation { post, stream, id, token }
    }

    /// One follow-up: from sending the POST to reading its `session.waiting`.
    fn follow_up(&mut self, message: &str) -> Duration {
        let started = Instant::now();
        let body = serde_json::json!({ "continuationToken": self.token, "message": message }).to_string();
        self.post.send("POST", &format!("/v1/session/{}", self.id), &body);
        self.token = field(&self.post.response(), "continuationToken");
        self.stream.read_until(WAITING);
        started.elapsed()
    }
}

struct Load {
    samples: Samples,
    rate: f64,
    cpu_ms_per_turn: f64,
}

/// `clients` conversations doing text follow-ups back to back for `duration`.
fn follow_up_load(addr: SocketAddr, pid: u32, clients: usize, duration: Duration) -> Load {
    let ready = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let ready = ready.clone();
            std::thread::spawn(move || {
                let mut conversation = Conversation::start(addr, "hello");
                ready.wait();
                let end = Instant::now() + duration;
                let mut samples = Vec::new();
                while Instant::now() < end {
                    samples.push(conversation.follow_up("hello again"));
                }
                samples
            })
        })
        .collect();
    ready.wait();
    let (started, cpu) = (Instant::now(), CpuMeter::start(pid));
    let mut samples = Samples::default();
    for handle in handles {
        handle.join().unwrap().into_iter().for_each(|d| samples.push(d));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let turns = samples.len();
    Load { rate: turns as f64 / elapsed, cpu_ms_per_turn: cpu.ms_per(turns), samples }
}

/// `clients` threads each starting new sessions (one text turn each) back to back for `duration`.
fn new_session_load(addr: SocketAddr, pid: u32, clients: usize, duration: Duration) -> Load {
    let ready = Arc::new(Barrier::new(clients + 1));
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let ready = ready.clone();
            std::thread::spawn(move || {
                ready.wait();
                let end = Instant::now() + duration;
                let mut samples = Vec::new();
                while Instant::now() < end {
                    samples.push(new_session_turn(addr, "hello"));
                }
                samples
            })
        })
        .collect();
    ready.wait();
    let (started, cpu) = (Instant::now(), CpuMeter::start(pid));
    let mut samples = Samples::default();
    for handle in handles {
        handle.join().unwrap().into_iter().for_each(|d| samples.push(d));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let turns = samples.len();
    Load { rate: turns as f64 / elapsed, cpu_ms_per_turn: cpu.ms_per(turns), samples }
}

/// RSS at each of `marks` (milliseconds after `ended`), with the growth over `before` per session.
fn idle_rss(pid: u32, ended: Instant, before: u64, sessions: usize, marks: &[usize]) -> String {
    let mut parts = Vec::new();
    for &mark in marks {
        let at = ended + Duration::from_millis(mark as u64);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let rss = rss_kib(pid);
        let per = rss.saturating_sub(before) as f64 * 1024.0 / sessions.max(1) as f64;
        parts.push(format!("{} s later {:.1} MB ({per:.0} B/session)", mark as f64 / 1000.0, rss as f64 / 1024.0));
    }
    format!("RSS {} (actors retire 30 s after a session's last turn)", parts.join(", "))
}

/// `count` new sessions, one turn each (`message`), from `clients` threads. Returns how many.
fn sessions_by(addr: SocketAddr, clients: usize, count: usize, message: &str) -> usize {
    let per = count.div_ceil(clients);
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            let message = message.to_owned();
            std::thread::spawn(move || {
                for _ in 0..per {
                    new_session_turn(addr, &message);
                }
                per
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

/// `clients` threads posting completions to the stub for `duration`.
fn stub_load(addr: SocketAddr, clients: usize, duration: Duration) -> Load {
    let body = r#"{"model":"stub","stream":true,"messages":[{"role":"user","content":"hello"}]}"#;
    let started = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                let end = Instant::now() + duration;
                let mut samples = Vec::new();
                while Instant::now() < end {
                    let t = Instant::now();
                    conn.send("POST", "/v1/chat/completions", body);
                    conn.response();
                    samples.push(t.elapsed());
                }
                samples
            })
        })
        .collect();
    let mut samples = Samples::default();
    for handle in handles {
        handle.join().unwrap().into_iter().for_each(|d| samples.push(d));
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    Load { samples, rate, cpu_ms_per_turn: 0.0 }
}

// --- other clients ---------------------------------------------------------------------------

fn python_turns(dir: &Path, addr: SocketAddr, turns: usize, mode: &str) -> Option<Samples> {
    let script = dir.join("client.py");
    std::fs::write(&script, CLIENT).ok()?;
    let output = Command::new("python3")
        .arg(&script)
        .args([&addr.ip().to_string(), &addr.port().to_string(), &turns.to_string(), mode, "hello"])
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!("client.py: {}", String::from_utf8_lossy(&output.stderr));
        return None;
    }
    let seconds: Vec<f64> = serde_json::from_slice(&output.stdout).ok()?;
    let mut samples = Samples::default();
    seconds.into_iter().for_each(|s| samples.push(Duration::from_secs_f64(s)));
    Some(samples)
}

/// `curl -X POST` per turn (its own `time_total`), then the turn is awaited on a Rust stream
/// so the server's CPU covers whole turns.
fn curl_turns(addr: SocketAddr, turns: usize) -> Option<Samples> {
    let mut samples = Samples::default();
    for _ in 0..turns {
        let output = Command::new("curl")
            .args(["-s", "-X", "POST", "-H", "Content-Type: application/json", "-d", r#"{"message":"hello"}"#])
            .args(["-w", "\n%{time_total}"])
            .arg(format!("http://{addr}/v1/session"))
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, total) = text.rsplit_once('\n')?;
        samples.push(Duration::from_secs_f64(total.trim().parse().ok()?));
        let id = field(body, "sessionId");
        let mut conn = Conn::open(addr);
        conn.send("GET", &format!("/v1/session/{id}/stream?startIndex=0"), "");
        conn.read_until(WAITING);
    }
    Some(samples)
}

/// Syscalls of the server (all threads) over `turns` new-session text turns.
fn strace_turns(pid: u32, addr: SocketAddr, turns: usize) -> Result<String, String> {
    let out = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let mut strace = Command::new("strace")
        .args(["-c", "-f", "-p", &pid.to_string(), "-o"])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("strace: {e}"))?;
    // strace prints "attached" for each thread once it has them.
    let mut stderr = BufReader::new(strace.stderr.take().ok_or("no stderr")?);
    let mut line = String::new();
    let attached = stderr.read_line(&mut line).map_err(|e| e.to_string())?;
    if attached == 0 || !line.contains("ttach") {
        let _ = strace.kill();
        let _ = strace.wait();
        return Err(format!("strace could not attach: {}", line.trim()));
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..turns {
        new_session_turn(addr, "hello");
    }
    let _ = Command::new("kill").args(["-INT", &strace.id().to_string()]).status();
    let _ = strace.wait();
    let text = std::fs::read_to_string(out.path()).map_err(|e| e.to_string())?;
    let mut rows: Vec<(u64, String)> = Vec::new();
    let mut total = None;
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = cols.last() else { continue };
        let Some(calls) = cols.get(3).and_then(|c| c.parse::<u64>().ok()) else { continue };
        if *name == "total" {
            total = Some(calls);
        } else {
            rows.push((calls, (*name).to_owned()));
        }
    }
    let total = total.ok_or("no strace summary")?;
    rows.sort_by_key(|row| std::cmp::Reverse(row.0));
    let per = |n: u64| n as f64 / turns as f64;
    let top: Vec<String> = rows.iter().take(8).map(|(n, name)| format!("{name} {:.1}", per(*n))).collect();
    Ok(format!("{:.1} in all; {}", per(total), top.join(", ")))
}

// --- measurements ----------------------------------------------------------------------------

/// User + system CPU of a process, in clock ticks, from `/proc/<pid>/stat`.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(") ") else { return 0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // After the command: state is field 3 of the line, utime 14 and stime 15.
    get(11) + get(12)
}

fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    out.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).unwrap_or(100.0)
}

struct CpuMeter {
    pid: u32,
    ticks: u64,
}

impl CpuMeter {
    fn start(pid: u32) -> CpuMeter {
        CpuMeter { pid, ticks: cpu_ticks(pid) }
    }

    fn ms_per(&self, turns: usize) -> f64 {
        let spent = cpu_ticks(self.pid).saturating_sub(self.ticks) as f64 / ticks_per_second();
        spent * 1000.0 / turns.max(1) as f64
    }
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/<pid>/status` size in KiB (`VmRSS:`, `RssAnon:`, ...); 0 when it cannot be read.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    fn describe(&self) -> String {
        format!("p50 {}, p95 {}", ms(self.percentile(0.5)), ms(self.percentile(0.95)))
    }
}

impl Load {
    fn rate(&self) -> f64 {
        self.rate
    }

    fn percentile(&self, p: f64) -> Duration {
        self.samples.percentile(p)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
