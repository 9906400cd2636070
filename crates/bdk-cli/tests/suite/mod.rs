mod cost_url;
mod examples;
mod init;
mod run;
mod serve;
mod support;
mod validate;
