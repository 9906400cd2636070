//! One model step's stream turned into events: reasoning and text deltas batched into
//! `reasoning.appended` / `message.appended` (flushed by size, by age, and whenever the kind of
//! output changes), `reasoning.completed` when a reasoning block ends, `message.completed` with
//! the step's whole text at the end, and the step's tool calls, usage and finish reason handed
//! back to the turn loop. Every character of a delta reaches the log, including on cancel and
//! error: the partial delta is staged before the step returns. Events staged before the step
//! (`turn.started`, `step.started`) are handed to the log by the same rules as a delta.
//! A step whose output (text,
//! reasoning and tool-call arguments) passes the byte cap, or whose reported output tokens pass
//! the token cap, is cut off there and ends as [`StepEnd::TooLarge`].

use std::time::Duration;

use bdk_model::{FinishReason, ModelError, ModelEvent, ModelStream, Reasoning, ToolCall, Usage};
use bdk_protocol::EventData;
use bdk_protocol::event::{TextCompleted, TextDelta};
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::emit::Emitter;

/// A staged delta this long is handed to the log at once (or, while an append is in flight, as
/// soon as that one is durable).
const FLUSH_BYTES: usize = 1024;
/// A staged delta this old is handed to the log, so a slow stream still shows progress.
const FLUSH_AFTER: Duration = Duration::from_millis(25);

/// What the model produced in one step.
#[derive(Debug, Default)]
pub(crate) struct StepOutput {
    pub text: String,
    pub reasoning: Option<Reasoning>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish: Option<FinishReason>,
    /// When the model's first event arrived (time to first token).
    pub first_output: Option<std::time::Instant>,
}

/// How a step's stream ended.
#[derive(Debug)]
pub(crate) enum StepEnd {
    Finished,
    Cancelled,
    Failed(ModelError),
    /// The output passed a cap; the message says which.
    TooLarge(String),
}

/// The default cap on one step's output: 1 MiB of text, reasoning and tool-call arguments.
pub(crate) const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// Caps on one step's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputCap {
    pub bytes: usize,
    /// Output tokens as the provider reports them (checked when usage arrives).
    pub tokens: Option<u64>,
}

