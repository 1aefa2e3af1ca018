//! What the app tells its window while work happens. The shell turns these into typed UI events.
//!
//! Updates are numbered, and a view opens a conversation from a [`ConversationSnapshot`] that says
//! which update it already contains: a view opened while a reply streams applies exactly the
//! updates after its snapshot, so no streamed text is missing or doubled (a text delta is not
//! idempotent: applied twice, it shows twice).

use std::sync::{Arc, Mutex};

use crate::runtime::RuntimeEvent;
use crate::store::Message;

/// One change to one conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ConversationUpdate {
    pub conversation_id: String,
    /// Increases by one with every update the app sends, over all conversations.
    pub seq: u64,
    pub kind: ConversationUpdateKind,
}

/// A conversation as a view opens it: its stored messages, and the last update they contain.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ConversationSnapshot {
    pub messages: Vec<Message>,
    /// Updates up to this `seq` are in `messages`; every later one is not.
    pub update_seq: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ConversationUpdateKind {
    /// A message was stored or changed as a whole (the user's message before sending; the reply).
    #[serde(rename_all = "camelCase")]
    MessageStored { message: Message },
    /// A streamed runtime event of the reply `message_id`.
    #[serde(rename_all = "camelCase")]
    Runtime { message_id: String, event: RuntimeEvent },
    /// The turn ended; `message` is the reply as stored.
    #[serde(rename_all = "camelCase")]
    TurnFinished { message: Message },
}

/// Where the app sends events: the Tauri shell in the app, a recorder in tests, nothing in the CLI.
pub trait UpdateSink: Send + Sync {
    fn conversation(&self, event: ConversationUpdate);
}

/// Drops every event (headless use).
pub struct NoUpdates;

impl UpdateSink for NoUpdates {
    fn conversation(&self, _: ConversationUpdate) {}
}

/// The app's side of the window's updates: numbers them, and keeps each store write and the update
/// that tells of it together, so that a snapshot falls before both or after both.
#[derive(Clone)]
pub(crate) struct Updates {
    sink: Arc<dyn UpdateSink>,
    /// The last `seq` sent. Held while a change is stored and sent, and while a snapshot is read.
    last_seq: Arc<Mutex<u64>>,
}

impl Updates {
    pub fn new(sink: Arc<dyn UpdateSink>) -> Self {
        Self { sink, last_seq: Arc::default() }
    }

    /// Make `change` (a store write) and send the update `kind_of` makes of its result, as one step.
    pub fn change_and_send<T>(&self, conversation_id: &str, change: impl FnOnce() -> T, kind_of: impl FnOnce(&T) -> ConversationUpdateKind) -> T {
        let mut last = self.last_seq.lock().unwrap();
        let result = change();
        *last += 1;
        self.sink.conversation(ConversationUpdate { conversation_id: conversation_id.into(), seq: *last, kind: kind_of(&result) });
        result
    }

    /// Send an update of a change already stored (one a snapshot may contain already: a whole
    /// message, which the view puts in place again however often it comes).
    pub fn send(&self, conversation_id: &str, kind: ConversationUpdateKind) {
        self.change_and_send(conversation_id, || (), |_| kind);
    }

    /// Read what `read` reads with the number of the last update it contains (blocking: run it
    /// where a store read may block).
    pub fn snapshot<T, E>(&self, read: impl FnOnce() -> Result<T, E>) -> Result<(T, u64), E> {
        let last = self.last_seq.lock().unwrap();
        Ok((read()?, *last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<ConversationUpdate>>);

    impl UpdateSink for Recorded {
        fn conversation(&self, event: ConversationUpdate) {
            self.0.lock().unwrap().push(event);
        }
    }

    fn delta(text: &str) -> ConversationUpdateKind {
        ConversationUpdateKind::Runtime { message_id: "m".into(), event: RuntimeEvent::TextDelta { text: text.into() } }
    }

    #[test]
    fn a_snapshot_taken_while_changes_stream_contains_exactly_the_updates_up_to_its_seq() {
        let sink = Arc::new(Recorded::default());
        let updates = Updates::new(sink.clone());
        let stored = Arc::new(Mutex::new(String::new()));
        let writer = {
            let (updates, stored) = (updates.clone(), stored.clone());
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    let piece = format!("{i},");
                    updates.change_and_send("c", || stored.lock().unwrap().push_str(&piece), |_| delta(&piece));
                }
            })
        };
        let mut snapshots = Vec::new();
        loop {
            let finished = writer.is_finished();
            snapshots.push(updates.snapshot(|| Ok::<_, ()>(stored.lock().unwrap().clone())).unwrap());
            if finished {
                break;
            }
        }
        writer.join().unwrap();
        let sent = sink.0.lock().unwrap().clone();
        let text_after = |seq: u64| -> String {
            sent.iter()
                .filter(|u| u.seq > seq)
                .map(|u| match &u.kind {
                    ConversationUpdateKind::Runtime { event: RuntimeEvent::TextDelta { text }, .. } => text.as_str(),
                    _ => "",
                })
                .collect()
        };
        assert!(sent.windows(2).all(|w| w[1].seq == w[0].seq + 1), "numbered one by one");
        for (text, seq) in snapshots {
            assert_eq!(format!("{text}{}", text_after(seq)), text_after(0), "the snapshot at {seq} plus the later updates is the whole text");
        }
    }
}
