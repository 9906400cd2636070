mod annotations;
mod everything;
mod failures;
mod support;
