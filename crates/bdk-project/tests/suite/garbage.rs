//! Mutated definitions never panic a loader: a deterministic, stable-toolchain cousin of the
//! cargo-fuzz target in `fuzz/`. Valid files from the examples are truncated, byte-flipped and
//! spliced, and every result must be a definition or diagnostics.

use std::path::PathBuf;

use bdk_project::diag::Diagnostics;
use bdk_project::formats::{
    Origin, ab, agent, artifacts, channel, connection, hook, reminder, schedule, storage, tool,
};
use bdk_project::model::ConnectionScope;
use bdk_project::parse;
use bdk_project::source::SourceFile;

/// xorshift64*: enough randomness for mutations, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

const SEEDS: &[&str] = &[
    include_str!("../../../../examples/ops-bot/bot/tools/page_oncall.toml"),
    include_str!("../../../../examples/ops-bot/bot/channels/alerts.toml"),
    include_str!("../../../../examples/ops-bot/bot/hooks/audit.toml"),
    include_str!("../../../../examples/ops-bot/bot/schedules/morning-report.md"),
    include_str!("../../../../examples/ops-bot/bot/artifacts.toml"),
    include_str!("../../../../examples/ops-bot/bot/agent.toml"),
    include_str!("../../../../examples/pr-reviewer/bot/tools/submit_review.toml"),
];

const NOISE: &[&str] = &[
    "[",
    "]]",
    "{",
    "\"",
    "'''",
    "---\n",
    "= [",
    "\n[[routes]]\n",
    "\u{feff}",
    "\\u{0}",
    "${",
    "é",
    "\n",
    "#",
    "= {a={b={c={}}}}",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 => bytes.truncate(rng.below(bytes.len() + 1)),
            1 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] = u8::try_from(rng.below(256)).unwrap_or(b'x');
            }
            2 => {
                let at = rng.below(bytes.len() + 1);
                let noise = NOISE[rng.below(NOISE.len())].as_bytes();
                bytes.splice(at..at, noise.iter().copied());
            }
            _ => {
                let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
                let cut = rng.below(other.len());
                bytes.extend_from_slice(&other[cut..]);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn load_all(text: String, kind: usize) {
    let src = SourceFile { path: PathBuf::from("bot/x"), rel: "bot/x".to_owned(), text };
    let bot = PathBuf::from("bot");
    let origin = Origin::project(bot.clone());
    let mut d = Diagnostics::new();
    match kind % 12 {
        0 => drop(tool::load(&src, "x", &origin, &mut d)),
        1 => drop(connection::load(&src, "x", ConnectionScope::Model, &origin, &mut d)),
        2 => drop(channel::load(&src, "x", &origin, &mut d)),
        3 => drop(hook::load(&src, "x", &origin, &mut d)),
        4 => drop(schedule::load_toml(&src, "x", &origin, &mut d)),
        5 => drop(schedule::load_markdown(&src, "x", &origin, &mut d)),
        6 => drop(reminder::load(&src, "x", &origin, &mut d)),
        7 => drop(artifacts::load(&src, &origin, &mut d)),
        8 => drop(storage::load(&src, &mut d)),
        9 => drop(ab::load(&src, "x", &mut d)),
        10 => drop(agent::load_root(&src, &mut d)),
        _ => {
            if let Some(md) = parse::markdown(&src, &mut d) {
                drop(parse::frontmatter::<serde_json::Value>(&src, &md, &mut d));
            }
        }
    }
}

#[test]
fn mutated_definitions_never_panic() {
    let mut rng = Rng(0x5EED_BDC0_FFEE_0001);
    for round in 0..3000 {
        let seed = SEEDS[round % SEEDS.len()];
        let text = mutate(&mut rng, seed);
        let kind = rng.below(12);
        let outcome = std::panic::catch_unwind(|| load_all(text.clone(), kind));
        assert!(outcome.is_ok(), "loader {kind} panicked on:\n{text}");
    }
}
