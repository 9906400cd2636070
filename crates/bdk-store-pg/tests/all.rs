//! The bdk-store-pg integration suite, against the PostgreSQL that `BDK_TEST_DATABASE_URL` names
//! (skipped loudly without it). One fresh schema per test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
