//! The reply text is stored once. A step's text reaches the log as `message.appended` deltas;
//! `message.completed` (the step's whole text), `reasoning.completed` (the step's reasoning so
//! far), `turn.completed.result` and `session.completed.result` repeat it. This layer, under
//! every other wrapper of the engine's event log, writes those four as references instead and
//! expands them again on `read`, `follow` and in what `append` returns, so everyone above it
//! (actors, routes, hooks, recovery, evals) sees the events exactly as before.
//!
//! The stored form uses its own event types, which no reader outside this layer knows (they
//! read as [`EventData::Other`]); see `docs/formats.md`:
//! - `stored.message.completed` / `stored.reasoning.completed`: `{"from": i}` or `{"back": k}`.
//!   The text is the concatenation of the `message.appended` (`reasoning.appended`) deltas of
//!   the same turn with an index from `i` (or this event's index minus `k`) up to this event.
//! - `stored.turn.completed`: the `turn.completed` data without `result`, plus `"resultAt": i`
//!   or `"resultBack": k`: the result is the text of the `message.completed` at that index.
//! - `stored.session.completed`: `{"resultAt": i}` or `{"resultBack": k}`, likewise.
//!
//! `back` counts within one append (whose events are contiguous), `from`/`resultAt` name an
//! event of an earlier append by its index. An event is written as a reference only when its
//! text is, byte for byte, the text the reference gives (compared by length and SHA-256 of
//! what this layer saw appended); anything else (a turn recovered mid-step, a failed append
//! before it) is written inline as before. Logs written before this layer read unchanged.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bdk_protocol::event::{SessionCompleted, TextCompleted, TurnCompleted};
use bdk_protocol::{Event, EventData, SessionId, TurnId};
use bdk_store::{BoxFuture, EventFollower, EventLog, EventStream, LogLayer, NewEvent, SharedEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The stored form of `message.completed`.
pub const STORED_MESSAGE: &str = "stored.message.completed";
/// The stored form of `reasoning.completed`.
pub const STORED_REASONING: &str = "stored.reasoning.completed";
/// The stored form of `turn.completed`.
pub const STORED_TURN: &str = "stored.turn.completed";
/// The stored form of `session.completed`.
pub const STORED_SESSION: &str = "stored.session.completed";

/// Expanded events kept per session, one copy shared by every reader (dropped when the
/// session's log is released).
const RECENT: usize = 8;

/// `log` with the reply text stored once (see the module docs).
pub fn layer(log: Arc<dyn EventLog>) -> Arc<dyn EventLog> {
    Arc::new(StoredText { shared: Arc::new(Shared { inner: log, tracks: Mutex::default(), recent: Mutex::default() }) })
}

/// Expands the stored form in `events`, a whole log read without this layer (a file given to
/// `bdk trajectory`, say): references to events not in `events` are left as they are.
pub fn expand_log(events: Vec<Event>) -> Vec<Event> {
    // A saved stream may hold several sessions (a trace with subagents): index by both.
    let mut at: HashMap<(SessionId, u64), usize> = HashMap::new();
    let mut out: Vec<Event> = Vec::with_capacity(events.len());
    for event in events {
        let expanded = match Stored::of(&event) {
            Some(stored) => {
                let session = event.session_id.clone();
                let get = |index: u64| at.get(&(session.clone(), index)).and_then(|&i| out.get(i));
                stored.expand_from(&event, &get).unwrap_or(event)
            }
            None => event,
        };
        at.insert((expanded.session_id.clone(), expanded.index), out.len());
        out.push(expanded);
    }
    out
}

#[derive(Debug)]
struct StoredText {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    inner: Arc<dyn EventLog>,
    /// What each session's appends so far make of the open steps.
    tracks: Mutex<HashMap<SessionId, Arc<Mutex<Track>>>>,
    /// The latest expanded events of each session, shared by every reader.
    recent: Mutex<HashMap<SessionId, VecDeque<SharedEvent>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where an event is: an index in the log, or a position in an append not yet acknowledged
/// (its batch number and its place in it).
#[derive(Debug, Clone, Copy)]
enum Pos {
    At(u64),
    Batch(u64, usize),
}

impl Pos {
    /// The reference fields naming this position from position `here` of batch `batch`; `None`
    /// for a position in another append still in flight (its index is not known yet).
    fn name(self, batch: u64, here: usize, at: &str, back: &str) -> Option<(String, u64)> {
        match self {
            Pos::At(index) => Some((at.to_owned(), index)),
            Pos::Batch(b, k) if b == batch => Some((back.to_owned(), (here - k) as u64)),
            Pos::Batch(..) => None,
        }
    }
}

/// A text's length and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    len: usize,
    digest: [u8; 32],
}

impl Fingerprint {
    fn of(text: &str) -> Self {
        Fingerprint { len: text.len(), digest: Sha256::digest(text.as_bytes()).into() }
    }
}

/// The deltas of one kind since a step began (`message.appended`, or `reasoning.appended`).
#[derive(Debug, Clone)]
struct Run {
    from: Pos,
    len: usize,
    hasher: Sha256,
    /// The appends that added to it.
    batches: Vec<u64>,
}

impl Run {
    fn push(run: &mut Option<Run>, at: Pos, text: &str) {
        let run = run.get_or_insert_with(|| Run { from: at, len: 0, hasher: Sha256::new(), batches: Vec::new() });
        run.len += text.len();
        run.hasher.update(text.as_bytes());
        if let Pos::Batch(batch, _) = at
            && run.batches.last() != Some(&batch)
        {
            run.batches.push(batch);
        }
    }

    fn fingerprint(&self) -> Fingerprint {
        Fingerprint { len: self.len, digest: self.hasher.clone().finalize().into() }
    }
}

#[derive(Debug, Default, Clone)]
struct Runs {
    text: Option<Run>,
    reasoning: Option<Run>,
}

/// One session's view of what it appended.
#[derive(Debug, Default)]
struct Track {
    /// The open step of each turn.
    turns: HashMap<TurnId, Runs>,
    /// The latest `message.completed` of the session, for results that repeat it.
    last_message: Option<(Pos, Fingerprint)>,
    /// The number the next append gets.
    next_batch: u64,
    /// Appends not yet acknowledged: a run they added to is not referred to (they may fail).
    pending: Vec<u64>,
}

impl Track {
    /// Turns the positions in batch `batch` into indices once the append has them.
    fn settle(&mut self, batch: u64, written: &[SharedEvent]) {
        self.pending.retain(|b| *b != batch);
        let fix = |pos: &mut Pos| {
            if let Pos::Batch(b, k) = *pos
                && b == batch
            {
                *pos = written.get(k).map_or(Pos::At(u64::MAX), |e| Pos::At(e.index));
            }
        };
        for runs in self.turns.values_mut() {
            for run in [&mut runs.text, &mut runs.reasoning].into_iter().flatten() {
                fix(&mut run.from);
            }
        }
        if let Some((pos, _)) = &mut self.last_message {
            fix(pos);
        }
    }

    /// The stored form of the `here`-th event of batch `batch`, or `None` to write it as it is.
    fn compact(&mut self, batch: u64, here: usize, event: &mut NewEvent) -> Option<EventData> {
        let pos = Pos::Batch(batch, here);
        let NewEvent { turn_id, data } = event;
        let turn = turn_id.as_ref();
        match data {
            EventData::StepStarted(_) => {
                if let Some(turn) = turn {
                    self.turns.insert(turn.clone(), Runs::default());
                }
                None
            }
            EventData::MessageAppended(delta) => {
                if let Some(turn) = turn {
                    Run::push(&mut self.turns.entry(turn.clone()).or_default().text, pos, &delta.delta);
                }
                None
            }
            EventData::ReasoningAppended(delta) => {
                if let Some(turn) = turn {
                    Run::push(&mut self.turns.entry(turn.clone()).or_default().reasoning, pos, &delta.delta);
                }
                None
            }
            EventData::MessageCompleted(done) => {
                let print = Fingerprint::of(&done.text);
                let run = turn.and_then(|t| self.turns.get_mut(t)).and_then(|r| r.text.take());
                self.last_message = Some((pos, print.clone()));
                let run = run.filter(|run| self.settled(run, batch) && run.fingerprint() == print)?;
                text_ref(STORED_MESSAGE, run.from, batch, here)
            }
            EventData::ReasoningCompleted(done) => {
                let run = turn.and_then(|t| self.turns.get(t)).and_then(|r| r.reasoning.as_ref())?;
                if !self.settled(run, batch) || run.fingerprint() != Fingerprint::of(&done.text) {
                    return None;
                }
                text_ref(STORED_REASONING, run.from, batch, here)
            }
            EventData::TurnFailed(_) => {
                if let Some(turn) = turn {
                    self.turns.remove(turn);
                }
                None
            }
            EventData::TurnCompleted(done) => {
                if let Some(turn) = turn {
                    self.turns.remove(turn);
                }
                let (name, index) = self.result_ref(done.result.as_deref(), batch, here)?;
                // The rest of the payload as it is, without the (possibly long) result.
                let result = done.result.take();
                let value = serde_json::to_value(&*done);
                done.result = result;
                let mut value = value.ok()?;
                value.as_object_mut()?.insert(name, index.into());
                Some(EventData::Other { event_type: STORED_TURN.into(), data: value })
            }
            EventData::SessionCompleted(done) => {
                let (name, index) = self.result_ref(done.result.as_deref(), batch, here)?;
                let value = Value::Object([(name, index.into())].into_iter().collect());
                Some(EventData::Other { event_type: STORED_SESSION.into(), data: value })
            }
            _ => None,
        }
    }

    /// Whether every append that added to `run` is acknowledged (or is `batch` itself).
    fn settled(&self, run: &Run, batch: u64) -> bool {
        run.batches.iter().all(|b| *b == batch || !self.pending.contains(b))
    }

    /// The reference to the latest `message.completed`, when `result` is its text.
    fn result_ref(&self, result: Option<&str>, batch: u64, here: usize) -> Option<(String, u64)> {
        let (pos, print) = self.last_message.as_ref()?;
        if Fingerprint::of(result?) != *print {
            return None;
        }
        pos.name(batch, here, "resultAt", "resultBack")
    }
}

fn text_ref(event_type: &str, from: Pos, batch: u64, here: usize) -> Option<EventData> {
    let (name, index) = from.name(batch, here, "from", "back")?;
    Some(EventData::Other {
        event_type: event_type.into(),
        data: Value::Object([(name, index.into())].into_iter().collect()),
    })
}

/// A reference's fields, as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Refs {
    from: Option<u64>,
    back: Option<u64>,
    result_at: Option<u64>,
    result_back: Option<u64>,
}

