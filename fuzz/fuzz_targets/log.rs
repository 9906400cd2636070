//! Feeds arbitrary bytes as an event log file (torn tails, garbage, out-of-order lines) to the
//! store's recovery and reader. The properties are checked in `bdk_store::fuzzing`: recovery
//! returns, keeps exactly a valid prefix (or reports corruption and changes nothing), what it
//! keeps reads back, and a second recovery drops nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bdk_store::fuzzing::recover_and_read(data);
});
