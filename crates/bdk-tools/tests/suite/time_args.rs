//! `time_args` under a session created with `asOf` (the reference's rules): every named argument
//! present, an absolute ISO-8601 instant with a timezone, no later than asOf; otherwise a refusal
//! telling the model to retry with absolute bounds. A session with asOf refuses to start when a
//! name is absent from the schema. Sessions without asOf ignore the declaration.

use bdk_tools::policy::{check_time_args, time_args_refusal};
use bdk_tools::{ProjectTools, ToolRegistry};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

use super::{Bot, call, error_text};

fn as_of() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
}

fn telemetry(bot: &Bot) -> ProjectTools {
    let mut tool = bot.command("telemetry", &["sh", "-c", "cat >/dev/null; echo '\"rows\"'"]);
    tool.input_schema = json!({
        "type": "object",
        "properties": {"since": {"type": "string"}, "until": {"type": "string"}}
    });
    tool.time_args = vec!["since".into(), "until".into()];
    bot.registry(vec![tool])
}

async fn call_as_of(bot: &Bot, tools: &ProjectTools, input: Value) -> bdk_tools::ToolOutcome {
    let mut invocation = bot.invocation("telemetry", input);
    invocation.as_of = Some(as_of());
    call(tools, invocation).await
}

#[tokio::test]
async fn absolute_bounds_no_later_than_as_of_run() {
    //! Guards: instants with a timezone (Z or an offset) at or before asOf pass.
    let bot = Bot::new();
    let tools = telemetry(&bot);
    let input = json!({"since": "2025-02-28T00:00:00Z", "until": "2025-03-01T13:00:00+01:00"});
    let outcome = call_as_of(&bot, &tools, input).await;
    assert_eq!(outcome.result, json!("rows"), "{outcome:?}");
}

#[tokio::test]
async fn each_rule_refuses_with_a_retry_hint() {
    //! Guards: missing, relative, timezone-less and later-than-asOf values are each refused,
    //! with a message naming the argument and asking for absolute bounds.
    let bot = Bot::new();
    let tools = telemetry(&bot);
    let cases = [
        (json!({"until": "2025-03-01T00:00:00Z"}), "`since` is missing"),
        (json!({"since": "yesterday", "until": "2025-03-01T00:00:00Z"}), "not an absolute ISO-8601 instant"),
        (json!({"since": "2025-02-01T00:00:00", "until": "2025-03-01T00:00:00Z"}), "has no timezone"),
        (json!({"since": "2025-02-01", "until": "2025-03-01T00:00:00Z"}), "has no timezone"),
        (json!({"since": "2025-02-01T00:00:00Z", "until": "2025-03-02T00:00:00Z"}), "later than the session's asOf"),
    ];
    for (input, expected) in cases {
        let text = error_text(&call_as_of(&bot, &tools, input.clone()).await);
        assert!(text.contains(expected), "{input}: {text}");
        assert!(text.contains("Retry with absolute bounds"), "{text}");
        assert!(text.contains("2025-03-01T12:00:00Z"), "names asOf: {text}");
    }
}

#[tokio::test]
async fn without_as_of_the_declaration_is_ignored() {
    //! Guards: a session without asOf runs the call whatever the time arguments say.
    let bot = Bot::new();
    let tools = telemetry(&bot);
    let outcome = call(&tools, bot.invocation("telemetry", json!({"since": "yesterday"}))).await;
    assert_eq!(outcome.result, json!("rows"));
}

#[test]
fn the_pure_check_matches_the_registry() {
    //! Guards: `check_time_args` is usable without a registry.
    let bot = Bot::new();
    let mut tool = bot.command("t", &["true"]);
    tool.time_args = vec!["at".into()];
    assert!(check_time_args(&tool, &json!({"at": "2025-03-01T12:00:00Z"}), as_of()).is_ok(), "asOf itself is allowed");
    assert!(check_time_args(&tool, &json!({"at": "2025-03-01T12:00:01Z"}), as_of()).is_err());
    assert!(check_time_args(&tool, &json!({"at": null}), as_of()).is_err());
    let refusal = check_time_args(&tool, &json!({"at": 1700000000}), as_of()).unwrap_err();
    assert!(refusal.contains("not an ISO-8601 instant string"), "{refusal}");
}

#[test]
fn a_name_absent_from_the_schema_refuses_the_session() {
    //! Guards: `time_args_refusal` names the tool and the misspelled argument; all-good is None.
    let bot = Bot::new();
    let mut good = bot.command("good", &["true"]);
    good.input_schema = json!({"type": "object", "properties": {"since": {"type": "string"}}});
    good.time_args = vec!["since".into()];
    let mut bad = bot.command("bad", &["true"]);
    bad.input_schema = json!({"type": "object", "properties": {"since": {"type": "string"}}});
    bad.time_args = vec!["snice".into()];

    assert_eq!(time_args_refusal([&good]), None);
    let tools = bot.registry(vec![good.clone()]);
    assert_eq!(tools.time_args_refusal(), None);

    let refusal = time_args_refusal([&good, &bad]).unwrap();
    assert!(refusal.contains("`bad`") && refusal.contains("`snice`"), "{refusal}");
    let tools = bot.registry(vec![good, bad]);
    assert!(tools.time_args_refusal().unwrap().contains("snice"));
}
