mod examples;
mod init;
mod serve;
mod support;
mod validate;