/// A stored-form event, decoded.
#[derive(Debug)]
enum Stored {
    /// Deltas from this index (`reasoning` or message) up to the event.
    Text { reasoning: bool, from: u64 },
    /// The text of the `message.completed` at this index.
    Result { message: u64, turn: Option<Box<TurnCompleted>> },
}

impl Stored {
    fn of(event: &Event) -> Option<Stored> {
        let EventData::Other { event_type, data } = &event.data else { return None };
        if ![STORED_MESSAGE, STORED_REASONING, STORED_TURN, STORED_SESSION].contains(&event_type.as_str()) {
            return None;
        }
        let refs: Refs = serde_json::from_value(data.clone()).ok()?;
        let at = |at: Option<u64>, back: Option<u64>| at.or_else(|| back.and_then(|k| event.index.checked_sub(k)));
        match event_type.as_str() {
            STORED_MESSAGE | STORED_REASONING => Some(Stored::Text {
                reasoning: event_type == STORED_REASONING,
                from: at(refs.from, refs.back).filter(|&i| i < event.index)?,
            }),
            STORED_TURN => Some(Stored::Result {
                message: at(refs.result_at, refs.result_back)?,
                turn: Some(Box::new(serde_json::from_value(data.clone()).ok()?)),
            }),
            STORED_SESSION => Some(Stored::Result { message: at(refs.result_at, refs.result_back)?, turn: None }),
            _ => None,
        }
    }

