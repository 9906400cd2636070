//! Feeds arbitrary text through every TOML/frontmatter → definition loader. The property is
//! the crate's promise: any input yields a definition or diagnostics, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    drop(bdk_project::fuzzing::load_definition(selector, &String::from_utf8_lossy(rest)));
});
