//! What changed between two runs (`bdk eval --compare A B`): cases that regressed (passed in A,
//! failed in B, or a lower pass rate) first, then fixes, then cases only one run has, then how
//! many stayed the same. Cases are matched by id.

use serde::Serialize;

use crate::report::{CaseStatus, RunSnapshot};

/// One case's change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseChange {
    pub id: String,
    pub before: Option<CaseStatus>,
    pub after: Option<CaseStatus>,
    pub pass_rate_before: Option<f64>,
    pub pass_rate_after: Option<f64>,
    /// The failed checks of B's first failed attempt, when B failed it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
}

/// The comparison of run `a` (before) with run `b` (after).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub before: String,
    pub after: String,
    pub regressions: Vec<CaseChange>,
    pub fixes: Vec<CaseChange>,
    /// Only in `b`.
    pub added: Vec<CaseChange>,
    /// Only in `a`.
    pub removed: Vec<CaseChange>,
    pub unchanged: usize,
    pub cost_usd_before: f64,
    pub cost_usd_after: f64,
}

impl Comparison {
    pub fn has_regressions(&self) -> bool {
        !self.regressions.is_empty()
    }
}

pub fn compare(a: &RunSnapshot, b: &RunSnapshot) -> Comparison {
    let mut out = Comparison {
        before: a.run_id.clone(),
        after: b.run_id.clone(),
        regressions: Vec::new(),
        fixes: Vec::new(),
        added: Vec::new(),
        removed: Vec::new(),
        unchanged: 0,
        cost_usd_before: a.totals.cost_usd,
        cost_usd_after: b.totals.cost_usd,
    };
    for after in &b.cases {
        let failed_checks: Vec<String> = after
            .attempts
            .iter()
            .find(|t| !t.passed)
            .map(|t| {
                let mut lines: Vec<String> = t
                    .checks
                    .iter()
                    .filter(|c| !c.passed)
                    .map(|c| format!("{} {}: {}", c.kind, c.expected, c.detail))
                    .collect();
                if lines.is_empty() {
                    lines.extend(t.error.clone());
                }
                lines
            })
            .unwrap_or_default();
        let Some(before) = a.case(&after.id) else {
            out.added.push(CaseChange {
                id: after.id.clone(),
                before: None,
                after: Some(after.status),
                pass_rate_before: None,
                pass_rate_after: Some(after.pass_rate),
                failed_checks,
            });
            continue;
        };
        let change = CaseChange {
            id: after.id.clone(),
            before: Some(before.status),
            after: Some(after.status),
            pass_rate_before: Some(before.pass_rate),
            pass_rate_after: Some(after.pass_rate),
            failed_checks,
        };
        let worse = (before.status == CaseStatus::Passed && after.status != CaseStatus::Passed)
            || (after.pass_rate < before.pass_rate);
        let better = (before.status != CaseStatus::Passed && after.status == CaseStatus::Passed)
            || (after.pass_rate > before.pass_rate);
        if worse {
            out.regressions.push(change);
        } else if better {
            out.fixes.push(CaseChange { failed_checks: Vec::new(), ..change });
        } else {
            out.unchanged += 1;
        }
    }
    for before in a.cases.iter().filter(|c| b.case(&c.id).is_none()) {
        out.removed.push(CaseChange {
            id: before.id.clone(),
            before: Some(before.status),
            after: None,
            pass_rate_before: Some(before.pass_rate),
            pass_rate_after: None,
            failed_checks: Vec::new(),
        });
    }
    out
}

/// The comparison as text, regressions first.
pub fn to_text(c: &Comparison) -> String {
    let rate = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{:.0}%", r * 100.0));
    let status = |s: Option<CaseStatus>| s.map_or("-".to_owned(), |s| format!("{s:?}").to_lowercase());
    let mut out = format!("comparing {} (before) with {} (after)\n", c.before, c.after);
    for (title, list) in
        [("regressions", &c.regressions), ("fixed", &c.fixes), ("new", &c.added), ("removed", &c.removed)]
    {
        if list.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{title} ({}):\n", list.len()));
        for change in list {
            out.push_str(&format!(
                "  {}  {} {} -> {} {}\n",
                change.id,
                status(change.before),
                rate(change.pass_rate_before),
                status(change.after),
                rate(change.pass_rate_after)
            ));
            for line in &change.failed_checks {
                out.push_str(&format!("      {line}\n"));
            }
        }
    }
    out.push_str(&format!(
        "\n{} regression(s), {} fixed, {} new, {} removed, {} unchanged; cost ${:.6} -> ${:.6}\n",
        c.regressions.len(),
        c.fixes.len(),
        c.added.len(),
        c.removed.len(),
        c.unchanged,
        c.cost_usd_before,
        c.cost_usd_after
    ));
    out
}
