//! Messages of a conversation, with their tool calls and attachments (each in its own table), and
//! the user's side of a turn: a message is stored, status `pending`, before anything is sent.

use std::collections::HashMap;
use std::fmt;

use base64::Engine as _;
use rusqlite::{params, OptionalExtension, Row, Transaction};

use super::error::{StoreError, StoreResult};
use super::{new_id, now_ms, Store, MAX_ATTACHMENTS_PER_MESSAGE, MAX_MESSAGE_TEXT_BYTES, MAX_NAME_CHARS, MAX_THUMBNAIL_BYTES};
use crate::runtime::Usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum MessageRole {
    User,
    Assistant,
}

/// `pending → sending → streaming → done | error | cancelled`. A user message goes
/// `pending → sending → done` (sent) or `error` (could not be sent; it may go back to `pending` to retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum MessageStatus {
    Pending,
    Sending,
    Streaming,
    Done,
    Error,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ToolCallStatus {
    Running,
    Done,
    Error,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub call_id: String,
    pub tool: String,
    pub input: serde_json::Value,
    pub output: Option<String>,
    pub error: Option<String>,
    pub status: ToolCallStatus,
}

/// An attachment as the UI shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub bytes_len: u64,
    /// Where the (validated, downscaled) file is kept in the data folder.
    pub stored_path: String,
    /// `data:image/png;base64,…`, ready for an `<img src>`.
    pub thumbnail_data_url: Option<String>,
}

/// An attachment to store with a new user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttachment {
    pub name: String,
    pub media_type: String,
    pub bytes_len: u64,
    pub stored_path: String,
    /// A small PNG, at most [`MAX_THUMBNAIL_BYTES`].
    pub thumbnail_png: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub conversation_id: String,
    pub role: MessageRole,
    pub text: String,
    pub status: MessageStatus,
    /// Why the turn failed, as a sentence; set with status `error`.
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub tool_calls: Vec<ToolCall>,
    pub attachments: Vec<Attachment>,
    pub usage: Option<Usage>,
    /// What the reply's turn changed in the project's files (replies of finished turns only).
    pub changes: Option<super::turn_changes::TurnChanges>,
}

impl MessageRole {
    fn parse(text: &str) -> Self {
        if text == "user" { Self::User } else { Self::Assistant }
    }
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sending => "sending",
            Self::Streaming => "streaming",
            Self::Done => "done",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(text: &str) -> Self {
        match text {
            "pending" => Self::Pending,
            "sending" => Self::Sending,
            "streaming" => Self::Streaming,
            "done" => Self::Done,
            "cancelled" => Self::Cancelled,
            _ => Self::Error,
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(self, Self::Done | Self::Error | Self::Cancelled)
    }

    fn rank(self) -> u8 {
        match self {
            Self::Pending => 0,
            Self::Sending => 1,
            Self::Streaming => 2,
            Self::Done | Self::Error | Self::Cancelled => 3,
        }
    }

    /// Statuses only move forward (a late event cannot revive a cancelled reply); a message that
    /// failed may go back to `pending` to be sent again.
    pub fn can_become(self, next: Self) -> bool {
        self == next || self.rank() < next.rank() || (self == Self::Error && next == Self::Pending)
    }
}

impl fmt::Display for MessageStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ToolCallStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Done => "done",
            Self::Error => "error",
        }
    }
    fn parse(text: &str) -> Self {
        match text {
            "running" => Self::Running,
            "done" => Self::Done,
            _ => Self::Error,
        }
    }
}

pub(crate) const MESSAGE_COLUMNS: &str = "id, conversation_id, role, text, status, error, created_at, updated_at, \
     input_tokens, output_tokens, reasoning_tokens, cache_read_tokens";

