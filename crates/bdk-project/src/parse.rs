//! Shared parsing: TOML into raw `*File` structs, Markdown frontmatter, durations, names and
//! `${NAME}` placeholders. Every failure becomes a diagnostic with a position.

use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::diag::{Code, Diagnostics};
use crate::source::{Pos, SourceFile};

/// Parses a TOML definition, reporting every key that does not fit (see [`toml_file_partial`]);
/// `None` when there was any such problem.
pub fn toml_file<T: DeserializeOwned>(src: &SourceFile, diags: &mut Diagnostics) -> Option<T> {
    match toml_file_partial(src, diags)? {
        (value, dropped) if dropped.is_empty() => Some(value),
        _ => None,
    }
}

/// Parses a TOML definition and reports each problem, not only the first: a key that is
/// unknown (with a "did you mean" and the known keys), of the wrong type or with a bad value is
/// reported at its line with its dotted path, dropped, and the rest parsed again. Returns the
/// value built from the keys that fit and the top-level keys that were dropped, so a loader can
/// run its own checks on the rest without follow-on diagnostics about the dropped ones. `None`
/// when the file is not TOML or a required key is missing.
pub fn toml_file_partial<T: DeserializeOwned>(src: &SourceFile, diags: &mut Diagnostics) -> Option<(T, Vec<String>)> {
    let mut table = match src.text.parse::<toml::Table>() {
        Ok(table) => table,
        Err(err) => {
            let message = err.message().trim().to_owned();
            let pos = err.span().map(|span| src.pos_at(span.start));
            diags.report(classify(&message), Some(&src.rel), pos, format!("{}: {message}", src.rel));
            return None;
        }
    };
    // The common case: the file fits, and values keep their spans in the file.
    if let Ok(value) = toml::from_str::<T>(&src.text) {
        return Some((value, Vec::new()));
    }
    let mut dropped: Vec<String> = Vec::new();
    // Each round drops one key; a file has far fewer bad keys than this. The rounds parse the
    // table written out again, so spans in a value returned after a drop do not point into the
    // file: loaders that read spans use [`toml_file`], which returns nothing then.
    for _ in 0..64 {
        let text = toml::to_string(&table).ok()?;
        let deserializer = toml::Deserializer::parse(&text).ok()?;
        let err = match serde_path_to_error::deserialize::<_, T>(deserializer) {
            Ok(value) => return Some((value, dropped)),
            Err(err) => err,
        };
        let mut path: Vec<String> = err
            .path()
            .iter()
            .filter_map(|segment| match segment {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                _ => None,
            })
            .collect();
        let message = err.into_inner().message().trim().to_owned();
        let code = classify(&message);
        if code == Code::UnknownKey
            && let Some(name) = message.split('`').nth(1)
            && path.last().map(String::as_str) != Some(name)
        {
            path.push(name.to_owned());
        }
        let pos = pos_of_path(src, &path);
        let shown = if path.is_empty() { String::new() } else { format!("`{}`: ", path.join(".")) };
        match code {
            Code::UnknownKey => {
                let name = path.last().map(String::as_str).unwrap_or_default();
                let known = crate::suggest::expected_names(&message);
                let hint = if known.is_empty() {
                    "remove the key or fix its spelling; docs/formats.md lists every key".to_owned()
                } else {
                    format!("remove the key or fix its spelling; the keys here are: {}", known.join(", "))
                };
                let suggestion = crate::suggest::did_you_mean(name, known.iter().copied());
                let message = format!("{}: unknown key `{}`{suggestion}", src.rel, path.join("."));
                diags.report_with_hint(code, Some(&src.rel), pos, message, hint);
            }
            _ => {
                let hint = expected_form(&message, &path).unwrap_or_else(|| code.hint().to_owned());
                diags.report_with_hint(code, Some(&src.rel), pos, format!("{}: {shown}{message}", src.rel), hint);
            }
        }
        // A missing key cannot be dropped; one that is present but wrong can.
        if path.is_empty() || code == Code::MissingField && path.len() < 2 || !remove_path(&mut table, &path) {
            return None;
        }
        if let Some(top) = path.first().filter(|t| !dropped.contains(t)) {
            dropped.push(top.clone());
        }
    }
    None
}

/// The form a key expects, when the message says it got another (a string where a list of
/// program and arguments goes, the classic `command = "python3 x.py"`).
fn expected_form(message: &str, path: &[String]) -> Option<String> {
    if message.contains("expected a sequence") && message.contains("invalid type: string") {
        let key = path.last().map_or("command", String::as_str);
        let given = message.split('"').nth(1).unwrap_or("program arg");
        let words: Vec<String> = given.split_whitespace().map(|w| format!("\"{w}\"")).collect();
        return Some(format!("write a list: {key} = [{}]", words.join(", ")));
    }
    None
}

