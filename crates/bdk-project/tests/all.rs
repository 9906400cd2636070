//! The bdk-project integration suite: small fixture projects on disk, discovered as `bdk
//! validate` would discover them, with assertions on diagnostic codes and positions.

// clippy.toml allows these inside #[test] functions; the fixture builder and assertion helpers
// are test code too, where a failed setup step should fail the test loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod suite;