    /// The first index this event needs (deltas, or the message it repeats).
    fn needs_from(&self) -> u64 {
        match self {
            Stored::Text { from, .. } => *from,
            Stored::Result { message, .. } => *message,
        }
    }

    /// The event expanded, taking what it refers to from `get` (already expanded), or `None`
    /// when something it needs is missing.
    fn expand_from<'e>(self, event: &Event, get: &dyn Fn(u64) -> Option<&'e Event>) -> Option<Event> {
        let data = match self {
            Stored::Text { reasoning, from } => {
                let mut text = String::new();
                for index in from..event.index {
                    let delta = get(index)?;
                    if delta.turn_id != event.turn_id {
                        continue;
                    }
                    match (&delta.data, reasoning) {
                        (EventData::MessageAppended(d), false) | (EventData::ReasoningAppended(d), true) => {
                            text.push_str(&d.delta)
                        }
                        _ => {}
                    }
                }
                let done = TextCompleted { text };
                if reasoning { EventData::ReasoningCompleted(done) } else { EventData::MessageCompleted(done) }
            }
            Stored::Result { message, turn } => {
                let EventData::MessageCompleted(done) = &get(message)?.data else { return None };
                let result = Some(done.text.clone());
                match turn {
                    Some(turn) => EventData::TurnCompleted(TurnCompleted { result, ..*turn }),
                    None => EventData::SessionCompleted(SessionCompleted { result }),
                }
            }
        };
        Some(Event { data, ..event.clone() })
    }
}

