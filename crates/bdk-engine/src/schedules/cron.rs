//! Cron evaluation for timed work: 5-field expressions in UTC at minute granularity (parsed by
//! `croner` through `bdk_project`'s schedule format, so validate and serve agree), next and
//! previous occurrences, and the missed-firing rule. Pure functions of a given time.

use std::time::Duration;

use chrono::{DateTime, SubsecRound as _, Utc};
use croner::Cron;

/// A parsed schedule expression.
#[derive(Debug, Clone)]
pub struct CronExpr {
    cron: Cron,
}

impl CronExpr {
    /// Parses a 5-field expression; the error names the bad field.
    pub fn parse(expr: &str) -> Result<Self, String> {
        bdk_project::formats::schedule::parse_cron(expr).map(|cron| Self { cron })
    }

    /// The first occurrence strictly after `t`, in whole seconds. croner keeps the sub-second
    /// part of `t`; the occurrence is the same instant for every process only without it (the
    /// firing key of several replicas must agree).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_next_occurrence(&t, false).ok().map(|due| due.trunc_subsecs(0))
    }

    /// The latest occurrence at or before `t`, in whole seconds.
    pub fn latest_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron.find_previous_occurrence(&t, true).ok().map(|due| due.trunc_subsecs(0))
    }
}

