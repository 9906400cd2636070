//! What this build discovers and validates but does not act on at run time yet: one
//! `not_run_yet` warning per such file, so a folder that validates never implies that a part it
//! declares is running. Remove an entry here in the commit that makes the part run.

use crate::diag::{Code, Diagnostics};
use crate::model::Project;

pub fn not_run_yet(project: &Project, diags: &mut Diagnostics) {
    let mut warn = |file: &str, what: &str| {
        diags.report(Code::NotRunYet, Some(file), None, format!("{file}: {what} does not run yet in this build"));
    };
    if let Some(storage) = &project.storage {
        if !storage.debounce.is_zero() {
            warn(&storage.file, "`policy.debounce_ms` (every write is synced as it happens)");
        }
        if storage.restore_max_sessions.is_some() || storage.restore_max_age.is_some() {
            warn(&storage.file, "`policy.restore` (start-up recovers every open session)");
        }
    }
}
