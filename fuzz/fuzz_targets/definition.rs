//! Feeds arbitrary text through every TOML/frontmatter → definition loader. The property is
//! the crate's promise: any input yields a definition or diagnostics, never a panic or a hang.
#![no_main]

use std::path::PathBuf;

use bdk_project::diag::Diagnostics;
use bdk_project::formats::{Origin, ab, agent, artifacts, channel, connection, hook, reminder, result, schedule, storage, tool};
use bdk_project::model::ConnectionScope;
use bdk_project::parse;
use bdk_project::source::SourceFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let src = SourceFile { path: PathBuf::from("bot/x"), rel: "bot/x".to_owned(), text };
    let origin = Origin::project(PathBuf::from("bot"));
    let mut d = Diagnostics::new();
    match kind % 13 {
        0 => drop(tool::load(&src, "x", &origin, &mut d)),
        1 => drop(connection::load(&src, "x", ConnectionScope::Model, &origin, &mut d)),
        2 => drop(channel::load(&src, "x", &origin, &mut d)),
        3 => drop(hook::load(&src, "x", &origin, &mut d)),
        4 => drop(schedule::load_toml(&src, "x", &origin, &mut d)),
        5 => drop(schedule::load_markdown(&src, "x", &origin, &mut d)),
        6 => drop(reminder::load(&src, "x", &origin, &mut d)),
        7 => drop(artifacts::load(&src, &origin, &mut d)),
        8 => drop(result::load(&src, &origin.bot_dir, &mut d)),
        9 => drop(storage::load(&src, &mut d)),
        10 => drop(ab::load(&src, "x", &mut d)),
        11 => drop(agent::load_root(&src, &mut d)),
        _ => {
            if let Some(md) = parse::markdown(&src, &mut d) {
                drop(parse::frontmatter::<serde_json::Value>(&src, &md, &mut d));
            }
        }
    }
});
