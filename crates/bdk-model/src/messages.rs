//! [`Messages`]: a conversation's messages as a shared, append-only list, so that each step of
//! a turn (and each retry of a model call) sends the conversation without copying it.
//!
//! The list is a chain of segments, newest last. A clone shares every segment (O(1)); a push
//! goes into the newest segment when nobody else holds it, else into a new segment that points
//! at the shared ones. What one holder appends is never seen by another. Reading it in order
//! walks the chain once. It owns no wire format: providers read it as a sequence, and may keep
//! each message's encoding beside it ([`Messages::encoded`]).

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::types::Message;

/// The messages of one model call, oldest first. Cheap to clone; see the module docs.
#[derive(Clone, Default)]
pub struct Messages {
    tail: Option<Arc<Segment>>,
}

/// One run of messages in a [`Messages`] chain (opaque; named by its iterator type).
#[derive(Debug)]
pub struct Segment {
    /// The segments before this one.
    before: Option<Arc<Segment>>,
    /// How many messages the segments before hold.
    offset: usize,
    items: Vec<Message>,
    /// Each item's wire encoding, once a provider has sent it (as long as `items`).
    wire: Vec<OnceLock<Kept>>,
}

impl Segment {
    fn new(before: Option<Arc<Segment>>, offset: usize, items: Vec<Message>) -> Segment {
        let wire = items.iter().map(|_| OnceLock::new()).collect();
        Segment { before, offset, items, wire }
    }
}

/// How a provider writes a message on the wire, for [`Messages::encoded`].
#[derive(Debug)]
pub struct WireFormat {
    /// Tells one provider's encoding from another's.
    pub name: &'static str,
    /// The message's parts, one JSON value each (the whole message, or its content blocks);
    /// `None` when it cannot be encoded (the provider then writes it itself).
    pub encode: fn(&Message) -> Option<Vec<Box<RawValue>>>,
}

/// A message's parts in one [`WireFormat`].
#[derive(Debug)]
struct Kept {
    format: &'static str,
    parts: Option<Box<[Box<RawValue>]>>,
}

impl Messages {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.tail.as_ref().map_or(0, |t| t.offset + t.items.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends a message. Copies nothing: the newest segment grows when this list is its only
    /// holder, else a new segment starts after the shared ones.
    pub fn push(&mut self, message: Message) {
        if let Some(tail) = self.tail.as_mut().and_then(Arc::get_mut) {
            tail.items.push(message);
            tail.wire.push(OnceLock::new());
            return;
        }
        let offset = self.len();
        self.tail = Some(Arc::new(Segment::new(self.tail.take(), offset, vec![message])));
    }

    /// Keeps the first `len` messages. Drops whole segments; only a segment cut in the middle
    /// is copied (up to the cut).
    pub fn truncate(&mut self, len: usize) {
        while let Some(tail) = &self.tail {
            if tail.offset + tail.items.len() <= len {
                return;
            }
            if tail.offset >= len {
                self.tail = tail.before.clone();
                continue;
            }
            let keep = len - tail.offset;
            let copy = Arc::strong_count(tail) > 1;
            if copy {
                let items = tail.items[..keep].to_vec();
                self.tail = Some(Arc::new(Segment::new(tail.before.clone(), tail.offset, items)));
            } else if let Some(owned) = self.tail.as_mut().and_then(Arc::get_mut) {
                owned.items.truncate(keep);
                owned.wire.truncate(keep);
            }
            return;
        }
    }

    /// The message at `index`, oldest first.
    pub fn get(&self, index: usize) -> Option<&Message> {
        let mut segment = self.tail.as_deref();
        while let Some(s) = segment {
            if index >= s.offset {
                return s.items.get(index - s.offset);
            }
            segment = s.before.as_deref();
        }
        None
    }

    pub fn last(&self) -> Option<&Message> {
        self.tail.as_deref().and_then(|t| t.items.last())
    }

    /// The messages, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> + Clone + '_ {
        self.into_iter()
    }

