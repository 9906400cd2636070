//! Per-call latency through `ToolRegistry::call`, in process (no HTTP): a native tool, a command
//! tool under python3 and under /bin/sh, and a persistent python3 tool. Prints p50/p99/mean and
//! ratios; never fails on absolute times. Run: `cargo bench -p bdk-tools --bench calls`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use bdk_project::model::{Execution, Predicate, ToolBody, ToolDef};
use bdk_protocol::info::Source;
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError, ToolInvocation, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoInput {
    text: String,
}

struct Echo;

impl NativeTool for Echo {
    type Input = EchoInput;

    fn name(&self) -> &str {
        "native_echo"
    }

    fn description(&self) -> &str {
        "Echo."
    }

    async fn call(&self, input: EchoInput, _ctx: ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ "text": input.text }))
    }
}

const PY_ONCE: &str = "#!/usr/bin/env python3\nimport json, sys\nr = json.load(sys.stdin)\n\
json.dump({'text': r['input']['text']}, sys.stdout)\n";

const PY_PERSISTENT: &str = "#!/usr/bin/env python3\nimport json, sys\nfor line in sys.stdin:\n    \
r = json.loads(line)\n    \
sys.stdout.write(json.dumps({'id': r['id'], 'result': {'text': r['input']['text']}}) + '\\n')\n    \
sys.stdout.flush()\n";

fn def(name: &str, argv: &[&str], cwd: &std::path::Path, persistent: bool) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: "bench".to_owned(),
        source: Source::File,
        file: None,
        execution: Execution::Server,
        effect_write: Predicate::Always(false),
        needs_approval: Predicate::Always(false),
        input_schema: json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
        output_schema: None,
        dry_run_result: None,
        time_args: Vec::new(),
        timeout: Duration::from_secs(30),
        body: ToolBody::Command(argv.iter().map(|s| s.to_string()).collect()),
        persistent,
        cwd: cwd.to_path_buf(),
    }
}

struct Figures {
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

async fn measure(tools: &ProjectTools, name: &str, warmup: usize, calls: usize) -> Figures {
    let mut times = Vec::with_capacity(calls);
    for i in 0..warmup + calls {
        let invocation = ToolInvocation::generate(name, json!({"text": "hello"}));
        let started = Instant::now();
        let outcome = tools.call(invocation, CancellationToken::new()).await;
        let took = started.elapsed();
        assert!(!outcome.is_error, "{name}: {outcome:?}");
        if i >= warmup {
            times.push(took);
        }
    }
    times.sort();
    let pick = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    Figures { p50: pick(0.50), p99: pick(0.99), mean }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let bot = dir.path().join("bot");
    fs::create_dir_all(bot.join("lib")).unwrap();
    for (file, body) in [("lib/once.py", PY_ONCE), ("lib/persistent.py", PY_PERSISTENT)] {
        let path = bot.join(file);
        fs::write(&path, body).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let sh = r#"read -r line; printf '{"text":"hello"}'"#;
    let tools = ProjectTools::empty(&bot)
        .without_builtins()
        .native(Echo)
        .tool(def("py_command", &["python3", "lib/once.py"], &bot, false))
        .tool(def("sh_command", &["/bin/sh", "-c", sh], &bot, false))
        .tool(def("py_persistent", &["python3", "lib/persistent.py"], &bot, true))
        .build()
        .unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let cases: [(&str, usize, usize); 4] =
            [("native_echo", 200, 5000), ("py_persistent", 50, 2000), ("sh_command", 10, 300), ("py_command", 5, 100)];
        println!("{:<15} {:>7} {:>12} {:>12} {:>12}", "tool", "calls", "p50", "p99", "mean");
        let mut native_p50 = None;
        for (name, warmup, calls) in cases {
            let f = measure(&tools, name, warmup, calls).await;
            let base = *native_p50.get_or_insert(f.p50);
            println!(
                "{name:<15} {calls:>7} {:>12} {:>12} {:>12}   p50 = {:.0}x native",
                format!("{:.1?}", f.p50),
                format!("{:.1?}", f.p99),
                format!("{:.1?}", f.mean),
                f.p50.as_secs_f64() / base.as_secs_f64(),
            );
        }
    });
}
