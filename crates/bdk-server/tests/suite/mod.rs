mod auth;
mod errors;
mod host;
mod race;
mod session;
mod shutdown;
mod stream;
mod support;
