mod artifacts;
mod conformance;
mod database;
mod fencing;
mod leases;
mod support;