    /// Each message with its parts in `format`, oldest first. A message is encoded the first
    /// time it is sent in a format and the parts are kept with it, so each step of a
    /// conversation encodes only the messages added since the step before (the bytes are still
    /// copied into every request; the escaping is what they cost). The parts are `None` when
    /// the message is kept in another format, or could not be encoded: the caller writes it.
    pub fn encoded<'a>(
        &'a self,
        format: &'a WireFormat,
    ) -> impl Iterator<Item = (&'a Message, Option<&'a [Box<RawValue>]>)> + 'a {
        self.segments().into_iter().flat_map(move |segment| {
            segment.items.iter().zip(&segment.wire).map(move |(message, slot)| {
                let kept =
                    slot.get_or_init(|| Kept { format: format.name, parts: (format.encode)(message).map(Into::into) });
                (message, kept.parts.as_deref().filter(|_| kept.format == format.name))
            })
        })
    }

    /// A copy as a plain vector.
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Whether `self` is `earlier` plus messages pushed since, sharing every message of
    /// `earlier` (rather than a copy of them): what a request of a later step is to an earlier
    /// step's.
    pub fn extends(&self, earlier: &Messages) -> bool {
        let Some(target) = &earlier.tail else { return true };
        let end = earlier.len();
        let mut segment = self.tail.as_ref();
        while let Some(s) = segment {
            if Arc::ptr_eq(s, target) {
                // Shared; and nobody appended into it in between (a shared segment never grows).
                return s.offset + s.items.len() == end;
            }
            segment = s.before.as_ref();
        }
        false
    }

    /// The segments, oldest first.
    fn segments(&self) -> Vec<&Segment> {
        let mut segments = Vec::new();
        let mut segment = self.tail.as_deref();
        while let Some(s) = segment {
            segments.push(s);
            segment = s.before.as_deref();
        }
        segments.reverse();
        segments
    }
}

impl Drop for Messages {
    /// Unlinks the chain one segment at a time: the derived drop would recurse once per
    /// segment, and a long conversation has many.
    fn drop(&mut self) {
        let mut next = self.tail.take();
        while let Some(segment) = next {
            next = match Arc::try_unwrap(segment) {
                Ok(mut owned) => owned.before.take(),
                Err(_) => None,
            };
        }
    }
}

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<const N: usize> PartialEq<[Message; N]> for Messages {
    fn eq(&self, other: &[Message; N]) -> bool {
        self == other.as_slice()
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self == other.as_slice()
    }
}

impl std::ops::Index<usize> for Messages {
    type Output = Message;

    fn index(&self, index: usize) -> &Message {
        match self.get(index) {
            Some(message) => message,
            None => panic!("message index {index} out of range for {} messages", self.len()),
        }
    }
}