/// Removes the value at `path` (dotted keys and list indices) from `table`.
fn remove_path(table: &mut toml::Table, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    let mut current = table;
    for key in parents {
        if current.get(key).is_some_and(toml::Value::is_array) {
            // A key inside a list of tables: drop the whole list.
            return current.remove(key).is_some();
        }
        match current.get_mut(key) {
            Some(toml::Value::Table(next)) => current = next,
            _ => return false,
        }
    }
    current.remove(last).is_some()
}

/// Where the key at `path` is written: each segment searched in turn after the previous one
/// (inline tables included), the first at its line start; the deepest one found wins.
pub fn pos_of_path(src: &SourceFile, path: &[String]) -> Option<Pos> {
    let first = path.first()?;
    let top = src.pos_of_key(first)?;
    let mut start = offset_of_line(&src.text, top.line);
    let mut best = top;
    for segment in path.iter().skip(1).filter(|s| s.parse::<usize>().is_err()) {
        let Some(at) = find_key(&src.text[start..], segment) else { break };
        start += at;
        best = src.pos_at(start);
        start += segment.len();
    }
    Some(best)
}

/// The offset of `key` written as a key (`key =`, `key.`, `[..key]`, `"key" =`) in `text`.
fn find_key(text: &str, key: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(key) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + key.len()..].trim_start_matches(['"', ' ']).chars().next();
        let starts = before.is_none_or(|c| matches!(c, ' ' | '{' | ',' | '[' | '.' | '"' | '\n'));
        if starts && matches!(after, Some('=' | ']' | '.')) {
            return Some(at);
        }
        from = at + key.len();
    }
    None
}

fn offset_of_line(text: &str, line: u32) -> usize {
    text.split_inclusive('\n').take(line.saturating_sub(1) as usize).map(str::len).sum()
}

/// The code for a serde message: which kind of mistake it describes. The words may follow a
/// path (serde_norway writes `cron: invalid type: ...`), so the earliest known phrase anywhere in
/// the message decides; a phrase quoted later in the message (a value, a variant) cannot win.
pub fn classify(message: &str) -> Code {
    const PHRASES: &[(&str, Code)] = &[
        ("unknown field", Code::UnknownKey),
        ("missing field", Code::MissingField),
        ("invalid type", Code::WrongType),
        ("data did not match any variant", Code::WrongType),
        ("unknown variant", Code::InvalidValue),
        ("invalid value", Code::InvalidValue),
    ];
    PHRASES
        .iter()
        .filter_map(|(phrase, code)| message.find(phrase).map(|at| (at, *code)))
        .min_by_key(|(at, _)| *at)
        .map_or(Code::TomlSyntax, |(_, code)| code)
}

/// Drops serde_norway's ` at line N column M` (and ` at position N`) marks: they count from the
/// first frontmatter line, and the diagnostic carries the position in the file instead.
pub fn strip_yaml_marks(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let mark_len = yaml_mark_len(after);
        if mark_len == 0 {
            out.push_str(" at ");
        }
        rest = &after[mark_len..];
    }
    out.push_str(rest);
    out
}

/// The length of `line N column M` or `position N` at the start of `text`, or 0.
fn yaml_mark_len(text: &str) -> usize {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if let Some(rest) = text.strip_prefix("line ") {
        let line = digits(rest);
        if let Some(col) = rest[line..].strip_prefix(" column ").filter(|_| line > 0) {
            let column = digits(col);
            if column > 0 {
                return text.len() - col.len() + column;
            }
        }
    } else if let Some(rest) = text.strip_prefix("position ") {
        let n = digits(rest);
        if n > 0 {
            return "position ".len() + n;
        }
    }
    0
}

/// A Markdown file split into its YAML frontmatter (if any) and body.
#[derive(Debug)]
pub struct Markdown<'a> {
    pub frontmatter: Option<&'a str>,
    /// The line (1-based) the frontmatter's first YAML line sits on.
    pub frontmatter_line: u32,
    pub body: &'a str,
}

/// Splits `---\n<yaml>\n---\n<body>`. A file that does not open with `---` has no frontmatter;
/// one that opens but never closes is a diagnostic.
pub fn markdown<'a>(src: &'a SourceFile, diags: &mut Diagnostics) -> Option<Markdown<'a>> {
    let text = src.text.strip_prefix('\u{feff}').unwrap_or(&src.text);
    let Some(rest) = text.strip_prefix("---").filter(|r| r.starts_with('\n') || r.starts_with("\r\n")) else {
        return Some(Markdown { frontmatter: None, frontmatter_line: 1, body: text });
    };
    // Drop only the fence's own line break, so YAML line numbers map onto the file's.
    let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n')).unwrap_or(rest);
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = rest.get(..offset).unwrap_or("");
            let body = rest.get(offset + line.len()..).unwrap_or("");
            return Some(Markdown { frontmatter: Some(yaml), frontmatter_line: 2, body });
        }
        offset += line.len();
    }
    diags.report_with_hint(
        Code::FrontmatterSyntax,
        Some(&src.rel),
        Some(Pos { line: 1, column: 1 }),
        format!("{}: frontmatter opened with `---` is never closed", src.rel),
        "close the frontmatter with a line holding only `---`",
    );
    None
}

