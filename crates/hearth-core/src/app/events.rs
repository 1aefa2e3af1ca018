//! What the app tells its window while work happens. The shell turns these into typed UI events.

use crate::runtime::RuntimeEvent;
use crate::store::Message;

/// One change to one conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ConversationEvent {
    pub conversation_id: String,
    pub kind: ConversationEventKind,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ConversationEventKind {
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
pub trait AppEvents: Send + Sync {
    fn conversation(&self, event: ConversationEvent);
}

/// Drops every event (headless use).
pub struct NoEvents;

impl AppEvents for NoEvents {
    fn conversation(&self, _: ConversationEvent) {}
}