fn dangling(session: &SessionId, event: &Event) -> bdk_store::Error {
    bdk_store::Error::Backend(format!(
        "session {session}: event {} ({}) refers to text the log does not hold",
        event.index,
        event.event_type()
    ))
}

impl Shared {
    fn cached(&self, session: &SessionId, index: u64) -> Option<SharedEvent> {
        lock(&self.recent).get(session)?.iter().find(|e| e.index == index).cloned()
    }

    /// `event` (expanded) as the one shared copy every reader of the session gets while the
    /// layer keeps it: an earlier copy of the same index if there is one.
    fn share(&self, session: &SessionId, event: Event) -> SharedEvent {
        let mut recent = lock(&self.recent);
        let kept = recent.entry(session.clone()).or_default();
        if let Some(earlier) = kept.iter().find(|e| e.index == event.index) {
            return earlier.clone();
        }
        if kept.len() == RECENT {
            kept.pop_front();
        }
        let event = Arc::new(event);
        kept.push_back(event.clone());
        event
    }

    /// `events` (contiguous, as read from the inner log) with the stored form expanded. What a
    /// reference needs from before the first event is read from the inner log (references
    /// point back, so one forward pass over that window and `events` expands everything).
    async fn expand(&self, session: &SessionId, events: Vec<Event>) -> bdk_store::Result<Vec<Event>> {
        let Some(base) = events.first().map(|e| e.index) else { return Ok(events) };
        if !events.iter().any(|e| Stored::of(e).is_some()) {
            return Ok(events);
        }
        // Raw events [lo, base), grown backwards until every reference lands inside.
        let mut lo = base;
        let mut before: Vec<Event> = Vec::new();
        // Messages a result refers to that the layer still holds expanded.
        let mut hits: HashMap<u64, SharedEvent> = HashMap::new();
        loop {
            let needed = before
                .iter()
                .chain(&events)
                .filter_map(Stored::of)
                .filter(|stored| match stored {
                    Stored::Result { message, .. } if *message < lo => match self.cached(session, *message) {
                        Some(hit) => {
                            hits.insert(*message, hit);
                            false
                        }
                        None => true,
                    },
                    _ => true,
                })
                .map(|stored| stored.needs_from())
                .min();
            let Some(needed) = needed.filter(|&n| n < lo) else { break };
            let mut read = self.inner.read(session, needed, Some((lo - needed) as usize)).await?;
            if read.first().map(|e| e.index) != Some(needed) || read.len() as u64 != lo - needed {
                return Err(bdk_store::Error::Backend(format!(
                    "session {session}: events {needed}..{lo} are missing, referred to by later events"
                )));
            }
            read.append(&mut before);
            before = read;
            lo = needed;
        }
        let keep = before.len();
        let mut out: Vec<Event> = Vec::with_capacity(keep + events.len());
        for event in before.into_iter().chain(events) {
            let Some(stored) = Stored::of(&event) else {
                out.push(event);
                continue;
            };
            let get = |index: u64| -> Option<&Event> {
                match index.checked_sub(lo) {
                    Some(offset) => out.get(offset as usize),
                    None => hits.get(&index).map(|hit| &**hit),
                }
            };
            let expanded = stored.expand_from(&event, &get).ok_or_else(|| dangling(session, &event))?;
            out.push(expanded);
        }
        Ok(out.split_off(keep))
    }
}

impl LogLayer for StoredText {
    fn inner(&self) -> &Arc<dyn EventLog> {
        &self.shared.inner
    }