pub(crate) fn message_from_row(row: &Row<'_>) -> rusqlite::Result<Message> {
    let tokens = |i| row.get::<_, Option<i64>>(i).map(|v| v.map(|n| n.max(0) as u64));
    let usage = match (tokens(8)?, tokens(9)?, tokens(10)?, tokens(11)?) {
        (None, None, None, None) => None,
        (i, o, r, c) => Some(Usage {
            input_tokens: i.unwrap_or(0),
            output_tokens: o.unwrap_or(0),
            reasoning_tokens: r.unwrap_or(0),
            cache_read_tokens: c.unwrap_or(0),
        }),
    };
    Ok(Message {
        id: row.get(0)?,
        conversation_id: row.get(1)?,
        role: MessageRole::parse(&row.get::<_, String>(2)?),
        text: row.get(3)?,
        status: MessageStatus::parse(&row.get::<_, String>(4)?),
        error: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        tool_calls: Vec::new(),
        attachments: Vec::new(),
        usage,
        changes: None,
    })
}

fn tool_call_from_row(row: &Row<'_>) -> rusqlite::Result<(String, ToolCall)> {
    let input: String = row.get(3)?;
    Ok((
        row.get(0)?,
        ToolCall {
            call_id: row.get(1)?,
            tool: row.get(2)?,
            input: serde_json::from_str(&input).unwrap_or(serde_json::Value::String(input)),
            output: row.get(4)?,
            error: row.get(5)?,
            status: ToolCallStatus::parse(&row.get::<_, String>(6)?),
        },
    ))
}

fn attachment_from_row(row: &Row<'_>) -> rusqlite::Result<(String, Attachment)> {
    let thumbnail: Option<Vec<u8>> = row.get(6)?;
    Ok((
        row.get(0)?,
        Attachment {
            id: row.get(1)?,
            name: row.get(2)?,
            media_type: row.get(3)?,
            bytes_len: row.get::<_, i64>(4)?.max(0) as u64,
            stored_path: row.get(5)?,
            thumbnail_data_url: thumbnail
                .map(|png| format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(png))),
        },
    ))
}

/// Fill in tool calls and attachments of `messages`, selected by `filter` (an SQL condition on `m`).
fn attach_children(tx: &rusqlite::Connection, messages: &mut [Message], filter: &str, arg: &str) -> rusqlite::Result<()> {
    let index: HashMap<String, usize> = messages.iter().enumerate().map(|(i, m)| (m.id.clone(), i)).collect();
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT t.message_id, t.call_id, t.tool, t.input, t.output, t.error, t.status
         FROM tool_calls t JOIN messages m ON m.id = t.message_id WHERE {filter} ORDER BY t.seq"
    ))?;
    for row in stmt.query_map([arg], tool_call_from_row)? {
        let (message_id, call) = row?;
        if let Some(&i) = index.get(&message_id) {
            messages[i].tool_calls.push(call);
        }
    }
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT a.message_id, a.id, a.name, a.media_type, a.bytes_len, a.stored_path, a.thumbnail_png
         FROM attachments a JOIN messages m ON m.id = a.message_id WHERE {filter} ORDER BY a.message_id, a.position"
    ))?;
    for row in stmt.query_map([arg], attachment_from_row)? {
        let (message_id, attachment) = row?;
        if let Some(&i) = index.get(&message_id) {
            messages[i].attachments.push(attachment);
        }
    }
    super::turn_changes::attach_turn_changes(tx, messages, filter, arg)
}

pub(crate) fn ensure_conversation(tx: &Transaction<'_>, conversation_id: &str) -> StoreResult<()> {
    let exists: bool =
        tx.query_row("SELECT EXISTS(SELECT 1 FROM conversations WHERE id = ?1)", [conversation_id], |r| r.get(0))?;
    if !exists {
        return Err(StoreError::NotFound { what: "conversation", id: conversation_id.to_owned() });
    }
    Ok(())
}

