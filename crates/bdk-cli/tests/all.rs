//! Integration tests for the `bdk` binary: run as a user runs it, read what it prints.

mod suite;
