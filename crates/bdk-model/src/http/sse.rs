//! A small incremental Server-Sent Events parser: bytes in, `(event, data)` records out.
//!
//! Bytes are buffered until a whole line is present, so a UTF-8 character split across network
//! chunks is decoded only once complete. It knows nothing of JSON or of any provider.

use crate::error::ModelError;

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental parser; feed it chunks with [`SseParser::push`].
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Parses what `bytes` completes, appending dispatched events to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        let scan_from = self.buf.len();
        self.buf.extend_from_slice(bytes);
        let Some(last_newline) = self.buf[scan_from..].iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let complete = scan_from + last_newline + 1;
        let mut buf = std::mem::take(&mut self.buf);
        let mut result = Ok(());
        let mut start = 0;
        while let Some(offset) = buf[start..complete].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            result = self.line(&buf[start..end], out);
            if result.is_err() {
                break;
            }
            start = end + 1;
        }
        buf.drain(..complete);
        self.buf = buf;
        result
    }

    /// The body ended: dispatch what an unterminated last event holds.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.line(&rest, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ModelError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let line = std::str::from_utf8(line)
            .map_err(|_| ModelError::MalformedStream { message: "stream line is not valid UTF-8".into() })?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent { event: self.event.take(), data: std::mem::take(&mut self.data) });
        }
        self.event = None;
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(bytes: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            parser.push(chunk, &mut out).unwrap();
        }
        parser.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn events_survive_any_chunking() {
        let body =
            "event: a\ndata: {\"t\":\"h\u{e9}llo \u{1F600}\"}\n\n: comment\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        let whole = parse_in_pieces(body.as_bytes(), body.len());
        assert_eq!(
            whole,
            [
                SseEvent { event: Some("a".into()), data: "{\"t\":\"h\u{e9}llo \u{1F600}\"}".into() },
                SseEvent { event: None, data: "x\ny".into() },
                SseEvent { event: None, data: "[DONE]".into() },
            ]
        );
        for piece in 1..8 {
            assert_eq!(parse_in_pieces(body.as_bytes(), piece), whole, "piece size {piece}");
        }
    }

    #[test]
    fn unterminated_last_event_is_dispatched() {
        assert_eq!(parse_in_pieces(b"data: tail", 3), [SseEvent { event: None, data: "tail".into() }]);
    }

    #[test]
    fn invalid_utf8_is_malformed() {
        let mut parser = SseParser::default();
        let err = parser.push(b"data: \xff\xfe\n\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err.code(), "malformed_stream");
    }
}
