mod everything;
mod failures;
mod support;
