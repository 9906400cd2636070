//! The in-memory ring buffer behind `GET /v1/logs?after=N`: the most recent log lines, each with
//! a sequence number that polling clients use as a cursor. A [`tracing_subscriber::Layer`] feeds
//! it; the binary installs that layer next to its stderr writer. Nothing here writes files.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;

/// How many lines the buffer keeps by default.
pub const DEFAULT_CAPACITY: usize = 1000;

/// One log line as `GET /v1/logs` returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// Increases by one per line, from 1; pass the last one seen as `after`.
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub level: String,
    pub target: String,
    /// The message followed by the event's other fields as `key=value`.
    pub message: String,
}

/// A bounded buffer of recent lines. Cheap to clone; clones share the lines.
#[derive(Debug, Clone)]
pub struct LogBuffer {
    inner: Arc<Mutex<Ring>>,
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<LogLine>,
    capacity: usize,
    next_seq: u64,
}

impl Default for LogBuffer {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl LogBuffer {
    pub fn new(capacity: usize) -> Self {
        let ring = Ring { lines: VecDeque::with_capacity(capacity.min(4096)), capacity: capacity.max(1), next_seq: 1 };
        Self { inner: Arc::new(Mutex::new(ring)) }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a line, dropping the oldest when full. Returns its sequence number.
    pub fn push(&self, level: &str, target: &str, message: String) -> u64 {
        let mut ring = self.ring();
        let seq = ring.next_seq;
        ring.next_seq += 1;
        if ring.lines.len() == ring.capacity {
            ring.lines.pop_front();
        }
        ring.lines.push_back(LogLine {
            seq,
            at: bdk_protocol::event::timestamp_now(),
            level: level.to_owned(),
            target: target.to_owned(),
            message,
        });
        seq
    }

    /// Lines with `seq > after`, oldest first, at most `limit`; and the cursor to poll with next
    /// (the last returned `seq`, or `after` itself when nothing is new).
    pub fn after(&self, after: u64, limit: usize) -> (Vec<LogLine>, u64) {
        let ring = self.ring();
        let lines: Vec<LogLine> = ring.lines.iter().filter(|l| l.seq > after).take(limit).cloned().collect();
        let cursor = lines.last().map_or(after.min(ring.next_seq - 1), |l| l.seq);
        (lines, cursor)
    }

    /// A tracing layer that copies every event it sees into this buffer.
    pub fn layer(&self) -> LogLayer {
        LogLayer { buffer: self.clone() }
    }
}

/// Feeds a [`LogBuffer`] from `tracing` events.
#[derive(Debug, Clone)]
pub struct LogLayer {
    buffer: LogBuffer,
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for LogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut visitor = LineVisitor::default();
        event.record(&mut visitor);
        let meta = event.metadata();
        self.buffer.push(meta.level().as_str(), meta.target(), visitor.finish());
    }
}

#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: String,
}

impl LineVisitor {
    fn finish(mut self) -> String {
        if !self.fields.is_empty() {
            if !self.message.is_empty() {
                self.message.push(' ');
            }
            self.message.push_str(&self.fields);
        }
        self.message
    }
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
            return;
        }
        if !self.fields.is_empty() {
            self.fields.push(' ');
        }
        let _ = write!(self.fields, "{}={value:?}", field.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn cursor_polling_sees_each_line_once_and_old_lines_fall_off() {
        let buffer = LogBuffer::new(3);
        for i in 0..5 {
            buffer.push("INFO", "t", format!("line {i}"));
        }
        let (lines, cursor) = buffer.after(0, 100);
        assert_eq!(lines.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(cursor, 5);
        let (lines, cursor) = buffer.after(cursor, 100);
        assert!(lines.is_empty());
        assert_eq!(cursor, 5);
        buffer.push("WARN", "t", "new".into());
        let (lines, _) = buffer.after(5, 100);
        assert_eq!(lines[0].message, "new");
    }

    #[test]
    fn the_layer_records_message_and_fields() {
        let buffer = LogBuffer::new(10);
        let subscriber = tracing_subscriber::registry().with(buffer.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(port = 3000, "listening");
        });
        let (lines, _) = buffer.after(0, 10);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].level, "INFO");
        assert_eq!(lines[0].message, "listening port=3000");
    }
}
