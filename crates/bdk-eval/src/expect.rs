//! The computed expectations: each key of `[expect]` checked against what an attempt observed,
//! every one of them reported, passed or not. `judge` is model-graded and lives in `judge.rs`.

use bdk_project::model::{CalledTool, Expectations};
use serde_json::Value;

use crate::drive::{Observed, humanize};
use crate::report::Check;

/// Every computed check of `expect`, in the order the format documents the keys.
pub(crate) fn evaluate(expect: &Expectations, observed: &Observed) -> Vec<Check> {
    let mut checks = Vec::new();
    let reply = observed.trajectory.reply.as_deref().unwrap_or("");
    if let Some(wanted) = expect.succeeded {
        let actual = observed.succeeded();
        let detail = match (&observed.error, actual) {
            (Some(error), _) => error.clone(),
            (None, true) => "every turn completed".into(),
            (None, false) => "the conversation did not complete".into(),
        };
        checks.push(check("succeeded", wanted.to_string(), actual == wanted, detail));
    }
    for wanted in &expect.called_tool {
        checks.push(called_tool(wanted, observed));
    }
    for name in &expect.not_called_tool {
        let n = calls_named(observed, name).count();
        let detail = if n == 0 { "not called".into() } else { format!("called {n} time(s)") };
        checks.push(check("not_called_tool", name.clone(), n == 0, detail));
    }
    for text in &expect.reply_includes {
        let found = reply.contains(text.as_str());
        checks.push(check("reply_includes", text.clone(), found, reply_detail(found, reply)));
    }
    for pattern in &expect.reply_matches {
        let (passed, detail) = match regex::Regex::new(pattern) {
            Ok(re) => {
                let found = re.is_match(reply);
                (found, reply_detail(found, reply))
            }
            Err(err) => (false, format!("invalid pattern: {err}")),
        };
        checks.push(check("reply_matches", pattern.clone(), passed, detail));
    }
    if let Some(schema) = &expect.reply_schema {
        let (passed, detail) = reply_schema(schema, reply);
        checks.push(check("reply_schema", one_line(schema), passed, detail));
    }
    if let Some(max) = expect.max_tool_calls {
        let n = observed.trajectory.tool_calls.len();
        checks.push(check("max_tool_calls", format!("<= {max}"), n <= max as usize, format!("{n} tool call(s)")));
    }
    if let Some(max) = expect.max_cost_usd {
        let cost = observed.trajectory.cost_usd;
        checks.push(check("max_cost_usd", format!("<= ${max}"), cost <= max, format!("estimated ${cost:.6}")));
    }
    if let Some(max) = expect.max_turn_ms {
        let longest = observed.turns.iter().map(|t| t.duration_ms).max();
        let (passed, detail) = match longest {
            Some(ms) => (ms <= max, format!("longest turn {ms} ms")),
            None => (false, "no turn finished".into()),
        };
        checks.push(check("max_turn_ms", format!("<= {max} ms"), passed, detail));
    }
    if let Some(max) = expect.max_duration {
        let took = observed.duration;
        let detail = format!("took {}", humanize(took));
        checks.push(check("max_duration", format!("<= {}", humanize(max)), took <= max, detail));
    }
    checks
}

fn check(kind: &str, expected: String, passed: bool, detail: String) -> Check {
    Check { kind: kind.into(), expected, passed, detail, model_graded: false, reasoning: None, model: None }
}

fn calls_named<'a>(observed: &'a Observed, name: &'a str) -> impl Iterator<Item = &'a bdk_engine::TrajectoryCall> {
    observed.trajectory.tool_calls.iter().filter(move |c| c.tool_name == name)
}

fn called_tool(wanted: &CalledTool, observed: &Observed) -> Check {
    let calls: Vec<_> = calls_named(observed, &wanted.name).collect();
    let expected = match &wanted.input {
        Some(input) => format!("{} {}", wanted.name, one_line(input)),
        None => wanted.name.clone(),
    };
    let matched = calls.iter().any(|c| wanted.input.as_ref().is_none_or(|partial| contains(&c.input, partial)));
    let detail = if calls.is_empty() {
        let seen: Vec<_> = observed.trajectory.tool_calls.iter().map(|c| c.tool_name.as_str()).collect();
        if seen.is_empty() { "no tool was called".into() } else { format!("not called; called: {}", seen.join(", ")) }
    } else if matched {
        format!("called {} time(s)", calls.len())
    } else {
        let inputs: Vec<_> = calls.iter().map(|c| one_line(&c.input)).collect();
        format!("called {} time(s), never with that input; inputs: {}", calls.len(), inputs.join("; "))
    };
    check("called_tool", expected, matched, detail)
}

/// Whether `actual` holds everything `partial` gives: objects key by key (extra keys in
/// `actual` are fine), numbers by value (`3` equals `3.0`), everything else exactly.
pub(crate) fn contains(actual: &Value, partial: &Value) -> bool {
    match (actual, partial) {
        (Value::Object(actual), Value::Object(partial)) => {
            partial.iter().all(|(key, want)| actual.get(key).is_some_and(|have| contains(have, want)))
        }
        (Value::Array(actual), Value::Array(partial)) => {
            actual.len() == partial.len() && actual.iter().zip(partial).all(|(a, p)| contains(a, p))
        }
        (Value::Number(a), Value::Number(p)) => a == p || a.as_f64().zip(p.as_f64()).is_some_and(|(a, p)| a == p),
        (a, p) => a == p,
    }
}

fn reply_detail(found: bool, reply: &str) -> String {
    if found { "found in the reply".into() } else { format!("not in the reply: {}", clip(reply, 160)) }
}

/// The reply read as JSON (a fenced ```json block is unwrapped) against `schema`.
fn reply_schema(schema: &Value, reply: &str) -> (bool, String) {
    let text = unfence(reply);
    let instance: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) => return (false, format!("the reply is not JSON ({err}): {}", clip(reply, 120))),
    };
    let validator = match jsonschema::validator_for(schema) {
        Ok(validator) => validator,
        Err(err) => return (false, format!("invalid schema: {err}")),
    };
    let errors: Vec<String> = validator.iter_errors(&instance).take(3).map(|e| e.to_string()).collect();
    if errors.is_empty() { (true, "the reply matches the schema".into()) } else { (false, errors.join("; ")) }
}

fn unfence(reply: &str) -> &str {
    let trimmed = reply.trim();
    let Some(rest) = trimmed.strip_prefix("```") else { return trimmed };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

pub(crate) fn one_line(value: &Value) -> String {
    clip(&value.to_string(), 200)
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() > max { format!("{}...", flat.chars().take(max).collect::<String>()) } else { flat }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn partial_input_matches_nested_keys_and_numbers_by_value() {
        let actual = json!({"a": 1, "b": {"c": "x", "d": [1, 2]}, "e": true});
        assert!(contains(&actual, &json!({"a": 1.0})));
        assert!(contains(&actual, &json!({"b": {"c": "x"}})));
        assert!(contains(&actual, &json!({"b": {"d": [1, 2]}})));
        assert!(!contains(&actual, &json!({"b": {"d": [1]}})));
        assert!(!contains(&actual, &json!({"a": 2})));
        assert!(!contains(&actual, &json!({"z": null})));
        assert!(contains(&actual, &json!({})));
    }

    #[test]
    fn fenced_json_replies_are_unwrapped() {
        assert_eq!(unfence("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(unfence("  {\"a\": 1} "), "{\"a\": 1}");
    }
}
