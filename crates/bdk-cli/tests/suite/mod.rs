mod examples;
mod init;
mod support;
mod validate;
