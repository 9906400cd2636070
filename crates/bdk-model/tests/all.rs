//! The bdk-model integration suite: providers against a fake server on a real socket,
//! the scripted provider, retries, resolution and cost. No test reaches the internet.

// clippy.toml allows these inside #[test] functions; the fake server and the scenario helpers
// are test code too, where a failed setup step should fail the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
