//! One entry point that feeds arbitrary text to any definition loader, shared by the cargo-fuzz
//! target (`fuzz/`) and the mutation test in the integration suite. Not part of the public API.

use std::path::PathBuf;

use crate::diag::Diagnostics;
use crate::formats::{
    Origin, ab, agent, artifacts, channel, connection, hook, reminder, result, schedule, storage, tool,
};
use crate::model::ConnectionScope;
use crate::parse;
use crate::source::SourceFile;

/// How many loaders `selector` chooses among (it is taken modulo this).
pub const LOADERS: u8 = 13;

/// Runs the loader chosen by `selector` on `text`. The property under test: it returns.
pub fn load_definition(selector: u8, text: &str) -> Diagnostics {
    let src = SourceFile { path: PathBuf::from("bot/x"), rel: "bot/x".to_owned(), text: text.to_owned() };
    let bot = PathBuf::from("bot");
    let origin = Origin::project(bot.clone());
    let mut d = Diagnostics::new();
    match selector % LOADERS {
        0 => drop(tool::load(&src, "x", &origin, &mut d)),
        1 => drop(connection::load(&src, "x", ConnectionScope::Model, &origin, &mut d)),
        2 => drop(channel::load(&src, "x", &origin, &mut d)),
        3 => drop(hook::load(&src, "x", &origin, &mut d)),
        4 => drop(schedule::load_toml(&src, "x", &origin, &mut d)),
        5 => drop(schedule::load_markdown(&src, "x", &origin, &mut d)),
        6 => drop(reminder::load(&src, "x", &origin, &mut d)),
        7 => drop(artifacts::load(&src, &origin, &mut d)),
        8 => drop(result::load(&src, &bot, &mut d)),
        9 => drop(storage::load(&src, &mut d)),
        10 => drop(ab::load(&src, "x", &mut d)),
        11 => drop(agent::load_root(&src, &mut d)),
        _ => {
            if let Some(md) = parse::markdown(&src, &mut d) {
                drop(parse::frontmatter::<serde_json::Value>(&src, &md, &mut d));
            }
        }
    }
    d
}