fn check_user_message(text: &str, attachments: &[NewAttachment]) -> StoreResult<()> {
    if text.trim().is_empty() && attachments.is_empty() {
        return Err(StoreError::Empty { what: "message" });
    }
    if text.len() > MAX_MESSAGE_TEXT_BYTES {
        return Err(StoreError::MessageTooLong { bytes: text.len() });
    }
    if attachments.len() > MAX_ATTACHMENTS_PER_MESSAGE {
        return Err(StoreError::TooManyAttachments { count: attachments.len() });
    }
    for a in attachments {
        super::error::check_name("attachment name", &a.name, MAX_NAME_CHARS)?;
        if let Some(png) = &a.thumbnail_png {
            if png.len() > MAX_THUMBNAIL_BYTES {
                return Err(StoreError::ThumbnailTooLarge { name: a.name.clone(), bytes: png.len() });
            }
        }
    }
    Ok(())
}

impl Store {
    /// Store what the user wrote, status `pending`, BEFORE it is sent anywhere: whatever happens to
    /// the runtime afterwards, the message is in the conversation.
    pub fn add_user_message(&self, conversation_id: &str, text: &str, attachments: Vec<NewAttachment>) -> StoreResult<Message> {
        check_user_message(text, &attachments)?;
        let mut inner = self.lock();
        let tx = inner.conn.transaction()?;
        ensure_conversation(&tx, conversation_id)?;
        let now = now_ms();
        let id = new_id();
        tx.execute(
            "INSERT INTO messages (id, conversation_id, role, text, status, created_at, updated_at) VALUES (?1, ?2, 'user', ?3, 'pending', ?4, ?4)",
            params![id, conversation_id, text, now],
        )?;
        for (position, a) in attachments.iter().enumerate() {
            tx.execute(
                "INSERT INTO attachments (id, message_id, position, name, media_type, bytes_len, stored_path, thumbnail_png)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![new_id(), id, position as i64, a.name, a.media_type, a.bytes_len as i64, a.stored_path, a.thumbnail_png],
            )?;
        }
        tx.execute("UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1", params![conversation_id, now])?;
        let message = read_message(&tx, &id)?;
        tx.commit()?;
        tracing::debug!(%id, conversation_id, bytes = text.len(), attachments = attachments.len(), "user message stored");
        Ok(message)
    }

    /// Move a message along its lifecycle (see [`MessageStatus::can_become`]). Leaving `error`
    /// clears the error sentence.
    pub fn set_status(&self, message_id: &str, status: MessageStatus) -> StoreResult<()> {
        let mut inner = self.lock();
        inner.flush_one(message_id)?;
        let current = inner.status_of(message_id)?;
        if !current.can_become(status) {
            return Err(StoreError::StatusChange { from: current, to: status });
        }
        let error_sql = if status == MessageStatus::Error { "error" } else { "NULL" };
        inner.conn.execute(
            &format!("UPDATE messages SET status = ?2, error = {error_sql}, updated_at = ?3 WHERE id = ?1"),
            params![message_id, status.as_str(), now_ms()],
        )?;
        if status.is_finished() {
            inner.pending.remove(message_id);
        }
        Ok(())
    }