impl OutputCap {
    fn exceeded(&self, out: &StepOutput, bytes: usize) -> Option<String> {
        if bytes > self.bytes {
            return Some(format!(
                "the model's output in one step passed the cap of {} bytes and was cut off",
                self.bytes
            ));
        }
        match self.tokens {
            Some(cap) if out.usage.output_tokens > cap => Some(format!(
                "the model's output in one step used {} tokens, over the cap of {cap}",
                out.usage.output_tokens
            )),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reasoning,
    Text,
}

/// Collects deltas and decides when they become events.
#[derive(Debug, Default)]
struct Assembler {
    out: StepOutput,
    /// The delta not yet staged as an event, and its kind.
    delta: String,
    kind: Option<Kind>,
    /// When the oldest unstaged byte arrived.
    since: Option<Instant>,
    /// A reasoning block is open (its `reasoning.completed` is not yet staged).
    reasoning_open: bool,
    /// Bytes of output so far (text, reasoning, tool-call arguments).
    bytes: usize,
}

impl Assembler {
    /// Adds a delta, keeping no more than fits under `cap` bytes in all (the count still
    /// grows by the whole delta, so the caller sees the cap passed).
    fn add(&mut self, emit: &mut Emitter, kind: Kind, text: &str, cap: usize) {
        let room = cap.saturating_sub(self.bytes);
        self.bytes = self.bytes.saturating_add(text.len());
        let text = if text.len() > room { &text[..floor_char_boundary(text, room)] } else { text };
        if text.is_empty() {
            return;
        }
        if self.kind != Some(kind) {
            self.stage_delta(emit);
            if kind == Kind::Text {
                self.close_reasoning(emit);
            }
        }
        if kind == Kind::Reasoning {
            self.reasoning_open = true;
            self.out.reasoning.get_or_insert_with(Reasoning::default).text.push_str(text);
        } else {
            self.out.text.push_str(text);
        }
        self.kind = Some(kind);
        self.delta.push_str(text);
        self.since.get_or_insert_with(Instant::now);
    }

    /// Turns the unstaged delta into an event.
    fn stage_delta(&mut self, emit: &mut Emitter) {
        if self.delta.is_empty() {
            return;
        }
        let delta = TextDelta { delta: std::mem::take(&mut self.delta) };
        emit.push(match self.kind {
            Some(Kind::Reasoning) => EventData::ReasoningAppended(delta),
            _ => EventData::MessageAppended(delta),
        });
        self.since = None;
    }

    fn close_reasoning(&mut self, emit: &mut Emitter) {
        if self.reasoning_open {
            self.reasoning_open = false;
            let text = self.out.reasoning.as_ref().map(|r| r.text.clone()).unwrap_or_default();
            emit.push(EventData::ReasoningCompleted(TextCompleted { text }));
        }
    }

    /// Takes one model event into the output.
    fn on_event(&mut self, emit: &mut Emitter, event: ModelEvent, cap: OutputCap) {
        match event {
            ModelEvent::TextDelta { text } => self.add(emit, Kind::Text, &text, cap.bytes),
            ModelEvent::ReasoningDelta { text } => self.add(emit, Kind::Reasoning, &text, cap.bytes),
            ModelEvent::ReasoningSignature { signature } => {
                self.out.reasoning.get_or_insert_with(Reasoning::default).signature = Some(signature);
            }
            ModelEvent::ToolCall { call } => {
                self.stage_delta(emit);
                self.kind = None;
                self.bytes += call.arguments.len() + call.name.len();
                self.out.tool_calls.push(call);
            }
            ModelEvent::Usage { usage } => self.out.usage = usage,
            ModelEvent::Finish { reason } => self.out.finish = Some(reason),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.since.map(|since| since + FLUSH_AFTER)
    }

    /// Stages whatever is pending (deltas, the open reasoning block) at the end of a step.
    fn finish(&mut self, emit: &mut Emitter, complete_text: bool) {
        self.stage_delta(emit);
        self.close_reasoning(emit);
        if complete_text && !self.out.text.is_empty() {
            emit.push(EventData::MessageCompleted(TextCompleted { text: self.out.text.clone() }));
        }
    }
}

/// Drives one model stream to its end. Mid-step deltas are handed to the log without waiting
/// for each to be durable (one append in flight, see [`Emitter::start`]); everything handed over
/// is durable before this returns. What is left staged is for the caller to flush together with
/// what it adds (`step.completed`, `turn.failed`, ...). `Err` is a storage failure.
pub(crate) async fn assemble(
    emit: &mut Emitter,
    mut stream: ModelStream,
    cancel: &CancellationToken,
    cap: OutputCap,
) -> bdk_store::Result<(StepOutput, StepEnd)> {
    let mut asm = Assembler::default();
    // Events staged before the step (`turn.started`, `step.started`) wait like a delta: a model
    // that answers at once shares their commit with its output; a slow one shows them after
    // `FLUSH_AFTER`.
    if emit.has_staged() {
        asm.since = Some(Instant::now());
    }
    let end = loop {
        let deadline = asm.deadline();
        let busy = emit.is_busy();
        tokio::select! {
            biased;
            () = cancel.cancelled() => break StepEnd::Cancelled,
            result = emit.settle(), if busy => result?,
            () = sleep_until(deadline), if deadline.is_some() && !busy => {
                asm.stage_delta(emit);
                asm.since = None;
                emit.start();
            }
            item = stream.next() => match item {
                None => break StepEnd::Finished,
                Some(Ok(event)) if asm.out.first_output.is_none() => {
                    asm.out.first_output = Some(std::time::Instant::now());
                    asm.on_event(emit, event, cap);
                }
                Some(Ok(event)) => asm.on_event(emit, event, cap),
                Some(Err(ModelError::Cancelled)) => break StepEnd::Cancelled,
                Some(Err(error)) => break StepEnd::Failed(error),
            },
        }
        if let Some(message) = cap.exceeded(&asm.out, asm.bytes) {
            break StepEnd::TooLarge(message);
        }
        // While an append is in flight the delta keeps growing; it goes out, as one event, once
        // the log has acknowledged the previous one.
        if asm.delta.len() >= FLUSH_BYTES && !emit.is_busy() {
            asm.stage_delta(emit);
            emit.start();
        }
    };
    // The step's deltas are durable before the turn goes on (or ends).
    emit.settle().await?;
    asm.finish(emit, matches!(end, StepEnd::Finished));
    Ok((asm.out, end))
}

/// The largest index `<= at` on a char boundary of `text`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
