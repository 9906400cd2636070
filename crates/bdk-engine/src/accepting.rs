//! A turn that starts while the message starting it is still being written, so that its model
//! call overlaps the message's durable commit instead of following it (on a text turn, one of
//! the two commits on its path).
//!
//! The actor folds the message into the conversation ahead of the log ([`fold_ahead`]),
//! numbered as the log will number it when nothing else is written first, starts the turn, and
//! only then writes the message; it answers the request once the write is durable, as before.
//! The turn may build its request and call the model meanwhile, but writes nothing and acts on
//! nothing the model says until the write is answered ([`Accepting`]):
//! - written where the fold put it (the common case): the turn goes on;
//! - written after something the fold does not hold (another writer got in first): the turn
//!   drops what the model said so far and starts again on a fold read from the log;
//! - not written: the turn ends without a trace, and the actor drops it.
//!
//! What the model said before the answer is kept and handed on in order
//! ([`Accepting::wait_streaming`]), so a fast model costs the turn nothing.

use std::sync::Arc;

use bdk_model::ModelStream;
use bdk_protocol::{Event, SessionId};
use bdk_store::{NewEvent, SharedEvent};
use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use tokio::sync::oneshot;

use crate::conversation::Conversation;

/// The actor's end: [`Acceptor::accept`] with what the log wrote; dropped unanswered, the
/// message was not written.
#[derive(Debug)]
pub(crate) struct Acceptor(oneshot::Sender<Vec<SharedEvent>>);

impl Acceptor {
    pub fn accept(self, written: Vec<SharedEvent>) {
        let _ = self.0.send(written);
    }
}

/// The turn's end: where the fold put the message, and the answer to come.
#[derive(Debug)]
pub(crate) struct Accepting {
    written: oneshot::Receiver<Vec<SharedEvent>>,
    /// The index the fold gave the message's first event, and its number of events.
    first: u64,
    count: usize,
}

/// How the message was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// Where the fold put it: the fold is the log's.
    AsFolded,
    /// After events the fold does not hold: the fold must be read afresh from the log.
    Elsewhere,
}

/// Folds `events`, about to be appended to `session`'s log, into `conversation` with the
/// indices the log will give them if nothing else is written first (from the fold's next
/// index), which leaves the fold current for the turn they start.
pub(crate) fn fold_ahead(
    conversation: &mut Conversation,
    session: &SessionId,
    events: &[NewEvent],
) -> (Accepting, Acceptor) {
    let first = conversation.next_index();
    let ahead = numbered(first, session, events);
    conversation.fold_own(&ahead);
    let (tx, rx) = oneshot::channel();
    (Accepting { written: rx, first, count: events.len() }, Acceptor(tx))
}

impl Accepting {
    /// Waits for the answer; `None`: the message was not written.
    pub async fn wait(self) -> Option<Accepted> {
        let (first, count) = (self.first, self.count);
        self.written.await.ok().map(|written| judge(first, count, &written))
    }

    /// Waits for the answer while the model answers: what `model` sends meanwhile is kept, and
    /// comes first from the stream handed back.
    pub async fn wait_streaming(self, mut model: ModelStream) -> (Option<Accepted>, ModelStream) {
        let (first, count, mut written) = (self.first, self.count, self.written);
        let mut early = Vec::new();
        let mut ended = false;
        let answer = loop {
            tokio::select! {
                biased;
                answer = &mut written => break answer.ok(),
                item = model.next(), if !ended => match item {
                    Some(item) => early.push(item),
                    None => ended = true,
                },
            }
        };
        let model: ModelStream = match (early.is_empty(), ended) {
            (true, false) => model,
            (_, true) => Box::pin(stream::iter(early)),
            (false, false) => Box::pin(stream::iter(early).chain(model)),
        };
        (answer.map(|written| judge(first, count, &written)), model)
    }
}

/// `events` as a log numbers them from `first` (their time is not known yet, nor needed by a fold).
fn numbered(first: u64, session: &SessionId, events: &[NewEvent]) -> Vec<SharedEvent> {
    (first..)
        .zip(events)
        .map(|(index, event)| {
            Arc::new(Event {
                index,
                session_id: session.clone(),
                turn_id: event.turn_id.clone(),
                at: DateTime::<Utc>::UNIX_EPOCH,
                data: event.data.clone(),
            })
        })
        .collect()
}

