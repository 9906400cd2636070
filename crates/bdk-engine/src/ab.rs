//! Live A/B experiments (`ab.toml`, `ab/*.toml`): each new session is enrolled in one arm of
//! every enabled experiment when it is created (`ab.assigned`, right after `session.started`),
//! and its turns run with that arm's model and extra instructions. `GET /v1/abs` folds the
//! assignments and per-arm totals (sessions, turns, failures, tokens, cost) from the durable
//! logs, so they survive a restart and nothing keeps a second copy of the truth.
//!
//! Assignment is a stable hash of the experiment id and a sticky key over the arms' weights:
//! the channel token (`<channel>:<key>`) for a session started with a continuation key, so every
//! session of one channel conversation lands in the same arm, else the session id. The arm is
//! then read back from the session's log (`Conversation::assigned`), never recomputed, so
//! editing weights later does not move running sessions.
//!
//! It depends on the core (`actor.rs` assigns, `turn.rs` applies); nothing depends on it.

use std::collections::BTreeMap;

use bdk_protocol::event::AbAssigned;
use bdk_protocol::{EventData, SessionId};
use serde::Serialize;

use crate::capabilities::{AbArmSpec, AbSpec};
use crate::engine::Core;
use crate::types::ListScope;

/// The arm of each enabled experiment for a session with `sticky` as its key.
pub(crate) fn assign(specs: &[AbSpec], sticky: &str) -> Vec<AbAssigned> {
    specs
        .iter()
        .filter(|spec| spec.enabled)
        .filter_map(|spec| {
            let total: u64 = spec.arms.iter().map(|a| u64::from(a.weight)).sum();
            if total == 0 {
                return None;
            }
            let mut point = fnv1a(&format!("{}\u{0}{sticky}", spec.id)) % total;
            for arm in &spec.arms {
                let weight = u64::from(arm.weight);
                if point < weight {
                    return Some(AbAssigned { experiment: spec.id.clone(), arm: arm.id.clone() });
                }
                point -= weight;
            }
            None
        })
        .collect()
}

/// The arms a session's log assigned it, in experiment order.
pub(crate) fn arms<'a>(specs: &'a [AbSpec], assigned: &[(String, String)]) -> Vec<&'a AbArmSpec> {
    specs
        .iter()
        .filter_map(|spec| {
            let (_, arm) = assigned.iter().find(|(experiment, _)| *experiment == spec.id)?;
            spec.arms.iter().find(|a| a.id == *arm)
        })
        .collect()
}

/// Whether any of `arms` adds to the agent's instructions.
pub(crate) fn adds_instructions(arms: &[&AbArmSpec]) -> bool {
    arms.iter().any(|a| a.instructions.is_some())
}

/// The instructions with every assigned arm's extra instructions appended.
pub(crate) fn instructions(base: &str, arms: &[&AbArmSpec]) -> String {
    let extra: Vec<&str> = arms.iter().filter_map(|a| a.instructions.as_deref()).collect();
    if extra.is_empty() {
        return base.to_owned();
    }
    let mut out = base.trim_end().to_owned();
    for text in extra {
        out.push_str("\n\n");
        out.push_str(text.trim());
    }
    out
}

/// 64-bit FNV-1a: stable across builds and platforms (unlike std's hasher).
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// `GET /v1/abs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AbReport {
    pub experiments: Vec<ExperimentReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentReport {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub enabled: bool,
    pub arms: Vec<ArmReport>,
    /// Every enrolled session and its arm, oldest first.
    pub assignments: Vec<Assignment>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmReport {
    pub id: String,
    pub weight: u32,
    pub sessions: u64,
    /// Turns that completed or failed.
    pub turns: u64,
    pub failures: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    pub session_id: SessionId,
    pub arm: String,
}

/// Folds every visible session's log into the report.
pub(crate) async fn report(core: &Core, scope: &ListScope) -> crate::error::Result<AbReport> {
    let defs = core.defs();
    let specs = &defs.capabilities.abs;
    let mut arms: BTreeMap<(String, String), ArmReport> = BTreeMap::new();
    let mut assignments: BTreeMap<String, Vec<Assignment>> = BTreeMap::new();
    if !specs.is_empty() {
        for record in core.stores.sessions.list().await? {
            if let ListScope::Owner(principal) = scope
                && record.principal != principal.as_str()
            {
                continue;
            }
            let events = core.stores.events.read(&record.id, 0, None).await;
            core.release_if_idle(&record.id);
            let mut enrolled: Vec<(String, String)> = Vec::new();
            for event in events? {
                match &event.data {
                    EventData::AbAssigned(a) => {
                        enrolled.push((a.experiment.clone(), a.arm.clone()));
                        let arm = arms.entry((a.experiment.clone(), a.arm.clone())).or_default();
                        arm.sessions += 1;
                        assignments
                            .entry(a.experiment.clone())
                            .or_default()
                            .push(Assignment { session_id: record.id.clone(), arm: a.arm.clone() });
                    }
                    EventData::TurnCompleted(done) => {
                        for key in &enrolled {
                            let arm = arms.entry(key.clone()).or_default();
                            arm.turns += 1;
                            arm.input_tokens += done.usage.input_tokens;
                            arm.output_tokens += done.usage.output_tokens;
                            arm.cost_usd += done.estimated_cost_usd.unwrap_or(0.0);
                        }
                    }
                    EventData::TurnFailed(failed) => {
                        for key in &enrolled {
                            let arm = arms.entry(key.clone()).or_default();
                            arm.turns += 1;
                            arm.failures += 1;
                            if let Some(usage) = &failed.usage {
                                arm.input_tokens += usage.input_tokens;
                                arm.output_tokens += usage.output_tokens;
                            }
                            arm.cost_usd += failed.estimated_cost_usd.unwrap_or(0.0);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let experiments = specs
        .iter()
        .map(|spec| ExperimentReport {
            id: spec.id.clone(),
            description: spec.description.clone(),
            enabled: spec.enabled,
            arms: spec
                .arms
                .iter()
                .map(|arm| {
                    let totals = arms.remove(&(spec.id.clone(), arm.id.clone())).unwrap_or_default();
                    ArmReport {
                        id: arm.id.clone(),
                        weight: arm.weight,
                        cost_usd: crate::cost::round_usd(totals.cost_usd),
                        ..totals
                    }
                })
                .collect(),
            assignments: assignments.remove(&spec.id).unwrap_or_default(),
        })
        .collect();
    Ok(AbReport { experiments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(weights: &[u32]) -> AbSpec {
        AbSpec {
            id: "tone".into(),
            description: None,
            enabled: true,
            arms: weights
                .iter()
                .enumerate()
                .map(|(i, w)| AbArmSpec { id: format!("arm{i}"), weight: *w, instructions: None, model: None })
                .collect(),
        }
    }

    #[test]
    fn assignment_is_sticky_and_follows_the_weights() {
        let specs = [spec(&[3, 1])];
        assert_eq!(assign(&specs, "ops:pr-1"), assign(&specs, "ops:pr-1"));
        let mut counts = [0u32; 2];
        for i in 0..4000 {
            let arm = &assign(&specs, &format!("ses_{i}"))[0].arm;
            counts[usize::from(arm == "arm1")] += 1;
        }
        // 3:1 within a wide margin.
        assert!((2700..3300).contains(&counts[0]), "{counts:?}");
        let mut disabled = spec(&[1, 1]);
        disabled.enabled = false;
        assert!(assign(&[disabled], "x").is_empty());
    }
}
