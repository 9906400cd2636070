//! Test support shared by BDK's crates: a fake model server on a real socket (`127.0.0.1:0`)
//! that answers with scripted replies and records every request body, and the small builders
//! that script what the real services stream — Chat Completions chunks ([`openai_sse`]) and
//! Anthropic Messages events ([`anthropic_sse`]); and processes run with a time limit
//! ([`process`]).
//!
//! It depends on no BDK crate, so any crate (`bdk-model`, `bdk-engine`, `bdk-cli`) can take it
//! as a dev-dependency without a cycle. It is never a normal dependency.
//!
//! ```no_run
//! # async fn demo() {
//! use bdk_test_support::{FakeServer, Reply, openai_sse as oa};
//! let server = FakeServer::start().await;
//! server.push(Reply::sse(vec![oa::role(), oa::text("hi"), oa::finish("stop"), oa::usage(3, 1, 0, 0), oa::done()]));
//! // point a provider at server.url(), call it, then look at server.requests()
//! # }
//! ```

pub mod anthropic_sse;
pub mod fake_server;
pub mod openai_sse;
pub mod peers;
pub mod postgres;
pub mod process;

pub use fake_server::{End, FakeServer, Part, Recorded, Reply, rechunk};