    /// An append (with the session's record, when `record` is set), its repeated text stored
    /// once.
    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        mut events: Vec<NewEvent>,
        record: Option<bdk_store::SessionRecord>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            let shared = &self.shared;
            let track = lock(&shared.tracks).entry(session.clone()).or_default().clone();
            let mut originals: Vec<(usize, EventData)> = Vec::new();
            let batch = {
                let mut track = lock(&track);
                let batch = track.next_batch;
                track.next_batch += 1;
                track.pending.push(batch);
                for (here, event) in events.iter_mut().enumerate() {
                    if let Some(stored) = track.compact(batch, here, event) {
                        originals.push((here, std::mem::replace(&mut event.data, stored)));
                    }
                }
                batch
            };
            let mut written = match bdk_store::append_to(shared.inner.as_ref(), session, events, record).await {
                Ok(written) => written,
                Err(error) => {
                    // What the track hashed was not written: start over (what the session
                    // appends next is written inline until a step starts afresh).
                    let mut tracks = lock(&shared.tracks);
                    if tracks.get(session).is_some_and(|t| Arc::ptr_eq(t, &track)) {
                        tracks.remove(session);
                    }
                    return Err(error);
                }
            };
            lock(&track).settle(batch, &written);
            if originals.is_empty() {
                return Ok(written);
            }
            for (here, data) in originals {
                if let Some(slot) = written.get_mut(here) {
                    // The stored event's own payload is a small reference: cloning it is cheap.
                    *slot = shared.share(session, Event { data, ..(**slot).clone() });
                }
            }
            Ok(written)
        })
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<Event>>> {
        Box::pin(async move {
            let events = self.shared.inner.read(session, from, limit).await?;
            self.shared.expand(session, events).await
        })
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, bdk_store::Result<EventStream>> {
        Box::pin(async move {
            let inner = self.shared.inner.follow(session, from).await?;
            let shared = self.shared.clone();
            Ok(Box::new(Expanding { inner, shared, session: session.clone(), window: Vec::new() }) as EventStream)
        })
    }

    fn release(&self, session: &SessionId) {
        lock(&self.shared.tracks).remove(session);
        lock(&self.shared.recent).remove(session);
        self.shared.inner.release(session);
    }
}

/// A follower that expands the stored form: from the layer's shared copy when it has one, else
/// from the events this follower saw since the step began (held as the shared events the log
/// handed out, so followers add no copy of the text), else by reading back from the log.
#[derive(Debug)]
struct Expanding {
    inner: EventStream,
    shared: Arc<Shared>,
    session: SessionId,
    /// Contiguous events (expanded) since the current step began.
    window: Vec<SharedEvent>,
}

impl Expanding {
    async fn expanded(&mut self, event: SharedEvent) -> bdk_store::Result<SharedEvent> {
        let Some(stored) = Stored::of(&event) else { return Ok(event) };
        if let Some(cached) = self.shared.cached(&self.session, event.index) {
            return Ok(cached);
        }
        let lo = self.window.first().map_or(event.index, |e| e.index);
        if stored.needs_from() >= lo {
            let window = &self.window;
            let get = |index: u64| window.get(index.checked_sub(lo)? as usize).map(|e| &**e);
            if let Some(expanded) = stored.expand_from(&event, &get) {
                return Ok(self.shared.share(&self.session, expanded));
            }
        }
        let mut read = self.shared.expand(&self.session, vec![(*event).clone()]).await?;
        let expanded = read.pop().ok_or_else(|| dangling(&self.session, &event))?;
        Ok(self.shared.share(&self.session, expanded))
    }
}

