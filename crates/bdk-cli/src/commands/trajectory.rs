//! `bdk trajectory`: the reply, tool calls and usage of a saved event stream, as the JSON that
//! `bdk run --json` prints. Reads any NDJSON event file (a trace or a session's
//! `events.ndjson`); a torn final line (a write cut short by a crash) is skipped with a note.

use anyhow::{Context, bail};
use bdk_engine::Trajectory;
use bdk_protocol::Event;

use crate::cli::TrajectoryArgs;
use crate::exit::Exit;

pub fn run(args: &TrajectoryArgs) -> anyhow::Result<Exit> {
    let bytes = std::fs::read(&args.events).with_context(|| format!("reading {}", args.events.display()))?;
    let events = parse(&bytes).with_context(|| format!("reading {}", args.events.display()))?;
    // A session's `events.ndjson` stores repeated text as references (docs/formats.md).
    let events = bdk_engine::stored_text::expand_log(events);
    super::run::print_json(&Trajectory::from_events(&events))?;
    Ok(Exit::Ok)
}

/// Parses NDJSON events. Only the last line may be broken, and only if it lacks its newline.
fn parse(bytes: &[u8]) -> anyhow::Result<Vec<Event>> {
    let text = String::from_utf8_lossy(bytes);
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.split('\n').collect();
    let mut events = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(event) => events.push(event),
            Err(_) if i + 1 == lines.len() && !complete => {
                eprintln!("note: skipped a torn last line (line {})", i + 1);
            }
            Err(error) => bail!("line {}: not an event: {error}", i + 1),
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str =
        r#"{"type":"session.waiting","index":0,"sessionId":"ses_a","at":"2025-01-01T00:00:00.000Z","data":{}}"#;

    #[test]
    fn a_torn_last_line_is_skipped() {
        let text = format!("{LINE}\n{{\"type\":\"mess");
        assert_eq!(parse(text.as_bytes()).unwrap().len(), 1);
        assert_eq!(parse(format!("{LINE}\n").as_bytes()).unwrap().len(), 1);
    }

    #[test]
    fn a_broken_middle_line_is_an_error() {
        let text = format!("{{oops\n{LINE}\n");
        assert!(parse(text.as_bytes()).is_err());
        assert!(parse(b"{oops\n").is_err(), "a complete last line must parse");
    }
}
