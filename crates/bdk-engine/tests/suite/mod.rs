//! Behaviour tests of the session engine through its public API.

mod admission;
mod lifecycle;
mod recovery;
mod support;
mod tokens;
mod turns;