impl From<Vec<Message>> for Messages {
    fn from(items: Vec<Message>) -> Self {
        if items.is_empty() {
            return Self::default();
        }
        Self { tail: Some(Arc::new(Segment::new(None, 0, items))) }
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        for message in iter {
            self.push(message);
        }
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::iter::FlatMap<
        std::vec::IntoIter<&'a Segment>,
        std::slice::Iter<'a, Message>,
        fn(&'a Segment) -> std::slice::Iter<'a, Message>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        fn items(segment: &Segment) -> std::slice::Iter<'_, Message> {
            segment.items.iter()
        }
        self.segments().into_iter().flat_map(items as fn(&'a Segment) -> std::slice::Iter<'a, Message>)
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(messages: &Messages) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                Message::User { content } => content.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn clones_share_and_pushes_stay_apart() {
        let mut a: Messages = vec![Message::user("1"), Message::user("2")].into();
        let b = a.clone();
        a.push(Message::user("3"));
        let mut c = b.clone();
        c.push(Message::user("x"));
        assert_eq!(texts(&a), ["1", "2", "3"]);
        assert_eq!(texts(&b), ["1", "2"]);
        assert_eq!(texts(&c), ["1", "2", "x"]);
        assert!(a.extends(&b) && c.extends(&b));
        assert!(!a.extends(&c) && !b.extends(&a));
        assert_eq!(a[2], Message::user("3"));
        assert_eq!(a.get(3), None);
        assert_eq!(a.last(), Some(&Message::user("3")));
        assert_eq!(a.iter().next_back(), Some(&Message::user("3")));
    }

    #[test]
    fn an_unshared_list_grows_in_place() {
        let mut a = Messages::new();
        a.push(Message::user("1"));
        let before = a.clone();
        drop(before);
        a.push(Message::user("2"));
        assert_eq!(a.segments().len(), 1, "no new segment while nobody shares the list");
        let shared = a.clone();
        a.push(Message::user("3"));
        assert_eq!(a.segments().len(), 2);
        assert!(a.extends(&shared));
    }

    #[test]
    fn truncation_keeps_a_prefix_and_leaves_other_holders_alone() {
        let mut a: Messages = vec![Message::user("1"), Message::user("2")].into();
        let b = a.clone();
        a.extend([Message::user("3"), Message::user("4")]);
        let full = a.clone();
        a.truncate(3);
        assert_eq!(texts(&a), ["1", "2", "3"]);
        a.truncate(1);
        assert_eq!(texts(&a), ["1"]);
        a.truncate(5);
        assert_eq!(texts(&a), ["1"]);
        assert_eq!(texts(&b), ["1", "2"]);
        assert_eq!(texts(&full), ["1", "2", "3", "4"]);
    }

    #[test]
    fn a_long_chain_drops_without_recursing() {
        let mut a = Messages::new();
        for i in 0..200_000 {
            // Shared at each push: one segment per message.
            let shared = a.clone();
            a.push(Message::user(i.to_string()));
            drop(shared);
        }
        assert_eq!(a.segments().len(), 200_000);
        assert_eq!(a.len(), 200_000);
        drop(a);
    }

    #[test]
    fn serializes_as_a_plain_list() {
        let mut a: Messages = vec![Message::user("1")].into();
        let _shared = a.clone();
        a.push(Message::assistant("2"));
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, serde_json::to_string(&a.to_vec()).unwrap());
        let back: Messages = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
    }

    /// A test format that counts its encodings: a user message encodes as its text.
    static ENCODED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static COUNTED: WireFormat = WireFormat { name: "counted", encode: counted };
    static OTHER: WireFormat = WireFormat { name: "other", encode: counted };

    fn counted(message: &Message) -> Option<Vec<Box<RawValue>>> {
        ENCODED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let Message::User { content } = message else { return None };
        Some(vec![serde_json::value::to_raw_value(content).ok()?])
    }

    fn wire(messages: &Messages, format: &WireFormat) -> Vec<Option<String>> {
        messages.encoded(format).map(|(_, parts)| parts.map(|parts| parts[0].get().to_owned())).collect()
    }

    fn encodings() -> usize {
        ENCODED.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn each_message_is_encoded_once_however_often_it_is_sent() {
        let quoted = |text: &str| Some(format!("{text:?}"));
        let mut first = Messages::from(vec![Message::user("a"), Message::user("b")]);
        let start = encodings();
        assert_eq!(wire(&first, &COUNTED), [quoted("a"), quoted("b")]);
        assert_eq!(encodings() - start, 2);
        // Sent again, and by a clone that grew: only the new message is encoded.
        let mut second = first.clone();
        second.push(Message::user("c"));
        assert_eq!(wire(&first, &COUNTED), [quoted("a"), quoted("b")]);
        assert_eq!(wire(&second, &COUNTED), [quoted("a"), quoted("b"), quoted("c")]);
        assert_eq!(encodings() - start, 3);
        // A message that cannot be encoded is written by the caller, and not tried again.
        second.push(Message::assistant("d"));
        assert_eq!(wire(&second, &COUNTED)[3], None);
        assert_eq!(wire(&second, &COUNTED)[3], None);
        assert_eq!(encodings() - start, 4);
        // Kept in one format, a message is the caller's to write in another.
        assert_eq!(wire(&first, &OTHER), [None, None]);
        // A cut list grows with fresh slots: the new message is not read as the one cut.
        drop(second);
        first.truncate(1);
        first.push(Message::user("e"));
        assert_eq!(wire(&first, &COUNTED), [quoted("a"), quoted("e")]);
        let mut shared = first.clone();
        shared.truncate(1);
        shared.push(Message::user("f"));
        assert_eq!(wire(&shared, &COUNTED), [quoted("a"), quoted("f")]);
        assert_eq!(wire(&first, &COUNTED), [quoted("a"), quoted("e")]);
    }
}
