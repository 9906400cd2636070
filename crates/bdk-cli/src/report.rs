//! Text rendering for people: diagnostics grouped by file, and the `info` summary. JSON output
//! never goes through here.

use std::fmt::Write as _;

use bdk_project::Discovery;
use bdk_protocol::Diagnostic;
use bdk_protocol::info::{ProjectInfo, Source};
use serde_json::Value;

pub fn count<'a>(diags: impl Iterator<Item = &'a Diagnostic>) -> (usize, usize) {
    diags.fold((0, 0), |(e, w), d| if d.is_error() { (e + 1, w) } else { (e, w + 1) })
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// `error[code] file:line:col: message`
pub fn one_line(d: &Diagnostic) -> String {
    let place = match (&d.file, d.line, d.column) {
        (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}: "),
        (Some(f), Some(l), None) => format!("{f}:{l}: "),
        (Some(f), None, _) => format!("{f}: "),
        (None, ..) => String::new(),
    };
    format!("{}[{}] {place}{}", d.severity.as_str(), d.code, d.message)
}

/// Every diagnostic, per project, grouped by file, with a closing count.
pub fn diagnostics_text(discovery: &Discovery) -> String {
    let mut out = String::new();
    if !discovery.diagnostics.is_empty() {
        group(&mut out, &discovery.diagnostics);
    }
    for project in &discovery.projects {
        let (errors, warnings) = count(project.diagnostics.iter());
        let _ = writeln!(out, "{} ({})", project.slug, project.dir.display());
        if project.diagnostics.is_empty() {
            let _ = writeln!(out, "  ok: no problems found\n");
            continue;
        }
        group(&mut out, &project.diagnostics);
        let _ = writeln!(out, "  {}, {}\n", plural(errors, "error"), plural(warnings, "warning"));
    }
    let (errors, warnings) = count(discovery.all_diagnostics());
    let verdict = if errors > 0 { "failed" } else { "passed" };
    let _ = writeln!(out, "validation {verdict}: {}, {}", plural(errors, "error"), plural(warnings, "warning"));
    out
}

fn group(out: &mut String, diags: &[Diagnostic]) {
    let mut current: Option<&Option<String>> = None;
    for d in diags {
        if current != Some(&d.file) {
            let _ = writeln!(out, "  {}", d.file.as_deref().unwrap_or("(project)"));
            current = Some(&d.file);
        }
        let place = match (d.line, d.column) {
            (Some(l), Some(c)) => format!(" {l}:{c}"),
            (Some(l), None) => format!(" {l}"),
            _ => String::new(),
        };
        let _ = writeln!(out, "    {}[{}]{place} {}", d.severity.as_str(), d.code, d.message);
        if let Some(hint) = &d.hint {
            let _ = writeln!(out, "      hint: {hint}");
        }
    }
}

/// The readable `bdk info` summary of one project.
pub fn summary(info: &ProjectInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} ({}/, slug {})", info.name, info.layout, info.slug);
    if let Some(d) = &info.description {
        let _ = writeln!(out, "  {d}");
    }
    let provider = info.model.provider.as_deref().unwrap_or("auto");
    let _ = writeln!(out, "  model         {} ({provider}, from {})", info.model.id, info.model.source);
    let _ =
        writeln!(out, "  instructions  {} ({} bytes)", list_or_none(&info.instructions.files), info.instructions.bytes);
    let tools: Vec<String> = info
        .tools
        .iter()
        .map(|t| {
            let effect = t.effect.as_str().unwrap_or("predicate");
            let approval = match &t.needs_approval {
                Value::Bool(false) => "",
                Value::Bool(true) => ", approval",
                _ => ", approval when",
            };
            let from = match t.source {
                Source::File => "",
                Source::Native => ", native",
                Source::Extension => ", extension",
            };
            format!("{} [{}, {effect}{approval}{from}]", t.name, t.execution)
        })
        .collect();
    section(&mut out, "tools", &tools);
    section(&mut out, "skills", &info.skills.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    section(
        &mut out,
        "connections",
        &info.connections.iter().map(|c| format!("{} [{}, {}]", c.name, c.scope, c.transport)).collect::<Vec<_>>(),
    );
    section(&mut out, "subagents", &info.subagents.iter().map(|s| s.id.clone()).collect::<Vec<_>>());
    let routes: Vec<String> = info
        .channels
        .iter()
        .flat_map(|c| c.routes.iter().map(move |r| format!("{} {} ({})", r.method, r.mounted_path, c.kind)))
        .collect();
    section(&mut out, "channels", &info.channels.iter().map(|c| format!("{} [{}]", c.id, c.kind)).collect::<Vec<_>>());
    section(&mut out, "routes", &routes);
    let schedules: Vec<String> = info
        .schedules
        .iter()
        .map(|s| {
            let next = s.next_fire_at.as_deref().unwrap_or("never");
            let last = match &s.last_firing {
                Some(f) => format!(", last {} (due {})", f.status, f.due_at),
                None => String::new(),
            };
            format!("{} \"{}\" {} next {next}{last}", s.id, s.cron, s.kind)
        })
        .collect();
    section(&mut out, "schedules", &schedules);
    section(
        &mut out,
        "hooks",
        &info.hooks.iter().map(|h| format!("{} [{}]", h.name, h.events.join(", "))).collect::<Vec<_>>(),
    );
    section(&mut out, "reminders", &info.reminders.iter().map(|r| r.name.clone()).collect::<Vec<_>>());
    if let Some(a) = &info.artifacts {
        section(&mut out, "artifacts", &a.kinds.iter().map(|k| k.name.clone()).collect::<Vec<_>>());
    }
    section(&mut out, "a/b", &info.abs.iter().map(|a| format!("{} ({} arms)", a.id, a.arms.len())).collect::<Vec<_>>());
    section(
        &mut out,
        "extensions",
        &info.extensions.iter().map(|e| format!("{}__ ({} tools)", e.namespace, e.tools.len())).collect::<Vec<_>>(),
    );
    section(&mut out, "seeds", &info.sandbox.seeds);
    if let Some(evals) = &info.evals {
        section(&mut out, "evals", &evals.cases.iter().map(|c| c.id.clone()).collect::<Vec<_>>());
    }
    let (errors, warnings) = count(info.diagnostics.iter());
    let verdict = if errors + warnings == 0 {
        "none".to_owned()
    } else {
        format!("{}, {} (run `bdk validate`)", plural(errors, "error"), plural(warnings, "warning"))
    };
    let _ = writeln!(out, "  diagnostics   {verdict}\n");
    out
}

fn section(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let label = format!("{title} ({})", items.len());
    let _ = writeln!(out, "  {label:<13} {}", items.join(", "));
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".to_owned() } else { items.join(", ") }
}

/// Writes to stdout. A closed pipe (`bdk info --json | head`) ends the write quietly instead
/// of panicking like `print!` does.
/// Diagnostics text with severities coloured (red errors, yellow warnings, dim hints), for a
/// terminal without `NO_COLOR`.
pub fn colourise(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let styled = if trimmed.starts_with("error[") || trimmed.starts_with("validation failed") {
            Some("\x1b[31m")
        } else if trimmed.starts_with("warning[") {
            Some("\x1b[33m")
        } else if trimmed.starts_with("hint: ") {
            Some("\x1b[2m")
        } else {
            None
        };
        match styled {
            Some(style) => {
                let body = trimmed.trim_end_matches('\n');
                let newline = if trimmed.ends_with('\n') { "\n" } else { "" };
                out.push_str(&format!("{indent}{style}{body}\x1b[0m{newline}"));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Writes diagnostics (or any report) to stderr, where docs/cli.md puts them for commands whose
/// stdout carries their own output.
pub fn emit_err(text: &str) {
    use std::io::Write as _;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes()).and_then(|()| stderr.flush());
}

pub fn emit(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bdk_protocol::Severity;

    #[test]
    fn colour_marks_severities_and_keeps_the_text() {
        let text = "  a.toml\n    error[x] bad\n      hint: fix\n    warning[y] meh\n";
        let coloured = colourise(text);
        assert!(coloured.contains("    \x1b[31merror[x] bad\x1b[0m\n"));
        assert!(coloured.contains("\x1b[33mwarning[y] meh"));
        let plain: String =
            coloured.replace("\x1b[31m", "").replace("\x1b[33m", "").replace("\x1b[2m", "").replace("\x1b[0m", "");
        assert_eq!(plain, text);
    }

    #[test]
    fn one_line_includes_place_and_code() {
        let d = Diagnostic {
            code: "invalid_cron".into(),
            severity: Severity::Error,
            file: Some("bot/schedules/a.md".into()),
            line: Some(2),
            column: Some(1),
            message: "bad".into(),
            hint: None,
        };
        assert_eq!(one_line(&d), "error[invalid_cron] bot/schedules/a.md:2:1: bad");
    }
}
