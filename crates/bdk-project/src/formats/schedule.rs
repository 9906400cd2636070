//! `schedules/<id>.md` (cron frontmatter, the body is the prompt) and `schedules/<id>.toml`
//! (`cron` and exactly one of `prompt`, `run`, `receive`). Cron is 5-field, evaluated in UTC.

use std::time::Duration;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use serde::Deserialize;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::{ScheduleAction, ScheduleDef};
use crate::parse::{self, DurationValue};
use crate::source::SourceFile;

use super::Origin;

/// How long a `run` command may take when the file sets no `timeout`.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleFront {
    cron: Option<String>,
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleFile {
    cron: String,
    description: Option<String>,
    prompt: Option<String>,
    run: Option<Vec<String>>,
    receive: Option<ReceiveFile>,
    timeout: Option<DurationValue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiveFile {
    channel: String,
    message: String,
}

pub fn load_markdown(src: &SourceFile, id: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<ScheduleDef> {
    check_id(src, id, diags)?;
    let md = parse::markdown(src, diags)?;
    let front: ScheduleFront = parse::frontmatter(src, &md, diags)?;
    let Some(cron) = front.cron else {
        diags.report_with_hint(
            Code::MissingField,
            Some(&src.rel),
            Some(crate::source::Pos { line: 1, column: 1 }),
            format!("{}: schedule `{id}` has no `cron` frontmatter", src.rel),
            "open the file with ---\\ncron: \"0 9 * * 1-5\"\\n---",
        );
        return None;
    };
    let cron_ok = check_cron(&cron, src, diags);
    let prompt = md.body.trim();
    if prompt.is_empty() {
        diags.report(
            Code::EmptyPrompt,
            Some(&src.rel),
            None,
            format!("{}: schedule `{id}` has an empty body; the body is the prompt", src.rel),
        );
        return None;
    }
    cron_ok?;
    Some(ScheduleDef {
        id: origin.name(id),
        source: origin.source,
        file: src.rel.clone(),
        cron,
        description: front.description,
        action: ScheduleAction::Prompt(prompt.to_owned()),
        cwd: origin.bot_dir.clone(),
        timeout: DEFAULT_RUN_TIMEOUT,
    })
}

pub fn load_toml(src: &SourceFile, id: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<ScheduleDef> {
    check_id(src, id, diags)?;
    let file: ScheduleFile = parse::toml_file(src, diags)?;
    let cron_ok = check_cron(&file.cron, src, diags);
    let timeout = parse::duration(file.timeout.as_ref(), src, "timeout", DEFAULT_RUN_TIMEOUT, diags);
    let action = match (file.prompt, file.run, file.receive) {
        (Some(prompt), None, None) if !prompt.trim().is_empty() => ScheduleAction::Prompt(prompt),
        (Some(_), None, None) => {
            diags.report(
                Code::EmptyPrompt,
                Some(&src.rel),
                src.pos_of_key("prompt"),
                format!("{}: `prompt` is empty", src.rel),
            );
            return None;
        }
        (None, Some(run), None) if run.first().is_some_and(|c| !c.trim().is_empty()) => {
            commands::check_files(&run, &origin.bot_dir, src, "run", src.pos_of_key("run"), diags);
            ScheduleAction::Run(run)
        }
        // Inside an extension the channel named is the extension's own (`<ns>__<channel>`).
        (None, None, Some(receive)) => {
            ScheduleAction::Receive { channel: origin.name(&receive.channel), message: receive.message }
        }
        _ => {
            diags.report(
                Code::ScheduleBody,
                Some(&src.rel),
                None,
                format!("{}: schedule `{id}` needs exactly one of `prompt`, `run` (non-empty) and `receive`", src.rel),
            );
            return None;
        }
    };
    cron_ok?;
    Some(ScheduleDef {
        id: origin.name(id),
        source: origin.source,
        file: src.rel.clone(),
        cron: file.cron,
        description: file.description,
        action,
        cwd: origin.bot_dir.clone(),
        timeout,
    })
}

fn check_id(src: &SourceFile, id: &str, diags: &mut Diagnostics) -> Option<()> {
    if parse::is_valid_name(id) {
        Some(())
    } else {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{id}` is not a valid schedule id", src.rel),
        );
        None
    }
}

/// The five fields in order, with the values each accepts.
const FIELDS: [(&str, &str); 5] =
    [("minute", "0-59"), ("hour", "0-23"), ("day of month", "1-31"), ("month", "1-12"), ("weekday", "0-7")];

/// Parses a 5-field cron expression (no seconds field).
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() != 5 {
        let n = fields.len();
        let noun = if n == 1 { "field" } else { "fields" };
        return Err(format!("`{expr}` has {n} {noun}; schedules use 5 (minute hour day month weekday)"));
    }
    let parser = CronParser::builder().seconds(Seconds::Disallowed).build();
    parser.parse(expr).map_err(|err| {
        // croner does not say which field is wrong: parse each alone, the others `*`.
        let culprit = (0..fields.len()).find_map(|i| {
            let alone: Vec<&str> = (0..fields.len()).map(|j| if j == i { fields[j] } else { "*" }).collect();
            parser.parse(&alone.join(" ")).err().map(|e| (i, e))
        });
        match culprit {
            Some((i, e)) => {
                let (name, range) = FIELDS[i];
                let text = e.to_string();
                if text.contains("out of bounds") {
                    format!("{name}: {} is out of range ({range})", fields[i])
                } else {
                    format!("{name}: `{}`: {}", fields[i], text.trim_start_matches("Component error: "))
                }
            }
            None => err.to_string(),
        }
    })
}

/// The next time `expr` fires strictly after `now`, in UTC.
pub fn next_fire(expr: &str, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    parse_cron(expr).ok()?.find_next_occurrence(&now, false).ok()
}

fn check_cron(expr: &str, src: &SourceFile, diags: &mut Diagnostics) -> Option<()> {
    match parse_cron(expr) {
        Ok(_) => Some(()),
        Err(err) => {
            diags.report(
                Code::InvalidCron,
                Some(&src.rel),
                src.pos_of_key("cron"),
                format!("{}: invalid cron expression: {err}", src.rel),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cron;

    #[test]
    fn cron_errors_name_the_field() {
        let err = |expr: &str| parse_cron(expr).err().unwrap_or_default();
        assert_eq!(err("0 25 * * *"), "hour: 25 is out of range (0-23)");
        assert_eq!(err("60 * * * *"), "minute: 60 is out of range (0-59)");
        assert_eq!(err("* * 0 * *"), "day of month: 0 is out of range (1-31)");
        assert_eq!(err("* * * 13 *"), "month: 13 is out of range (1-12)");
        assert!(err("* * * * FOO").starts_with("weekday: `FOO`"), "{}", err("* * * * FOO"));
        assert_eq!(err("daily"), "`daily` has 1 field; schedules use 5 (minute hour day month weekday)");
        assert!(err("0 0 9 * * *").starts_with("`0 0 9 * * *` has 6 fields;"));
        assert!(parse_cron("*/15 9-17 * JAN-MAR MON-FRI").is_ok());
    }
}
