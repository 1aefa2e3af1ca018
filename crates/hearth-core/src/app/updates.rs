//! What the app tells its window while work happens. The shell turns these into typed UI events.

use crate::runtime::RuntimeEvent;
use crate::store::Message;

/// One change to one conversation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ConversationUpdate {
    pub conversation_id: String,
    pub kind: ConversationUpdateKind,
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