    /// A conversation's messages in order, each with its tool calls and attachments.
    pub fn list_messages(&self, conversation_id: &str) -> StoreResult<Vec<Message>> {
        let mut inner = self.lock();
        inner.flush_all()?;
        let tx = inner.conn.transaction()?;
        let mut messages: Vec<Message> = {
            let mut stmt =
                tx.prepare_cached(&format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ?1 ORDER BY seq"))?;
            let rows = stmt.query_map([conversation_id], message_from_row)?;
            rows.collect::<Result<_, _>>()?
        };
        attach_children(&tx, &mut messages, "m.conversation_id = ?1", conversation_id)?;
        tx.commit()?;
        Ok(messages)
    }

    pub fn get_message(&self, message_id: &str) -> StoreResult<Message> {
        let mut inner = self.lock();
        inner.flush_one(message_id)?;
        let tx = inner.conn.transaction()?;
        let message = read_message(&tx, message_id)?;
        tx.commit()?;
        Ok(message)
    }
}

pub(crate) fn read_message(tx: &rusqlite::Connection, message_id: &str) -> StoreResult<Message> {
    let message = tx
        .query_row(&format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?1"), [message_id], message_from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound { what: "message", id: message_id.to_owned() })?;
    let mut one = [message];
    attach_children(tx, &mut one, "m.id = ?1", message_id)?;
    let [message] = one;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{open_at, with_conversation};

    fn image(name: &str) -> NewAttachment {
        NewAttachment {
            name: name.into(),
            media_type: "image/png".into(),
            bytes_len: 1234,
            stored_path: format!("/data/attachments/{name}"),
            thumbnail_png: Some(vec![0x89, b'P', b'N', b'G']),
        }
    }

    #[test]
    fn a_user_message_is_stored_pending_with_its_attachments_and_survives_reopening() {
        let (store, conversation, dir) = with_conversation();
        let message = store.add_user_message(&conversation, "What is in these?", vec![image("a.png"), image("b.png")]).unwrap();
        assert_eq!((message.role, message.status), (MessageRole::User, MessageStatus::Pending));
        assert_eq!(message.attachments.len(), 2);
        drop(store);

        // A crash between storing and sending: the message is there after a restart.
        let store = open_at(dir.path());
        let messages = store.list_messages(&conversation).unwrap();
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(m.text, "What is in these?");
        let names: Vec<_> = m.attachments.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["a.png", "b.png"]);
        assert_eq!(m.attachments[0].thumbnail_data_url.as_deref(), Some("data:image/png;base64,iVBORw=="));
        assert_eq!(m.attachments[0].bytes_len, 1234);
    }

    #[test]
    fn oversized_or_empty_messages_are_refused_with_a_sentence_and_nothing_is_stored() {
        let (store, conversation, _dir) = with_conversation();
        let paste = "x".repeat(5 * 1024 * 1024);
        let err = store.add_user_message(&conversation, &paste, Vec::new()).unwrap_err();
        assert!(err.to_string().starts_with("This message is 5.0 MB; Hearth accepts messages up to 1.0 MB."), "{err}");
        let many: Vec<_> = (0..=MAX_ATTACHMENTS_PER_MESSAGE).map(|i| image(&format!("{i}.png"))).collect();
        let err = store.add_user_message(&conversation, "hi", many).unwrap_err();
        assert!(err.to_string().contains("at most 10 attachments"), "{err}");
        let err = store.add_user_message(&conversation, "  ", Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "The message cannot be empty.");
        let mut big = image("big.png");
        big.thumbnail_png = Some(vec![0; MAX_THUMBNAIL_BYTES + 1]);
        assert!(matches!(store.add_user_message(&conversation, "hi", vec![big]), Err(StoreError::ThumbnailTooLarge { .. })));
        let err = store.add_user_message("nope", "hi", Vec::new()).unwrap_err();
        assert!(matches!(err, StoreError::NotFound { what: "conversation", .. }));
        assert!(store.list_messages(&conversation).unwrap().is_empty());
    }

    #[test]
    fn statuses_only_move_forward_but_a_failed_send_can_be_retried() {
        let (store, conversation, _dir) = with_conversation();
        let m = store.add_user_message(&conversation, "hi", Vec::new()).unwrap();
        store.set_status(&m.id, MessageStatus::Sending).unwrap();
        store.finish(&m.id, MessageStatus::Error, Some("The runtime did not answer.")).unwrap();
        let failed = store.get_message(&m.id).unwrap();
        assert_eq!((failed.status, failed.error.as_deref(), failed.text.as_str()), (MessageStatus::Error, Some("The runtime did not answer."), "hi"));

        store.set_status(&m.id, MessageStatus::Pending).unwrap();
        assert_eq!(store.get_message(&m.id).unwrap().error, None, "retrying clears the old error");
        store.set_status(&m.id, MessageStatus::Done).unwrap();
        let err = store.set_status(&m.id, MessageStatus::Sending).unwrap_err();
        assert_eq!(err.to_string(), "This message is already done and cannot become sending.");
    }
}
