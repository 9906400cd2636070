mod artifacts;
mod conformance;
mod database;
mod leases;
mod support;
