//! Guards that the PostgreSQL backend passes the store-trait conformance suite, the same checks
//! the filesystem backend runs (`bdk_store::conformance`), with a second replica where it applies.

use super::support::backend;

bdk_store::conformance_suite!(backend());
