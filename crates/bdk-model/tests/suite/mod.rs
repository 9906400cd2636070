mod anthropic;
mod conformance;
mod cost;
mod openai;
mod resolve;
mod retry;
mod scripted;
mod support;
