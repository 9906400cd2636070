mod conformance;
mod database;
mod support;
