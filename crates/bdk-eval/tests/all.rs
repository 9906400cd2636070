//! The eval runner's integration suite.

mod suite;
