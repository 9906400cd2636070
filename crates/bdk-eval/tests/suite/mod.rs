mod concurrency;
mod examples;
mod expectations;
mod support;
