//! Drives a streamed HTTP body: reads chunks under the first-byte and idle deadlines and the
//! cancellation token, splits them into SSE events and hands those to a provider's [`Decoder`].
//!
//! The decoder turns SSE events into [`ModelEvent`]s; this module never looks inside them.

use std::collections::VecDeque;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt, stream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Timeouts;
use super::sse::{SseEvent, SseParser};
use crate::error::{ModelError, TimeoutPhase};
use crate::provider::ModelStream;
use crate::types::ModelEvent;

/// A provider's stream format.
/// A text delta read from an event, owned; `None` when absent or empty (no event is made of it).
pub(crate) fn delta_text(text: Option<std::borrow::Cow<'_, str>>) -> Option<String> {
    text.filter(|t| !t.is_empty()).map(std::borrow::Cow::into_owned)
}

pub(crate) trait Decoder: Send + 'static {
    /// Decodes one SSE event into zero or more model events.
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError>;

    /// Whether the format's end marker was seen; no more events are read after it.
    fn is_done(&self) -> bool;

    /// The stream is over (end marker or end of body): emit what is held back, ending with
    /// `Finish`, or fail if the stream stopped too early.
    fn end(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError>;
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

struct Driver<D> {
    body: Option<Body>,
    parser: SseParser,
    decoder: D,
    queue: VecDeque<ModelEvent>,
    pending_error: Option<ModelError>,
    finished: bool,
    first_byte_deadline: Option<Instant>,
    timeouts: Timeouts,
    cancel: CancellationToken,
    scratch: Vec<SseEvent>,
}

/// Streams `response`'s SSE body through `decoder`. `started` is when the request was sent: the
/// first chunk must arrive before `started + first_byte`.
pub(crate) fn sse_stream<D: Decoder>(
    response: reqwest::Response,
    decoder: D,
    timeouts: Timeouts,
    started: Instant,
    cancel: CancellationToken,
) -> ModelStream {
    let driver = Driver {
        body: Some(Box::pin(response.bytes_stream())),
        parser: SseParser::default(),
        decoder,
        queue: VecDeque::new(),
        pending_error: None,
        finished: false,
        first_byte_deadline: Some(started + timeouts.first_byte),
        timeouts,
        cancel,
        scratch: Vec::new(),
    };
    Box::pin(stream::unfold(driver, |mut driver| async move { driver.next().await.map(|item| (item, driver)) }))
}

impl<D: Decoder> Driver<D> {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if self.cancel.is_cancelled() && !(self.finished && self.queue.is_empty()) {
                return Some(Err(self.fail(ModelError::Cancelled)));
            }
            if let Some(event) = self.queue.pop_front() {
                return Some(Ok(event));
            }
            if let Some(err) = self.pending_error.take() {
                return Some(Err(self.fail(err)));
            }
            if self.finished {
                return None;
            }
            if self.decoder.is_done() {
                self.body = None;
                self.finished = true;
                if let Err(err) = self.decoder.end(&mut self.queue) {
                    self.pending_error = Some(err);
                }
                continue;
            }
            self.read().await;
        }
    }

    /// Reads one chunk (or the end of the body) and decodes what it completes.
    async fn read(&mut self) {
        let Some(body) = self.body.as_mut() else {
            self.finished = true;
            return;
        };
        let (deadline, phase, after) = match self.first_byte_deadline {
            Some(deadline) => (deadline, TimeoutPhase::FirstByte, self.timeouts.first_byte),
            None => (Instant::now() + self.timeouts.idle, TimeoutPhase::Idle, self.timeouts.idle),
        };
        let chunk = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return,
            chunk = tokio::time::timeout_at(deadline, body.next()) => chunk,
        };
        self.first_byte_deadline = None;
        let mut events = std::mem::take(&mut self.scratch);
        let result = match chunk {
            Err(_) => Err(ModelError::Timeout { phase, after }),
            Ok(Some(Err(err))) => Err(ModelError::Network { message: format!("the stream broke: {err}") }),
            Ok(Some(Ok(bytes))) => self.parser.push(bytes.as_ref(), &mut events),
            Ok(None) => {
                self.body = None;
                self.parser.finish(&mut events)
            }
        };
        let result = result.and_then(|()| {
            for event in events.drain(..) {
                if self.decoder.is_done() {
                    break;
                }
                self.decoder.event(event, &mut self.queue)?;
            }
            Ok(())
        });
        events.clear();
        self.scratch = events;
        if let Err(err) = result {
            self.pending_error = Some(err);
            self.body = None;
            self.finished = true;
        } else if self.body.is_none() && !self.decoder.is_done() {
            self.finished = true;
            if let Err(err) = self.decoder.end(&mut self.queue) {
                self.pending_error = Some(err);
            }
        }
    }

    /// Ends the stream with `err`, dropping the connection and anything still queued.
    fn fail(&mut self, err: ModelError) -> ModelError {
        self.body = None;
        self.queue.clear();
        self.pending_error = None;
        self.finished = true;
        err
    }
}
