mod cost_url;
mod examples;
mod init;
mod run;
mod serve;
mod serve_model;
mod support;
mod validate;
