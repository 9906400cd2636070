//! The wire manifest (`bdk info --json`, `GET /v1/info`): schedule fire times from a fixed
//! instant, and the shapes of `effect` and `needsApproval`.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

use super::fixture::Fixture;
use super::{assert_clean, find};

fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).expect("instant").with_timezone(&Utc)
}

fn manifest_json(project: &bdk_project::Project, now: DateTime<Utc>) -> Value {
    serde_json::to_value(bdk_project::manifest_at(project, now)).expect("manifest serializes")
}

fn next_fire(project: &bdk_project::Project, now: &str, id: &str) -> Value {
    let info = manifest_json(project, at(now));
    let schedules = info["schedules"].as_array().expect("schedules");
    schedules.iter().find(|s| s["id"] == id).expect("schedule")["nextFireAt"].clone()
}

#[test]
fn next_fire_at_is_utc_rfc3339_strictly_after_now() {
    //! Guards: nextFireAt follows the 5-field cron in UTC, from the given instant, strictly after it.
    let (_fx, project) = Fixture::new()
        .file("bot/schedules/weekdays.md", "---\ncron: \"0 9 * * 1-5\"\n---\nStandup.\n")
        .file("bot/schedules/quarter.toml", "cron = \"*/15 * * * *\"\nrun = [\"true\"]\n")
        .load();
    assert_clean(&project);
    // Friday 2025-01-03 10:00 UTC: the next weekday 09:00 is Monday.
    assert_eq!(next_fire(&project, "2025-01-03T10:00:00Z", "weekdays"), json!("2025-01-06T09:00:00Z"));
    // Exactly at a fire time, the next one is the following day.
    assert_eq!(next_fire(&project, "2025-01-06T09:00:00Z", "weekdays"), json!("2025-01-07T09:00:00Z"));
    // The instant is compared in UTC: 10:00+02:00 is 08:00Z, before that day's 09:00Z.
    assert_eq!(next_fire(&project, "2025-01-06T10:00:00+02:00", "weekdays"), json!("2025-01-06T09:00:00Z"));
    assert_eq!(next_fire(&project, "2025-03-10T23:59:30Z", "quarter"), json!("2025-03-11T00:00:00Z"));
    let fixed = Utc.with_ymd_and_hms(2024, 2, 29, 12, 7, 0).single().expect("instant");
    let info = manifest_json(&project, fixed);
    assert_eq!(info["schedules"].as_array().expect("list").len(), 2);
    assert!(info["schedules"].as_array().expect("list").iter().any(|s| s["nextFireAt"] == "2024-02-29T12:15:00Z"));
}

#[test]
fn effect_and_needs_approval_shapes() {
    //! Guards: effect is "read"/"write"/{"writeWhen": schema}; needsApproval true/false/{"when": schema}.
    let head = "description = \"T.\"\ncommand = [\"true\"]\n";
    let (_fx, project) = Fixture::new()
        .file("bot/tools/a_read.toml", format!("{head}effect = \"read\"\n"))
        .file("bot/tools/b_write.toml", format!("{head}effect = \"write\"\nneeds_approval = true\n"))
        .file("bot/tools/c_default.toml", head)
        .file(
            "bot/tools/d_when.toml",
            format!(
                "{head}[effect]\nproperties = {{ mode = {{ const = \"apply\" }} }}\n\
                 [needs_approval]\nproperties = {{ amount = {{ minimum = 100 }} }}\n"
            ),
        )
        .file("bot/tools/e_no.toml", format!("{head}needs_approval = false\n"))
        .load();
    assert_clean(&project);
    let info = manifest_json(&project, at("2025-01-01T00:00:00Z"));
    let tools = info["tools"].as_array().expect("tools");
    let shape = |name: &str| {
        let t = tools.iter().find(|t| t["name"] == name).expect(name);
        (t["effect"].clone(), t["needsApproval"].clone())
    };
    assert_eq!(shape("a_read"), (json!("read"), json!(false)));
    assert_eq!(shape("b_write"), (json!("write"), json!(true)));
    assert_eq!(shape("c_default"), (json!("write"), json!(false)));
    assert_eq!(
        shape("d_when"),
        (
            json!({"writeWhen": {"properties": {"mode": {"const": "apply"}}}}),
            json!({"when": {"properties": {"amount": {"minimum": 100}}}})
        )
    );
    assert_eq!(shape("e_no"), (json!("write"), json!(false)));
}

#[test]
fn manifest_carries_diagnostics_and_extension_flags() {
    //! Guards: the manifest describes a broken project too, with its diagnostics.
    let (_fx, project) = Fixture::new()
        .file("bot/tools/t.toml", "description = \"T.\"\n")
        .file("bot/extensions/ns/instructions.md", "Extra.\n")
        .load();
    find(&project, "tool_body_missing");
    let info = manifest_json(&project, at("2025-01-01T00:00:00Z"));
    assert_eq!(info["slug"], "proj");
    assert_eq!(info["layout"], "bot");
    assert!(info["diagnostics"].as_array().expect("diagnostics").iter().any(|d| d["code"] == "tool_body_missing"));
    assert_eq!(info["extensions"][0]["namespace"], "ns");
    assert_eq!(info["extensions"][0]["instructions"], true);
    assert_eq!(info["instructions"]["files"], json!(["bot/instructions.md", "bot/extensions/ns/instructions.md"]));
}

#[test]
fn every_code_is_a_stable_snake_case_string() {
    //! Guards: codes are unique snake_case strings with non-empty hints (scripts match on them).
    let mut seen = std::collections::HashSet::new();
    for code in bdk_project::Code::ALL {
        let s = code.as_str();
        let snake = s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        assert!(snake, "{s}");
        assert!(seen.insert(s), "{s} is listed twice");
        assert!(!code.hint().trim().is_empty(), "{s} has no hint");
    }
}

#[test]
fn subagents_show_their_own_max_steps() {
    //! Guards: `maxSteps` is the subagent's own limit, left out when it inherits the parent's.
    let (_fx, project) = Fixture::new()
        .file("bot/subagents/capped/agent.toml", "description = \"C.\"\nmax_steps = 10\n")
        .file("bot/subagents/plain/agent.toml", "description = \"P.\"\n")
        .load();
    assert_clean(&project);
    let info = manifest_json(&project, at("2025-01-01T00:00:00Z"));
    let subs = info["subagents"].as_array().expect("subagents");
    let by_id = |id: &str| subs.iter().find(|s| s["id"] == id).expect(id).clone();
    assert_eq!(by_id("capped")["maxSteps"], json!(10));
    assert!(by_id("plain").get("maxSteps").is_none(), "{}", by_id("plain"));
    assert!(by_id("plain").get("model").is_none(), "a subagent without a model has no `model`");
}

#[test]
fn github_and_slack_channels_list_the_route_they_serve() {
    //! Guards: `info` shows where a GitHub channel takes deliveries and a Slack one takes events.
    let (_fx, project) = Fixture::new()
        .file("bot/channels/reviews.toml", "kind = \"github\"\n")
        .file("bot/channels/ops.toml", "kind = \"slack\"\n")
        .load();
    assert_clean(&project);
    let info = manifest_json(&project, at("2025-01-03T10:00:00Z"));
    let mounted = |id: &str| {
        let channel = info["channels"].as_array().expect("channels").iter().find(|c| c["id"] == id).expect("channel");
        channel["routes"][0]["mountedPath"].clone()
    };
    assert_eq!(mounted("reviews"), json!("/v1/channels/reviews/webhook"));
    assert_eq!(mounted("ops"), json!("/v1/channels/ops/events"));
}
