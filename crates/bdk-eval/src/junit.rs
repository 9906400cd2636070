//! JUnit XML for CI (`bdk eval --junit FILE`): one `<testsuite>` per run, one `<testcase>` per
//! case with its pass rate in the name's properties, a `<failure>` listing every failed check of
//! every failed attempt, and `<skipped>` for cases a cancelled run never finished.

use std::fmt::Write as _;

use crate::report::{CaseStatus, RunSnapshot};

/// The run as a JUnit XML document.
pub fn to_xml(run: &RunSnapshot) -> String {
    let seconds = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    let total_ms: u64 = run.cases.iter().map(|c| c.duration_ms).sum();
    let skipped = run.cases.iter().filter(|c| !matches!(c.status, CaseStatus::Passed | CaseStatus::Failed)).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"bdk eval\" tests=\"{}\" failures=\"{}\" skipped=\"{skipped}\" time=\"{}\">",
        run.totals.cases,
        run.totals.failed,
        seconds(total_ms)
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" id=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\" timestamp=\"{}\">",
        escape(&run.agent),
        escape(&run.run_id),
        run.totals.cases,
        run.totals.failed,
        seconds(total_ms),
        run.started_at.format("%Y-%m-%dT%H:%M:%S")
    );
    for case in &run.cases {
        let _ = writeln!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\" time=\"{}\">",
            escape(&format!("evals.{}", run.agent)),
            escape(&case.id),
            escape(&case.file),
            seconds(case.duration_ms)
        );
        let _ = writeln!(out, "      <properties>");
        let _ = writeln!(out, "        <property name=\"passRate\" value=\"{:.3}\"/>", case.pass_rate);
        let _ = writeln!(out, "        <property name=\"passes\" value=\"{}/{}\"/>", case.passes, case.attempts.len());
        let _ = writeln!(out, "        <property name=\"costUsd\" value=\"{:.6}\"/>", case.cost_usd);
        let _ = writeln!(out, "      </properties>");
        match case.status {
            CaseStatus::Passed => {}
            CaseStatus::Failed => {
                let mut body = String::new();
                for attempt in case.attempts.iter().filter(|a| !a.passed) {
                    let _ = writeln!(body, "iteration {}: {:?}", attempt.iteration, attempt.outcome);
                    if let Some(error) = &attempt.error {
                        let _ = writeln!(body, "  {error}");
                    }
                    for check in attempt.checks.iter().filter(|c| !c.passed) {
                        let graded = if check.model_graded { " (model-graded)" } else { "" };
                        let _ = writeln!(body, "  {}{graded} {}: {}", check.kind, check.expected, check.detail);
                        if let Some(reasoning) = &check.reasoning {
                            let _ = writeln!(body, "    judge: {reasoning}");
                        }
                    }
                }
                let message = format!(
                    "passed {}/{} iterations (pass rate {:.0}%)",
                    case.passes,
                    case.attempts.len(),
                    case.pass_rate * 100.0
                );
                let _ = writeln!(
                    out,
                    "      <failure message=\"{}\" type=\"eval\">{}</failure>",
                    escape(&message),
                    escape(&body)
                );
            }
            _ => {
                let _ = writeln!(out, "      <skipped message=\"{}\"/>", escape("the run did not finish this case"));
            }
        }
        let _ = writeln!(out, "    </testcase>");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// XML text and attribute escaping; characters XML 1.0 cannot hold are dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;");
    }
}
