//! Behaviour tests of the filesystem backend through the public traits.

mod conformance;
mod durability;
mod follow;
mod host_data;
mod indices;
mod kv;
mod records;
mod recovery;
mod replay;
mod sessions;
mod support;
mod workspaces;
