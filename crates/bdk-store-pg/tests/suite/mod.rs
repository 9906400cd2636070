mod artifacts;
mod conformance;
mod database;
mod evals;
mod fencing;
mod leases;
mod support;
