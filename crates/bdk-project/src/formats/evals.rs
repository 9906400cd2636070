//! `evals/evals.toml` (required once any eval exists) and `evals/**/*.eval.toml`. An eval is a
//! conversation (`message` or `[[turns]]`) and the expectations its trajectory must meet, or a
//! table of `[[cases]]`. Case ids are paths under `evals/`; `index.eval.toml` takes its folder's.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::diag::{Code, Diagnostics};
use crate::formats::agent;
use crate::model::{CalledTool, EvalCase, EvalTurn, EvalsDef, Expectations};
use crate::parse::{self, DurationValue};
use crate::schema;
use crate::source::{self, MAX_DEFINITION_BYTES, Rel, SourceFile};

pub const DEFAULT_MAX_CONCURRENCY: u32 = 4;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
const SUFFIX: &str = ".eval.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    max_concurrency: Option<u32>,
    timeout: Option<DurationValue>,
    /// The model that grades `judge` rubrics: a model id or a table shaped like agent.toml's.
    judge_model: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalFile {
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    iterations: Option<u32>,
    #[serde(default)]
    dry_run: bool,
    message: Option<String>,
    turns: Option<Vec<TurnFile>>,
    expect: Option<ExpectFile>,
    cases: Option<Vec<CaseFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    id: Spanned<String>,
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    message: Option<String>,
    turns: Option<Vec<TurnFile>>,
    #[serde(default)]
    expect: ExpectFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    succeeded: Option<bool>,
    /// Names or `{ name, input }` tables; read by hand so a misspelt key is reported.
    #[serde(default)]
    called_tool: Vec<toml::Value>,
    #[serde(default)]
    not_called_tool: Vec<String>,
    #[serde(default)]
    reply_includes: Vec<String>,
    #[serde(default)]
    reply_matches: Vec<String>,
    max_turn_ms: Option<u64>,
    reply_schema: Option<toml::Value>,
    max_tool_calls: Option<u32>,
    max_cost_usd: Option<f64>,
    max_duration: Option<DurationValue>,
    judge: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallFile {
    name: String,
    input: Option<toml::Value>,
}

/// Loads `<project>/evals/`. `None` when the folder does not exist.
pub fn load(project_dir: &Path, rel: &Rel, diags: &mut Diagnostics) -> Option<EvalsDef> {
    let dir = project_dir.join("evals");
    if !dir.is_dir() {
        return None;
    }
    let config_path = dir.join("evals.toml");
    let config = if config_path.exists() {
        source::read_text(&config_path, rel, MAX_DEFINITION_BYTES, diags)
            .and_then(|src| parse::toml_file::<ConfigFile>(&src, diags).map(|c| (c, src)))
    } else {
        None
    };
    let mut cases = Vec::new();
    let mut ids = HashSet::new();
    // Eval files found, parsed or not: the config is required as soon as one exists.
    let mut eval_files = 0;
    for file in source::walk_files(&dir, rel, diags) {
        let path = dir.join(&file);
        if let Some(stem) = file.strip_suffix(SUFFIX) {
            eval_files += 1;
            let id = stem.strip_suffix("/index").or((stem == "index").then_some("index")).unwrap_or(stem).to_owned();
            if let Some(src) = source::read_text(&path, rel, MAX_DEFINITION_BYTES, diags) {
                for case in load_file(&src, &id, diags) {
                    if ids.insert(case.id.clone()) {
                        cases.push(case);
                    } else {
                        diags.report(
                            Code::DuplicateCase,
                            Some(&src.rel),
                            None,
                            format!("{}: eval id `{}` is used twice", src.rel, case.id),
                        );
                    }
                }
            }
        } else if file.ends_with(".eval.ts") || file.ends_with(".eval.js") {
            let shown = rel.of(&path);
            diags.report(
                Code::TypescriptDefinition,
                Some(&shown),
                None,
                format!(
                    "{shown}: TypeScript evals are not loaded; write {}",
                    file.replace(".eval.ts", SUFFIX).replace(".eval.js", SUFFIX)
                ),
            );
        }
    }
    let Some((config, src)) = config else {
        if eval_files > 0 && !config_path.exists() {
            let shown = rel.of(&dir);
            diags.report(
                Code::EvalsConfigMissing,
                Some(&shown),
                None,
                format!("{shown}: {eval_files} eval file(s) found but evals/evals.toml is missing"),
            );
        }
        return Some(EvalsDef {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            timeout: DEFAULT_TIMEOUT,
            judge_model: None,
            cases,
        });
    };
    if config.max_concurrency == Some(0) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("max_concurrency"),
            format!("{}: `max_concurrency` must be at least 1", src.rel),
        );
    }
    Some(EvalsDef {
        max_concurrency: config.max_concurrency.filter(|c| *c > 0).unwrap_or(DEFAULT_MAX_CONCURRENCY),
        timeout: parse::duration(config.timeout.as_ref(), &src, "timeout", DEFAULT_TIMEOUT, diags),
        judge_model: config.judge_model.as_ref().and_then(|m| agent::model_at(m, &src, "judge_model", diags)),
        cases,
    })
}

