//! The model-graded expectation: `judge = "<rubric>"` asks a second model (the judge, from
//! `judge_model` in `evals/evals.toml`, else the agent's own) whether the conversation meets the
//! rubric. Its verdict and reasoning are recorded on a check marked `modelGraded`. An answer
//! that cannot be read, or a judge that cannot be called, is a failed check saying so.

use bdk_model::{Message, ModelEvent, ModelProvider, ModelRequest};
use bdk_project::model::EvalCase;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::drive::Observed;
use crate::expect::{clip, one_line};
use crate::report::Check;

const SYSTEM: &str = "You grade one conversation between a user and an AI agent against a rubric. \
Judge only what the transcript shows. Answer with one JSON object and nothing else: \
{\"pass\": true or false, \"reasoning\": \"one or two sentences\"}.";

#[derive(Debug, Deserialize)]
struct Verdict {
    pass: bool,
    #[serde(default)]
    reasoning: String,
}

/// Grades `observed` against `rubric` with `judge`.
pub(crate) async fn grade(
    judge: &dyn ModelProvider,
    rubric: &str,
    case: &EvalCase,
    observed: &Observed,
    cancel: &CancellationToken,
) -> Check {
    let model = judge.info().model;
    let request = ModelRequest {
        system: Some(SYSTEM.into()),
        messages: vec![Message::user(prompt(rubric, case, observed))].into(),
        ..ModelRequest::default()
    };
    let mut stream = judge.stream(request, cancel.child_token());
    let mut text = String::new();
    let mut failure = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelEvent::TextDelta { text: delta }) => text.push_str(&delta),
            Ok(_) => {}
            Err(err) => {
                failure = Some(err.to_string());
                break;
            }
        }
    }
    let (passed, detail, reasoning) = match (failure, parse(&text)) {
        (Some(err), _) => (false, format!("the judge could not be called: {err}"), None),
        (None, Some(verdict)) => {
            let detail = if verdict.pass { "the judge passed it" } else { "the judge failed it" };
            (verdict.pass, detail.to_owned(), Some(verdict.reasoning))
        }
        (None, None) => (false, format!("the judge's answer is not a verdict: {}", clip(&text, 160)), None),
    };
    Check {
        kind: "judge".into(),
        expected: clip(rubric, 200),
        passed,
        detail,
        model_graded: true,
        reasoning,
        model: Some(model),
    }
}

/// The transcript the judge reads: the user's turns, the agent's tool calls and final reply.
fn prompt(rubric: &str, case: &EvalCase, observed: &Observed) -> String {
    let mut out = format!("Rubric:\n{rubric}\n\nTranscript:\n");
    for turn in &case.turns {
        out.push_str(&format!("USER: {}\n", turn.message));
    }
    for call in &observed.trajectory.tool_calls {
        let result = call.result.as_ref().map(one_line).unwrap_or_else(|| "(no result)".into());
        out.push_str(&format!("TOOL CALL {} {} -> {}\n", call.tool_name, one_line(&call.input), result));
    }
    match &observed.trajectory.reply {
        Some(reply) => out.push_str(&format!("AGENT (final reply): {reply}\n")),
        None => out.push_str("AGENT: (no reply)\n"),
    }
    if let Some(error) = &observed.error {
        out.push_str(&format!("(the conversation did not complete: {error})\n"));
    }
    out
}

/// The first `{...}` object in `text` that reads as a verdict.
fn parse(text: &str) -> Option<Verdict> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    serde_json::from_str(text.get(start..=end)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_surrounding_text() {
        let v = parse("Sure.\n```json\n{\"pass\": false, \"reasoning\": \"rude\"}\n```").unwrap();
        assert!(!v.pass);
        assert_eq!(v.reasoning, "rude");
        assert!(parse("PASS").is_none());
        assert!(parse("{\"verdict\": 1}").is_none());
    }
}