/// Parses frontmatter YAML into `T`, reporting errors at their line in the file.
pub fn frontmatter<T: DeserializeOwned + Default>(
    src: &SourceFile,
    md: &Markdown<'_>,
    diags: &mut Diagnostics,
) -> Option<T> {
    let Some(yaml) = md.frontmatter else {
        return Some(T::default());
    };
    if yaml.trim().is_empty() {
        return Some(T::default());
    }
    match serde_norway::from_str::<T>(yaml) {
        Ok(value) => Some(value),
        Err(err) => {
            let pos = err.location().map(|loc| Pos {
                line: md.frontmatter_line + u32::try_from(loc.line()).unwrap_or(1).saturating_sub(1),
                column: u32::try_from(loc.column()).unwrap_or(1),
            });
            let message = strip_yaml_marks(&err.to_string());
            let code = match classify(&message) {
                Code::TomlSyntax => Code::FrontmatterSyntax,
                other => other,
            };
            diags.report(code, Some(&src.rel), pos, format!("{}: frontmatter: {message}", src.rel));
            None
        }
    }
}

/// A timeout or interval as written: seconds (`30`) or a humantime string (`"2m"`, `"500ms"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DurationValue {
    Seconds(u64),
    Text(String),
}

impl DurationValue {
    /// Resolves to a duration; an unreadable or zero value is reported and `fallback` used.
    pub fn resolve(&self, src: &SourceFile, key: &str, fallback: Duration, diags: &mut Diagnostics) -> Duration {
        self.resolve_at(src, key, src.pos_of_key(key), fallback, diags)
    }

    /// [`DurationValue::resolve`], reporting at `pos`.
    pub fn resolve_at(
        &self,
        src: &SourceFile,
        key: &str,
        pos: Option<Pos>,
        fallback: Duration,
        diags: &mut Diagnostics,
    ) -> Duration {
        let parsed = match self {
            DurationValue::Seconds(secs) => Ok(Duration::from_secs(*secs)),
            DurationValue::Text(text) => humantime::parse_duration(text).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok(duration) if !duration.is_zero() => duration,
            Ok(_) => {
                diags.report(
                    Code::InvalidValue,
                    Some(&src.rel),
                    pos,
                    format!("{}: `{key}` must be greater than zero", src.rel),
                );
                fallback
            }
            Err(err) => {
                diags.report_with_hint(
                    Code::InvalidValue,
                    Some(&src.rel),
                    pos,
                    format!("{}: `{key}` is not a duration: {err}", src.rel),
                    "write seconds as a number (30) or a duration string (\"30s\", \"2m\", \"500ms\")",
                );
                fallback
            }
        }
    }
}

/// Resolves an optional duration key.
pub fn duration(
    value: Option<&DurationValue>,
    src: &SourceFile,
    key: &str,
    default: Duration,
    diags: &mut Diagnostics,
) -> Duration {
    value.map_or(default, |v| v.resolve(src, key, default, diags))
}

pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Capability names (tools, skills, channels, ...): `[A-Za-z0-9][A-Za-z0-9_-]*`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Tool names also fit the model APIs' function-name limit of 64 characters.
pub fn is_valid_tool_name(name: &str) -> bool {
    is_valid_name(name) && name.len() <= 64
}

/// Every `${NAME}` placeholder in `text`, in order of appearance.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(placeholders("Bearer ${TOKEN} and ${ORG_ID}/${}"), vec!["TOKEN", "ORG_ID"]);
        assert!(placeholders("${unterminated").is_empty());
    }

    #[test]
    fn serde_messages_are_classified_by_their_words() {
        assert_eq!(classify("cron: invalid type: sequence, expected a string"), Code::WrongType);
        assert_eq!(classify("unknown field `x`, expected one of `a`, `b`"), Code::UnknownKey);
        assert_eq!(classify("a.b: missing field `id`"), Code::MissingField);
        assert_eq!(classify("unknown variant `invalid type`, expected `x`"), Code::InvalidValue);
        assert_eq!(classify("did not find expected key"), Code::TomlSyntax);
    }

    #[test]
    fn yaml_marks_are_dropped() {
        assert_eq!(
            strip_yaml_marks("cron: invalid type: sequence, expected a string at line 2 column 7"),
            "cron: invalid type: sequence, expected a string"
        );
        assert_eq!(
            strip_yaml_marks(
                "did not find expected ',' at line 1 column 7, while parsing a flow sequence at line 1 column 6"
            ),
            "did not find expected ',', while parsing a flow sequence"
        );
        assert_eq!(strip_yaml_marks("look at line breaks"), "look at line breaks");
        assert_eq!(strip_yaml_marks("found at position 12"), "found");
    }

    #[test]
    fn names_follow_the_slug_rule() {
        assert!(is_valid_name("inspect_pr"));
        assert!(is_valid_name("a-b"));
        assert!(!is_valid_name("_x"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }
}