fn judge(first: u64, count: usize, written: &[SharedEvent]) -> Accepted {
    match written.first() {
        Some(event) if event.index == first && written.len() == count => Accepted::AsFolded,
        _ => Accepted::Elsewhere,
    }
}

#[cfg(test)]
mod tests {
    use bdk_model::{ModelError, ModelEvent};
    use bdk_protocol::EventData;
    use bdk_protocol::event::MessageReceived;
    use tokio::sync::mpsc;

    use super::*;

    fn message(text: &str) -> NewEvent {
        NewEvent::new(EventData::MessageReceived(MessageReceived { text: text.into(), principal: None }))
    }

    /// A model stream fed through `tx`.
    fn fed() -> (mpsc::UnboundedSender<Result<ModelEvent, ModelError>>, ModelStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let model = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
        (tx, Box::pin(model))
    }

    fn text(text: &str) -> Result<ModelEvent, ModelError> {
        Ok(ModelEvent::TextDelta { text: text.into() })
    }

    #[tokio::test]
    async fn a_message_written_where_it_was_folded_is_accepted_as_folded() {
        let session = SessionId::generate();
        let mut fold = Conversation::default();
        let events = vec![message("hi")];
        let (accepting, acceptor) = fold_ahead(&mut fold, &session, &events);
        assert_eq!(fold.next_index(), 1);
        assert!(fold.take_current(), "the turn it starts need not read the log");
        acceptor.accept(numbered(0, &session, &events));
        assert_eq!(accepting.wait().await, Some(Accepted::AsFolded));
    }

    #[tokio::test]
    async fn a_message_written_after_someone_elses_event_is_accepted_elsewhere() {
        let session = SessionId::generate();
        let mut fold = Conversation::default();
        let events = vec![message("hi")];
        let (accepting, acceptor) = fold_ahead(&mut fold, &session, &events);
        acceptor.accept(numbered(1, &session, &events));
        assert_eq!(accepting.wait().await, Some(Accepted::Elsewhere));
    }

    #[tokio::test]
    async fn a_message_not_written_is_not_accepted() {
        let session = SessionId::generate();
        let (accepting, acceptor) = fold_ahead(&mut Conversation::default(), &session, &[message("hi")]);
        drop(acceptor);
        assert_eq!(accepting.wait().await, None);
    }

    #[tokio::test]
    async fn what_the_model_said_before_the_answer_comes_first_and_in_order() {
        let session = SessionId::generate();
        let events = vec![message("hi")];
        let (accepting, acceptor) = fold_ahead(&mut Conversation::default(), &session, &events);
        let (tx, model) = fed();
        tx.send(text("a")).unwrap();
        tx.send(text("b")).unwrap();
        let waiting = tokio::spawn(accepting.wait_streaming(model));
        tokio::task::yield_now().await;
        acceptor.accept(numbered(0, &session, &events));
        let (accepted, mut model) = waiting.await.unwrap();
        assert_eq!(accepted, Some(Accepted::AsFolded));
        tx.send(text("c")).unwrap();
        drop(tx);
        let mut said = Vec::new();
        while let Some(Ok(ModelEvent::TextDelta { text })) = model.next().await {
            said.push(text);
        }
        assert_eq!(said, ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn a_model_that_finished_before_the_answer_hands_back_all_it_said() {
        let session = SessionId::generate();
        let events = vec![message("hi")];
        let (accepting, acceptor) = fold_ahead(&mut Conversation::default(), &session, &events);
        let model: ModelStream = Box::pin(stream::iter(vec![text("done")]));
        let waiting = tokio::spawn(accepting.wait_streaming(model));
        tokio::task::yield_now().await;
        acceptor.accept(numbered(0, &session, &events));
        let (_, model) = waiting.await.unwrap();
        let said: Vec<_> = model.collect().await;
        assert_eq!(said.len(), 1);
    }
}
