//! Behaviour tests of the session engine through its public API.

mod ab;
mod admission;
mod approvals;
mod direct;
mod disk_faults;
mod dry_run;
mod extensions;
mod failure_codes;
mod folder;
mod hooks;
mod host;
mod hot_path;
mod lifecycle;
mod limits;
mod listing;
mod recovery;
mod recursion;
mod reminders;
mod result_gate;
mod schedules;
mod skills;
mod subagents;
mod support;
mod tokens;
mod tool_project;
mod turns;
