//! Shared assertions: find a diagnostic by its stable code and check its severity, file and
//! position. Every diagnostic found this way must carry a message and a fix hint.

mod bad_input;
mod channels;
mod commands;
mod connections;
mod evals;
mod extensions;
mod fixture;
mod garbage;
mod hooks;
mod layout;
mod manifest;
mod parsing;
mod root_files;
mod runtime_gaps;
mod schedules;
mod skills;
mod subagents;
mod tools;

use bdk_project::Code;
use bdk_protocol::{Diagnostic, Severity};

/// The diagnostics of a project, a discovery, or a plain list.
pub trait HasDiagnostics {
    fn diags(&self) -> Vec<&Diagnostic>;
}

// `not_run_yet` says which validated parts this build does not run yet; the format tests look
// past it (`runtime_gaps.rs` checks it on its own).
impl HasDiagnostics for bdk_project::Project {
    fn diags(&self) -> Vec<&Diagnostic> {
        self.diagnostics.iter().filter(|d| d.code != "not_run_yet").collect()
    }
}

impl HasDiagnostics for bdk_project::Discovery {
    fn diags(&self) -> Vec<&Diagnostic> {
        self.all_diagnostics().filter(|d| d.code != "not_run_yet").collect()
    }
}

impl HasDiagnostics for [Diagnostic] {
    fn diags(&self) -> Vec<&Diagnostic> {
        self.iter().collect()
    }
}

fn listing(all: &[&Diagnostic]) -> String {
    all.iter()
        .map(|d| {
            format!(
                "  {}[{}] {}:{}:{} {}",
                d.severity.as_str(),
                d.code,
                d.file.as_deref().unwrap_or("-"),
                d.line.map_or("-".to_owned(), |l| l.to_string()),
                d.column.map_or("-".to_owned(), |c| c.to_string()),
                d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every diagnostic with `code`, each checked for a message and a hint.
pub fn all_with<'a>(of: &'a (impl HasDiagnostics + ?Sized), code: &str) -> Vec<&'a Diagnostic> {
    let found: Vec<&Diagnostic> = of.diags().into_iter().filter(|d| d.code == code).collect();
    for d in &found {
        assert!(!d.message.trim().is_empty(), "[{code}] has an empty message");
        assert!(d.hint.as_deref().is_some_and(|h| !h.trim().is_empty()), "[{code}] has no hint: {}", d.message);
        assert!(Code::ALL.iter().any(|c| c.as_str() == d.code), "[{code}] is not a documented code");
        assert!(!d.message.contains('\n'), "[{code}] message spans lines: {:?}", d.message);
        if let Some(file) = &d.file {
            assert!(!names_path(&d.message, file), "[{code}] message repeats its file {file}: {}", d.message);
        }
    }
    found
}

/// Whether `message` names `path` as a whole path (not as a piece of a longer one, so
/// `evals/evals.toml` does not name `evals`).
pub fn names_path(message: &str, path: &str) -> bool {
    let part_of_path = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-');
    message.match_indices(path).any(|(at, _)| {
        let before = message[..at].chars().next_back();
        let after = message[at + path.len()..].chars().next();
        !before.is_some_and(part_of_path) && !after.is_some_and(|c| part_of_path(c) && c != '.')
    })
}

/// The first diagnostic with `code`; fails with the full list when there is none.
pub fn find<'a>(of: &'a (impl HasDiagnostics + ?Sized), code: &str) -> Check<'a> {
    match all_with(of, code).first() {
        Some(d) => Check(d),
        None => panic!("no [{code}] diagnostic among:\n{}", listing(&of.diags())),
    }
}

/// The only diagnostic with `code`.
pub fn only<'a>(of: &'a (impl HasDiagnostics + ?Sized), code: &str) -> Check<'a> {
    let found = all_with(of, code);
    assert_eq!(found.len(), 1, "expected one [{code}], got:\n{}", listing(&of.diags()));
    Check(found[0])
}

pub fn assert_none(of: &(impl HasDiagnostics + ?Sized), code: &str) {
    let found = all_with(of, code);
    assert!(found.is_empty(), "unexpected [{code}]:\n{}", listing(&found));
}

/// No diagnostic at all, warnings included.
pub fn assert_clean(of: &(impl HasDiagnostics + ?Sized)) {
    let all = of.diags();
    assert!(all.is_empty(), "expected no diagnostics, got:\n{}", listing(&all));
}

/// No errors (warnings allowed).
pub fn assert_no_errors(of: &(impl HasDiagnostics + ?Sized)) {
    let errors: Vec<&Diagnostic> = of.diags().into_iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "expected no errors, got:\n{}", listing(&errors));
}

/// The codes present, sorted and deduplicated.
pub fn codes(of: &(impl HasDiagnostics + ?Sized)) -> Vec<String> {
    let mut codes: Vec<String> = of.diags().into_iter().map(|d| d.code.clone()).collect();
    codes.sort();
    codes.dedup();
    codes
}

/// Chained checks on one diagnostic.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a>(pub &'a Diagnostic);

impl<'a> Check<'a> {
    pub fn error(self) -> Self {
        assert_eq!(self.0.severity, Severity::Error, "{:#?}", self.0);
        self
    }

    pub fn warning(self) -> Self {
        assert_eq!(self.0.severity, Severity::Warning, "{:#?}", self.0);
        self
    }

    pub fn file(self, file: &str) -> Self {
        assert_eq!(self.0.file.as_deref(), Some(file), "{:#?}", self.0);
        self
    }

    pub fn line(self, line: u32) -> Self {
        assert_eq!(self.0.line, Some(line), "{:#?}", self.0);
        self
    }

    pub fn at(self, line: u32, column: u32) -> Self {
        assert_eq!((self.0.line, self.0.column), (Some(line), Some(column)), "{:#?}", self.0);
        self
    }
}