impl EventFollower for Expanding {
    fn next(&mut self) -> BoxFuture<'_, Option<bdk_store::Result<SharedEvent>>> {
        Box::pin(async move {
            let event = match self.inner.next().await? {
                Ok(event) => event,
                Err(error) => return Some(Err(error)),
            };
            let event = match self.expanded(event).await {
                Ok(event) => event,
                Err(error) => return Some(Err(error)),
            };
            let contiguous = self.window.last().is_none_or(|last| last.index + 1 == event.index);
            match &event.data {
                // Nothing later refers to what came before these.
                EventData::StepStarted(_) => self.window = vec![event.clone()],
                EventData::SessionWaiting(_) | EventData::SessionCompleted(_) | EventData::SessionFailed(_) => {
                    self.window.clear()
                }
                _ if contiguous => self.window.push(event.clone()),
                _ => self.window = vec![event.clone()],
            }
            Some(Ok(event))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use bdk_protocol::event::{SessionMode, StepStarted, TextDelta};
    use bdk_store::{FsStore, SessionRecord, SessionStore};

    use super::*;

    /// A log whose appends fail while `failing` is set.
    #[derive(Debug)]
    struct Flaky {
        inner: Arc<dyn EventLog>,
        failing: AtomicBool,
    }

    impl LogLayer for Flaky {
        fn inner(&self) -> &Arc<dyn EventLog> {
            &self.inner
        }

        fn write<'a>(
            &'a self,
            session: &'a SessionId,
            events: Vec<NewEvent>,
            record: Option<SessionRecord>,
        ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
            if self.failing.load(Ordering::SeqCst) {
                let source = std::io::Error::from_raw_os_error(28);
                return Box::pin(async { Err(bdk_store::Error::Io { path: "/state".into(), source }) });
            }
            bdk_store::append_to(self.inner.as_ref(), session, events, record)
        }
    }

    fn delta(text: &str) -> EventData {
        EventData::MessageAppended(TextDelta { delta: text.into() })
    }

    #[tokio::test]
    async fn text_after_a_failed_append_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FsStore::open(dir.path()).unwrap());
        let session = SessionId::generate();
        fs.create(SessionRecord::new(session.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
        let flaky = Arc::new(Flaky { inner: fs.clone(), failing: AtomicBool::new(false) });
        let log = layer(flaky.clone());
        let turn = TurnId::generate();
        let new = |data: EventData| NewEvent::in_turn(turn.clone(), data);

        log.append(&session, vec![new(EventData::StepStarted(StepStarted { step: 0 })), new(delta("a"))])
            .await
            .unwrap();
        flaky.failing.store(true, Ordering::SeqCst);
        assert!(log.append(&session, vec![new(delta("b"))]).await.is_err());
        flaky.failing.store(false, Ordering::SeqCst);
        let done = EventData::MessageCompleted(TextCompleted { text: "ab".into() });
        let written = log.append(&session, vec![new(done.clone())]).await.unwrap();
        assert_eq!(written[0].data, done);

        // "b" never reached the log, so a reference would read back "a": it is written whole.
        let raw = fs.read(&session, 0, None).await.unwrap();
        assert_eq!(raw.last().unwrap().data, done);
        assert_eq!(log.read(&session, 0, None).await.unwrap().last().unwrap().data, done);

        // The next step is tracked afresh and stored as a reference again.
        let step = vec![new(EventData::StepStarted(StepStarted { step: 1 })), new(delta("c"))];
        log.append(&session, step).await.unwrap();
        let done = EventData::MessageCompleted(TextCompleted { text: "c".into() });
        log.append(&session, vec![new(done.clone())]).await.unwrap();
        let raw = fs.read(&session, 0, None).await.unwrap();
        assert_eq!(raw.last().unwrap().event_type(), STORED_MESSAGE);
        assert_eq!(log.read(&session, 0, None).await.unwrap().last().unwrap().data, done);
    }

    #[test]
    fn a_reference_is_not_made_to_deltas_of_an_append_still_in_flight() {
        let mut track = Track::default();
        let session = SessionId::generate();
        let turn = TurnId::generate();
        let new = |data: EventData| NewEvent::in_turn(turn.clone(), data);
        let written = |events: &[NewEvent], from: u64| -> Vec<SharedEvent> {
            let at = bdk_protocol::event::timestamp_now();
            let envelope = |(i, e): (usize, &NewEvent)| Event {
                index: from + i as u64,
                session_id: session.clone(),
                turn_id: e.turn_id.clone(),
                at,
                data: e.data.clone(),
            };
            events.iter().enumerate().map(envelope).map(Arc::new).collect()
        };
        // Batch 0 starts the run and is acknowledged.
        let mut first = vec![new(EventData::StepStarted(StepStarted { step: 0 })), new(delta("x"))];
        track.pending.push(0);
        for (here, event) in first.iter_mut().enumerate() {
            assert!(track.compact(0, here, event).is_none());
        }
        track.settle(0, &written(&first, 0));
        // Batch 1 adds to the run and is still in flight when batch 2 completes the text.
        track.pending.push(1);
        assert!(track.compact(1, 0, &mut new(delta("y"))).is_none());
        track.pending.push(2);
        let mut done = new(EventData::MessageCompleted(TextCompleted { text: "xy".into() }));
        assert!(track.compact(2, 0, &mut done).is_none(), "batch 1 may still fail");

        // Once every append that added to a run is acknowledged, the reference is made.
        let mut track = Track::default();
        track.pending.push(0);
        for (here, event) in first.iter_mut().enumerate() {
            track.compact(0, here, event);
        }
        track.settle(0, &written(&first, 0));
        track.pending.push(1);
        let mut done = new(EventData::MessageCompleted(TextCompleted { text: "x".into() }));
        let stored = track.compact(1, 0, &mut done).expect("a reference");
        assert_eq!(
            stored,
            EventData::Other { event_type: STORED_MESSAGE.into(), data: serde_json::json!({"from": 1}) }
        );
    }
}