/// The missed-firing policy: when a process starts at `now`, the one occurrence it fires late,
/// if any. That is the latest occurrence at or before `now` when it is no older than `grace`
/// and was not fired (`fired` says whether a firing row exists for it). Never one per missed
/// minute: older occurrences are skipped.
pub fn missed(
    expr: &CronExpr,
    now: DateTime<Utc>,
    grace: Duration,
    fired: impl Fn(DateTime<Utc>) -> bool,
) -> Option<DateTime<Utc>> {
    let latest = expr.latest_at_or_before(now)?;
    let age = (now - latest).to_std().unwrap_or_default();
    (age <= grace && !fired(latest)).then_some(latest)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn next(expr: &str, t: DateTime<Utc>) -> DateTime<Utc> {
        CronExpr::parse(expr).unwrap().next_after(t).unwrap()
    }

    /// The next `n` occurrences after `t`.
    fn series(expr: &str, mut t: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let cron = CronExpr::parse(expr).unwrap();
        (0..n)
            .map(|_| {
                t = cron.next_after(t).unwrap();
                t
            })
            .collect()
    }

    #[test]
    fn next_is_strictly_after_and_minute_aligned() {
        assert_eq!(next("* * * * *", at(2026, 3, 1, 9, 0)), at(2026, 3, 1, 9, 1));
        let mid = at(2026, 3, 1, 9, 0) + chrono::Duration::seconds(30);
        assert_eq!(next("* * * * *", mid), at(2026, 3, 1, 9, 1));
        // Woken a little late, with a sub-second clock: still the whole-second occurrence, so
        // every replica claims the same firing key.
        let late = at(2026, 3, 1, 9, 1) + chrono::Duration::microseconds(117_803);
        assert_eq!(next("* * * * *", late), at(2026, 3, 1, 9, 2));
        let early = at(2026, 3, 1, 9, 0) + chrono::Duration::microseconds(999_999);
        assert_eq!(next("* * * * *", early), at(2026, 3, 1, 9, 1));
        let cron = CronExpr::parse("* * * * *").unwrap();
        assert_eq!(cron.latest_at_or_before(late), Some(at(2026, 3, 1, 9, 1)));
    }

    #[test]
    fn month_ends() {
        // Day 31 skips the months without one.
        assert_eq!(
            series("0 0 31 * *", at(2026, 1, 1, 0, 0), 3),
            [at(2026, 1, 31, 0, 0), at(2026, 3, 31, 0, 0), at(2026, 5, 31, 0, 0)]
        );
        // The last minute of a year rolls into the next.
        assert_eq!(next("59 23 31 12 *", at(2026, 6, 1, 0, 0)), at(2026, 12, 31, 23, 59));
        assert_eq!(next("0 0 1 * *", at(2026, 12, 31, 23, 59)), at(2027, 1, 1, 0, 0));
    }

    #[test]
    fn leap_days() {
        assert_eq!(next("0 12 29 2 *", at(2026, 3, 1, 0, 0)), at(2028, 2, 29, 12, 0));
        assert_eq!(next("0 12 29 2 *", at(2028, 2, 29, 12, 0)), at(2032, 2, 29, 12, 0));
        // 2100 is not a leap year.
        assert_eq!(next("0 0 29 2 *", at(2097, 1, 1, 0, 0)), at(2104, 2, 29, 0, 0));
    }

    #[test]
    fn steps_lists_and_ranges() {
        assert_eq!(
            series("*/15 * * * *", at(2026, 3, 1, 9, 50), 3),
            [at(2026, 3, 1, 10, 0), at(2026, 3, 1, 10, 15), at(2026, 3, 1, 10, 30)]
        );
        assert_eq!(
            series("5,35 9-10 * * *", at(2026, 3, 1, 0, 0), 5),
            [
                at(2026, 3, 1, 9, 5),
                at(2026, 3, 1, 9, 35),
                at(2026, 3, 1, 10, 5),
                at(2026, 3, 1, 10, 35),
                at(2026, 3, 2, 9, 5)
            ]
        );
        assert_eq!(series("0 */6 * * *", at(2026, 3, 1, 1, 0), 2), [at(2026, 3, 1, 6, 0), at(2026, 3, 1, 12, 0)]);
        assert_eq!(next("0 0 * JAN-MAR *", at(2026, 4, 1, 0, 0)), at(2027, 1, 1, 0, 0));
    }

    #[test]
    fn weekday_and_day_of_month_rules() {
        // 2026-03-06 is a Friday: weekdays skip the weekend.
        assert_eq!(series("0 9 * * 1-5", at(2026, 3, 6, 10, 0), 2), [at(2026, 3, 9, 9, 0), at(2026, 3, 10, 9, 0)]);
        // Sunday is 0 and 7.
        assert_eq!(next("0 0 * * 0", at(2026, 3, 6, 0, 0)), at(2026, 3, 8, 0, 0));
        assert_eq!(next("0 0 * * 7", at(2026, 3, 6, 0, 0)), at(2026, 3, 8, 0, 0));
        assert_eq!(next("0 0 * * SUN", at(2026, 3, 6, 0, 0)), at(2026, 3, 8, 0, 0));
        // Both restricted: either matches (standard cron), so the 13th and every Friday.
        assert_eq!(
            series("0 0 13 * 5", at(2026, 3, 1, 0, 0), 4),
            [at(2026, 3, 6, 0, 0), at(2026, 3, 13, 0, 0), at(2026, 3, 20, 0, 0), at(2026, 3, 27, 0, 0)]
        );
        // Day of month alone with a `*` weekday: only the day of month.
        assert_eq!(series("0 0 13 * *", at(2026, 3, 1, 0, 0), 2), [at(2026, 3, 13, 0, 0), at(2026, 4, 13, 0, 0)]);
    }

    #[test]
    fn latest_occurrence_includes_now() {
        let cron = CronExpr::parse("0 9 * * *").unwrap();
        assert_eq!(cron.latest_at_or_before(at(2026, 3, 1, 9, 0)), Some(at(2026, 3, 1, 9, 0)));
        assert_eq!(cron.latest_at_or_before(at(2026, 3, 1, 8, 59)), Some(at(2026, 2, 28, 9, 0)));
    }

    #[test]
    fn missed_fires_once_within_grace_only() {
        let cron = CronExpr::parse("* * * * *").unwrap();
        let hour = Duration::from_secs(3600);
        let now = at(2026, 3, 1, 9, 30) + chrono::Duration::seconds(20);
        // Down for thirty minutes: one late firing, for the latest minute only.
        assert_eq!(missed(&cron, now, hour, |_| false), Some(at(2026, 3, 1, 9, 30)));
        assert_eq!(missed(&cron, now, hour, |t| t == at(2026, 3, 1, 9, 30)), None);
        let daily = CronExpr::parse("0 9 * * *").unwrap();
        assert_eq!(missed(&daily, at(2026, 3, 1, 9, 59), hour, |_| false), Some(at(2026, 3, 1, 9, 0)));
        assert_eq!(missed(&daily, at(2026, 3, 1, 10, 1), hour, |_| false), None, "outside the grace window");
    }

    #[test]
    fn bad_expressions_are_refused() {
        assert!(CronExpr::parse("0 9 * *").is_err());
        assert!(CronExpr::parse("61 * * * *").is_err());
    }
}