fn load_file(src: &SourceFile, id: &str, diags: &mut Diagnostics) -> Vec<EvalCase> {
    let Some(file) = parse::toml_file::<EvalFile>(src, diags) else {
        return Vec::new();
    };
    let iterations = match file.iterations {
        Some(0) => {
            diags.report(
                Code::InvalidValue,
                Some(&src.rel),
                src.pos_of_key("iterations"),
                format!("{}: `iterations` must be at least 1", src.rel),
            );
            1
        }
        other => other.unwrap_or(1),
    };
    let has_conversation = file.message.is_some() || file.turns.is_some();
    match file.cases {
        Some(cases) if !has_conversation && file.expect.is_none() => {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for case in cases {
                let id_pos = src.pos_at(case.id.span().start);
                let case_id = case.id.into_inner();
                if !parse::is_valid_name(&case_id) || !seen.insert(case_id.clone()) {
                    diags.report(
                        Code::DuplicateCase,
                        Some(&src.rel),
                        Some(id_pos),
                        format!("{}: case id `{case_id}` must be a unique single path segment", src.rel),
                    );
                    continue;
                }
                let Some(turns) = turns(case.message, case.turns, src, diags) else { continue };
                let mut tags = file.tags.clone();
                tags.extend(case.tags.into_iter().filter(|t| !file.tags.contains(t)));
                out.push(EvalCase {
                    id: format!("{id}/{case_id}"),
                    file: src.rel.clone(),
                    description: case.description.or(file.description.clone()),
                    tags,
                    turns,
                    expect: expectations(case.expect, src, diags),
                    iterations,
                    dry_run: file.dry_run,
                });
            }
            out
        }
        None if has_conversation => {
            let Some(turns) = turns(file.message, file.turns, src, diags) else { return Vec::new() };
            vec![EvalCase {
                id: id.to_owned(),
                file: src.rel.clone(),
                description: file.description,
                tags: file.tags,
                turns,
                expect: expectations(file.expect.unwrap_or_default(), src, diags),
                iterations,
                dry_run: file.dry_run,
            }]
        }
        _ => {
            diags.report(
                Code::EvalShape,
                Some(&src.rel),
                None,
                format!("{}: give either a conversation (`message` or [[turns]]) with [expect], or [[cases]]", src.rel),
            );
            Vec::new()
        }
    }
}

fn turns(
    message: Option<String>,
    turns: Option<Vec<TurnFile>>,
    src: &SourceFile,
    diags: &mut Diagnostics,
) -> Option<Vec<EvalTurn>> {
    let turns: Vec<EvalTurn> = match (message, turns) {
        (Some(message), None) => vec![EvalTurn { message }],
        (None, Some(turns)) => turns.into_iter().map(|t| EvalTurn { message: t.message }).collect(),
        _ => {
            diags.report(
                Code::EvalShape,
                Some(&src.rel),
                src.pos_of_key("turns"),
                format!("{}: give exactly one of `message` and [[turns]]", src.rel),
            );
            return None;
        }
    };
    if turns.is_empty() || turns.iter().any(|t| t.message.trim().is_empty()) {
        diags.report(
            Code::EvalShape,
            Some(&src.rel),
            src.pos_of_key("message"),
            format!("{}: every turn needs a non-empty message", src.rel),
        );
        return None;
    }
    Some(turns)
}

/// A regex error on one line. The parser's message draws the pattern with a caret under the
/// problem over several lines; its last line (`error: unclosed group`) says what is wrong.
fn regex_error_line(err: &regex::Error) -> String {
    let text = err.to_string();
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("invalid pattern");
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

fn expectations(file: ExpectFile, src: &SourceFile, diags: &mut Diagnostics) -> Expectations {
    for pattern in &file.reply_matches {
        if let Err(err) = regex::Regex::new(pattern) {
            diags.report(
                Code::InvalidRegex,
                Some(&src.rel),
                src.pos_of_key("reply_matches"),
                format!("{}: reply_matches `{pattern}`: {}", src.rel, regex_error_line(&err)),
            );
        }
    }
    let mut called_tool = Vec::new();
    for value in file.called_tool {
        let call = match value {
            toml::Value::String(name) => Ok(CallFile { name, input: None }),
            toml::Value::Table(_) => value.try_into::<CallFile>().map_err(|e| e.message().trim().to_owned()),
            other => Err(format!("invalid type: {}, expected a tool name or {{ name, input }}", other.type_str())),
        };
        match call {
            Ok(CallFile { name, input }) => {
                called_tool.push(CalledTool { name, input: input.and_then(|i| serde_json::to_value(i).ok()) })
            }
            Err(message) => diags.report(
                parse::classify(&message),
                Some(&src.rel),
                src.pos_of_key("called_tool"),
                format!("{}: called_tool: {message}", src.rel),
            ),
        }
    }
    if let Some(cost) = file.max_cost_usd
        && !(cost.is_finite() && cost >= 0.0)
    {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("max_cost_usd"),
            format!("{}: `max_cost_usd` must be a number of dollars, zero or more", src.rel),
        );
    }
    if file.judge.as_deref().is_some_and(|rubric| rubric.trim().is_empty()) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("judge"),
            format!("{}: `judge` must be a non-empty rubric", src.rel),
        );
    }
    Expectations {
        succeeded: file.succeeded,
        called_tool,
        not_called_tool: file.not_called_tool,
        reply_includes: file.reply_includes,
        reply_matches: file.reply_matches,
        max_turn_ms: file.max_turn_ms,
        reply_schema: file.reply_schema.as_ref().and_then(|s| schema::check(s, src, "reply_schema", diags)),
        max_tool_calls: file.max_tool_calls,
        max_cost_usd: file.max_cost_usd.filter(|c| c.is_finite() && *c >= 0.0),
        max_duration: file.max_duration.map(|d| d.resolve(src, "max_duration", DEFAULT_TIMEOUT, diags)),
        judge: file.judge.filter(|rubric| !rubric.trim().is_empty()),
    }
}
