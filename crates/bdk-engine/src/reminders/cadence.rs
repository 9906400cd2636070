//! A reminder's cadence: `delay` and `at` (one-shot, like `setTimeout`), `every` and `cron`
//! (recurring, like `setInterval`). Parsing with clear errors, and the next due time after a
//! firing. Pure functions of a given time.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::schedules::CronExpr;
use crate::timed_error::TimedError;

/// The shortest `every` accepted.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// A parsed cadence.
#[derive(Debug, Clone)]
pub enum Cadence {
    Delay(Duration),
    At(DateTime<Utc>),
    Every(Duration),
    Cron(Box<CronExpr>),
}

impl Cadence {
    /// Parses the one cadence given. `kind` is `delay`, `at`, `every` or `cron`.
    pub fn parse(kind: &str, value: &str, now: DateTime<Utc>) -> Result<Self, TimedError> {
        let bad = |message: String| TimedError::invalid("invalid_reminder", message);
        match kind {
            "delay" => humantime::parse_duration(value.trim())
                .map(Cadence::Delay)
                .map_err(|e| bad(format!("`delay`: {e} (write e.g. \"90s\", \"2h\")"))),
            "every" => {
                let every = humantime::parse_duration(value.trim())
                    .map_err(|e| bad(format!("`every`: {e} (write e.g. \"30m\")")))?;
                if every < MIN_EVERY {
                    return Err(bad(format!("`every` must be at least one second, not {value:?}")));
                }
                Ok(Cadence::Every(every))
            }
            "at" => {
                let at = DateTime::parse_from_rfc3339(value.trim())
                    .map_err(|e| bad(format!("`at`: {e} (write an RFC 3339 time, e.g. 2026-03-02T09:00:00Z)")))?
                    .with_timezone(&Utc);
                if at <= now {
                    return Err(bad(format!("`at` {value} is in the past")));
                }
                Ok(Cadence::At(at))
            }
            "cron" => {
                CronExpr::parse(value).map(|c| Cadence::Cron(Box::new(c))).map_err(|e| bad(format!("`cron`: {e}")))
            }
            other => Err(bad(format!("unknown cadence `{other}`"))),
        }
    }

    /// The first due time for a reminder created at `now`.
    pub fn first(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Delay(d) | Cadence::Every(d) => chrono::Duration::from_std(*d).ok().map(|d| now + d),
            Cadence::At(at) => Some(*at),
            Cadence::Cron(cron) => cron.next_after(now),
        }
    }

    /// The due time after a firing due at `due`, seen at `now`: `None` for a one-shot. A
    /// recurring reminder skips the times that passed meanwhile (it never fires to catch up).
    pub fn after(&self, due: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Cadence::Delay(_) | Cadence::At(_) => None,
            Cadence::Every(every) => {
                let step = chrono::Duration::from_std(*every).ok()?;
                let mut next = due + step;
                if next <= now {
                    let behind = (now - next).num_milliseconds() / step.num_milliseconds().max(1) + 1;
                    next += step * i32::try_from(behind).unwrap_or(i32::MAX);
                }
                Some(next)
            }
            Cadence::Cron(cron) => cron.next_after(due.max(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, h, m, s).unwrap()
    }

    #[test]
    fn one_shots_and_recurring() {
        let now = t(9, 0, 0);
        let delay = Cadence::parse("delay", "2h", now).unwrap();
        assert_eq!((delay.first(now), delay.after(t(11, 0, 0), t(11, 0, 0))), (Some(t(11, 0, 0)), None));
        let at = Cadence::parse("at", "2026-03-02T10:30:00Z", now).unwrap();
        assert_eq!(at.first(now), Some(t(10, 30, 0)));
        let every = Cadence::parse("every", "30m", now).unwrap();
        assert_eq!(every.first(now), Some(t(9, 30, 0)));
        assert_eq!(every.after(t(9, 30, 0), t(9, 30, 1)), Some(t(10, 0, 0)));
        // Down for a while: the next due time is in the future, with no catch-up firings.
        assert_eq!(every.after(t(9, 30, 0), t(11, 10, 0)), Some(t(11, 30, 0)));
        let cron = Cadence::parse("cron", "0 * * * *", now).unwrap();
        assert_eq!((cron.first(now), cron.after(t(10, 0, 0), t(10, 0, 0))), (Some(t(10, 0, 0)), Some(t(11, 0, 0))));
    }

    #[test]
    fn bad_cadences_are_clear_errors() {
        let now = t(9, 0, 0);
        let err = |kind: &str, value: &str| Cadence::parse(kind, value, now).unwrap_err().to_string();
        assert!(err("at", "2026-03-02T08:00:00Z").contains("in the past"));
        assert!(err("every", "500ms").contains("at least one second"));
        assert!(err("every", "soon").starts_with("`every`:"));
        assert!(err("cron", "61 * * * *").contains("minute"));
        assert!(err("at", "tomorrow").starts_with("`at`:"));
        assert_eq!(Cadence::parse("every", "1s", now).map(|c| c.first(now)).unwrap(), Some(t(9, 0, 1)));
    }
}
