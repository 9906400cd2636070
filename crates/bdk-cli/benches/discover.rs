//! Whole-process timing of `bdk validate` and `bdk info --json` on a generated project with 500
//! tools, 50 skills and 20 subagents (plus channels, schedules and evals). Prints per-command
//! min / median / p90 wall time and the ratio to `bdk --version` (process start-up alone), so
//! the figure means the same on a busy machine. Never fails on a number.
//!
//! Run: `cargo bench -p bdk-cli --bench discover` (add `-- --runs N` to change the run count).

#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark: failing loudly is the point

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const TOOLS: usize = 500;
const SKILLS: usize = 50;
const SUBAGENTS: usize = 20;

fn main() {
    let runs = std::env::args().skip_while(|a| a != "--runs").nth(1).and_then(|n| n.parse().ok()).unwrap_or(30);
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = tmp.path().join("bench-agent");
    generate(&project);
    let dir = project.display().to_string();
    let bdk = env!("CARGO_BIN_EXE_bdk");

    // Sanity: the generated project must be valid, or the timing measures error paths.
    let out = Command::new(bdk).args(["validate", "--dir", &dir]).output().expect("run bdk");
    assert!(out.status.success(), "generated project does not validate:\n{}", String::from_utf8_lossy(&out.stdout));

    println!("project: {TOOLS} tools, {SKILLS} skills, {SUBAGENTS} subagents; {runs} runs each\n");
    println!("{:<28} {:>9} {:>9} {:>9} {:>12}", "command", "min", "median", "p90", "x start-up");
    let baseline = measure(bdk, &["--version"], runs);
    report("bdk --version (start-up)", &baseline, baseline[runs / 2]);
    for (label, args) in
        [("bdk validate", vec!["validate", "--dir", &dir]), ("bdk info --json", vec!["info", "--dir", &dir, "--json"])]
    {
        let times = measure(bdk, &args, runs);
        report(label, &times, baseline[runs / 2]);
    }
}

fn measure(bin: &str, args: &[&str], runs: usize) -> Vec<Duration> {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let status = Command::new(bin).args(args).stdout(std::process::Stdio::null()).status().expect("run bdk");
            let elapsed = start.elapsed();
            assert!(status.success());
            elapsed
        })
        .collect();
    times.sort();
    times
}

fn report(label: &str, sorted: &[Duration], baseline_median: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = sorted[sorted.len() / 2];
    let p90 = sorted[(sorted.len() * 9 / 10).min(sorted.len() - 1)];
    println!(
        "{label:<28} {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>11.1}x",
        ms(sorted[0]),
        ms(median),
        ms(p90),
        median.as_secs_f64() / baseline_median.as_secs_f64()
    );
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn generate(root: &Path) {
    write(root, "bot/agent.toml", "description = \"A generated agent for benchmarks.\"\nmax_steps = 40\n");
    write(root, "bot/instructions.md", &"Follow the rules. Prefer tools over guesses.\n".repeat(50));
    for i in 0..TOOLS {
        let mut t = String::new();
        let _ = writeln!(t, "description = \"Tool number {i}: look up record {i} by id and time range.\"");
        let _ = writeln!(t, "effect = \"{}\"", if i % 2 == 0 { "read" } else { "write" });
        let _ = writeln!(t, "command = [\"python3\", \"lib/tool.py\"]\ntimeout = \"20s\"");
        if i % 5 == 0 {
            let _ = writeln!(t, "time_args = [\"since\"]");
        }
        if i % 7 == 0 {
            let _ = writeln!(
                t,
                "needs_approval = {{ properties = {{ env = {{ const = \"prod\" }} }}, required = [\"env\"] }}"
            );
        }
        let _ = writeln!(t, "\n[input_schema]\ntype = \"object\"\nrequired = [\"id\"]\nadditionalProperties = false");
        let _ = writeln!(t, "[input_schema.properties]");
        let _ = writeln!(t, "id = {{ type = \"string\", pattern = \"^rec-[0-9]+$\" }}");
        let _ = writeln!(t, "since = {{ type = \"string\", format = \"date-time\" }}");
        let _ = writeln!(t, "env = {{ type = \"string\", enum = [\"dev\", \"staging\", \"prod\"] }}");
        let _ = writeln!(t, "limit = {{ type = \"integer\", minimum = 1, maximum = 100 }}");
        write(root, &format!("bot/tools/tool_{i:03}.toml"), &t);
    }
    write(root, "bot/lib/tool.py", "import json, sys\njson.dump(json.load(sys.stdin)[\"input\"], sys.stdout)\n");
    for i in 0..SKILLS {
        let front = format!("---\nname: skill-{i:02}\ndescription: Use when task {i} comes up.\n---\n");
        let body = "1. Read.\n2. Check.\n3. Answer.\n".repeat(20);
        if i % 2 == 0 {
            write(root, &format!("bot/skills/skill-{i:02}.md"), &format!("{front}{body}"));
        } else {
            write(root, &format!("bot/skills/skill-{i:02}/SKILL.md"), &format!("{front}{body}"));
            write(root, &format!("bot/skills/skill-{i:02}/reference.md"), "Details.\n");
        }
    }
    for i in 0..SUBAGENTS {
        write(
            root,
            &format!("bot/subagents/sub-{i:02}/agent.toml"),
            &format!("description = \"Specialist {i}: delegate area {i} here.\"\n"),
        );
        write(root, &format!("bot/subagents/sub-{i:02}/instructions.md"), "You are a specialist.\n");
    }
    write(
        root,
        "bot/channels/hooks.toml",
        "kind = \"webhook\"\n[[routes]]\nmethod = \"POST\"\npath = \"/in\"\nhandler = [\"python3\", \"lib/tool.py\"]\nbody_schema = { type = \"object\" }\n",
    );
    write(root, "bot/schedules/daily.md", "---\ncron: \"0 9 * * 1-5\"\n---\nReport.\n");
    write(root, "evals/evals.toml", "max_concurrency = 4\n");
    write(root, "evals/smoke.eval.toml", "message = \"hi\"\n[expect]\ncalled_tool = [\"tool_000\"]\n");
}
