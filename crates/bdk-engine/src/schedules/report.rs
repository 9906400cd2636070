//! What `info`, `/v1/info` and `bdk schedules` say about schedules beyond the files: the latest
//! recorded firing of each, read from the timed-work store, and whether the next firing will
//! happen here. Reads only.

use bdk_protocol::info::{FiringInfo, ProjectInfo};
use bdk_store::{FiringRecord, TimedKind, TimedStore};
use chrono::SecondsFormat;

/// The wire shape of a firing row.
pub fn firing_info(record: &FiringRecord) -> FiringInfo {
    let time = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    FiringInfo {
        due_at: time(record.due_at),
        trigger: record.trigger.clone(),
        status: record.status.as_str().to_owned(),
        session_ids: record.session_ids.iter().map(ToString::to_string).collect(),
        finished_at: record.finished_at.map(time),
        error: record.error.clone(),
    }
}

/// The latest firing (by claim time) of schedule `id`.
pub async fn last_firing(store: &dyn TimedStore, id: &str) -> Result<Option<FiringRecord>, bdk_store::Error> {
    Ok(store.firings(TimedKind::Schedule, id).await?.into_iter().max_by_key(|r| (r.claimed_at, r.due_at)))
}

/// Sets each schedule's `lastFiring` in `info` from `store`, and drops `nextFireAt` when the
/// host does not fire schedules by itself (`fires_here` false).
pub async fn annotate(info: &mut ProjectInfo, store: &dyn TimedStore, fires_here: bool) {
    for schedule in &mut info.schedules {
        if !fires_here {
            schedule.next_fire_at = None;
        }
        match last_firing(store, &schedule.id).await {
            Ok(last) => schedule.last_firing = last.as_ref().map(firing_info),
            Err(error) => tracing::warn!(schedule = %schedule.id, %error, "reading schedule firings failed"),
        }
    }
}
