//! Which cases a run takes, with the reference's semantics: entries within `filterIds` (or
//! `--filter`) match any one of them, entries within `tags` likewise, and when both are given a
//! case must match one entry of each. A filter id selects that case and every case under it
//! (`prs` selects `prs/small`).

use bdk_project::model::EvalCase;

/// Whether `id` is `filter` or lies under it.
pub fn id_matches(id: &str, filter: &str) -> bool {
    let filter = filter.trim_end_matches('/');
    id == filter || id.strip_prefix(filter).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `case` is selected by `filter_ids` and `tags` (an empty list selects everything).
pub fn matches(case: &EvalCase, filter_ids: &[String], tags: &[String]) -> bool {
    let by_id = filter_ids.is_empty() || filter_ids.iter().any(|f| id_matches(&case.id, f));
    let by_tag = tags.is_empty() || tags.iter().any(|t| case.tags.contains(t));
    by_id && by_tag
}

/// The selected cases, in discovery order.
pub fn select(cases: &[EvalCase], filter_ids: &[String], tags: &[String]) -> Vec<EvalCase> {
    cases.iter().filter(|c| matches(c, filter_ids, tags)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, tags: &[&str]) -> EvalCase {
        EvalCase {
            id: id.into(),
            file: format!("evals/{id}.eval.toml"),
            description: None,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            turns: Vec::new(),
            expect: Default::default(),
            iterations: 1,
            dry_run: false,
        }
    }

    fn ids(cases: &[EvalCase]) -> Vec<&str> {
        cases.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn ids_and_tags_are_or_within_and_and_across() {
        let cases = [case("smoke", &["smoke"]), case("prs/small", &["prs"]), case("prs/large", &["prs", "slow"])];
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(ids(&select(&cases, &[], &[])), ["smoke", "prs/small", "prs/large"]);
        assert_eq!(ids(&select(&cases, &s(&["prs"]), &[])), ["prs/small", "prs/large"]);
        assert_eq!(ids(&select(&cases, &s(&["smoke", "prs/large"]), &[])), ["smoke", "prs/large"]);
        assert_eq!(ids(&select(&cases, &[], &s(&["smoke", "slow"]))), ["smoke", "prs/large"]);
        assert_eq!(ids(&select(&cases, &s(&["prs"]), &s(&["smoke", "slow"]))), ["prs/large"]);
        // A prefix that is not a whole segment selects nothing.
        assert!(select(&cases, &s(&["pr"]), &[]).is_empty());
    }
}
