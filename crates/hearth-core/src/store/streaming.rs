//! The assistant's side of a turn as it streams: text deltas, tool calls, usage, the end; and
//! recovery of turns a crash left unfinished.
//!
//! Deltas arrive by the thousand. Each `append_text` only appends to an in-memory buffer; the buffer
//! is written (`text = text || ?`) when it passes [`APPEND_FLUSH_BYTES`] or [`APPEND_FLUSH_INTERVAL`]
//! has passed since the last write, and before anything reads or finishes the message. A crash loses
//! at most the last interval's text of a reply that is then marked as interrupted anyway.

use std::time::Instant;

use rusqlite::{params, OptionalExtension};

use super::error::{StoreError, StoreResult};
use super::messages::{ensure_conversation, read_message, Message, MessageStatus, ToolCall};
use super::{
    new_id, now_ms, Inner, Store, APPEND_FLUSH_BYTES, APPEND_FLUSH_INTERVAL, MAX_REPLY_TEXT_BYTES, MAX_TOOL_CALLS_PER_MESSAGE,
    MAX_TOOL_TEXT_BYTES,
};
use crate::runtime::Usage;

/// The error a reply shows when Hearth stopped (crash, kill, power loss) while it was being written.
pub const INTERRUPTED_REPLY_ERROR: &str = "Hearth closed before this reply finished.";
/// The error a user message shows when Hearth stopped before it reached the runtime; it can be sent again.
pub const INTERRUPTED_SEND_ERROR: &str = "Hearth closed before this message was sent. Send it again.";
/// Appended where a tool's input, output or error was cut at [`MAX_TOOL_TEXT_BYTES`].
pub const TRUNCATION_NOTE: &str = "\n… (cut by Hearth: too long to keep)";

/// Reply text waiting to be written.
#[derive(Debug)]
pub(crate) struct PendingText {
    buf: String,
    /// Bytes of text already in the database, for the reply bound without a query per delta.
    stored_len: usize,
    last_flush: Instant,
}

impl Inner {
    pub(crate) fn flush_one(&mut self, message_id: &str) -> StoreResult<()> {
        let Some(pending) = self.pending.get_mut(message_id) else { return Ok(()) };
        write_pending(&self.conn, message_id, pending)
    }

    pub(crate) fn flush_all(&mut self) -> StoreResult<()> {
        for (id, pending) in self.pending.iter_mut() {
            write_pending(&self.conn, id, pending)?;
        }
        Ok(())
    }

    pub(crate) fn status_of(&self, message_id: &str) -> StoreResult<MessageStatus> {
        let status: Option<String> =
            self.conn.query_row("SELECT status FROM messages WHERE id = ?1", [message_id], |r| r.get(0)).optional()?;
        status
            .map(|s| MessageStatus::parse(&s))
            .ok_or_else(|| StoreError::NotFound { what: "message", id: message_id.to_owned() })
    }

    /// Drop buffers of messages that were deleted with their conversation or project.
    pub(crate) fn forget_pending_of_deleted(&mut self) {
        let conn = &self.conn;
        self.pending.retain(|id, _| {
            conn.query_row("SELECT 1 FROM messages WHERE id = ?1", [id], |_| Ok(())).optional().ok().flatten().is_some()
        });
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A clean close writes what is buffered; a crash is what `recover_interrupted` is for.
        if let Err(e) = self.flush_all() {
            tracing::warn!(error = %e, "could not write buffered reply text while closing the store");
        }
    }
}

fn write_pending(conn: &rusqlite::Connection, message_id: &str, pending: &mut PendingText) -> StoreResult<()> {
    if !pending.buf.is_empty() {
        conn.prepare_cached("UPDATE messages SET text = text || ?2, updated_at = ?3 WHERE id = ?1")?
            .execute(params![message_id, pending.buf, now_ms()])?;
        pending.stored_len += pending.buf.len();
        pending.buf.clear();
    }
    pending.last_flush = Instant::now();
    Ok(())
}

/// Cut `text` to at most `max` bytes on a character boundary, noting the cut.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(TRUNCATION_NOTE.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{TRUNCATION_NOTE}", &text[..end])
}

impl Store {
    /// Start the assistant's reply in a conversation: an empty message, status `streaming`.
    pub fn begin_assistant_message(&self, conversation_id: &str) -> StoreResult<Message> {
        let mut inner = self.lock();
        let tx = inner.conn.transaction()?;
        ensure_conversation(&tx, conversation_id)?;
        let now = now_ms();
        let id = new_id();
        tx.execute(
            "INSERT INTO messages (id, conversation_id, role, text, status, created_at, updated_at) VALUES (?1, ?2, 'assistant', '', 'streaming', ?3, ?3)",
            params![id, conversation_id, now],
        )?;
        tx.execute("UPDATE conversations SET updated_at = max(updated_at, ?2) WHERE id = ?1", params![conversation_id, now])?;
        let message = read_message(&tx, &id)?;
        tx.commit()?;
        inner.pending.insert(id, PendingText { buf: String::new(), stored_len: 0, last_flush: Instant::now() });
        Ok(message)
    }

    /// Add streamed text to a reply. Cheap: usually a memory append (see the module notes).
    pub fn append_text(&self, message_id: &str, delta: &str) -> StoreResult<()> {
        if delta.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        if !inner.pending.contains_key(message_id) {
            // Not begun in this process (or already finished): only a reply still streaming takes text.
            let status = inner.status_of(message_id)?;
            if status != MessageStatus::Streaming {
                return Err(StoreError::NotStreaming { status });
            }
            let stored_len: i64 = inner.conn.query_row("SELECT length(CAST(text AS BLOB)) FROM messages WHERE id = ?1", [message_id], |r| r.get(0))?;
            let pending = PendingText { buf: String::new(), stored_len: stored_len as usize, last_flush: Instant::now() };
            inner.pending.insert(message_id.to_owned(), pending);
        }
        let Inner { conn, pending } = &mut *inner;
        let entry = pending.get_mut(message_id).expect("inserted above");
        if entry.stored_len + entry.buf.len() + delta.len() > MAX_REPLY_TEXT_BYTES {
            return Err(StoreError::ReplyTooLong);
        }
        entry.buf.push_str(delta);
        if entry.buf.len() >= APPEND_FLUSH_BYTES || entry.last_flush.elapsed() >= APPEND_FLUSH_INTERVAL {
            write_pending(conn, message_id, entry)?;
        }
        Ok(())
    }

    /// Write all buffered reply text now (e.g. before the app quits).
    pub fn flush_pending(&self) -> StoreResult<()> {
        self.lock().flush_all()
    }

    /// Record a tool call on a reply, or update it (same `call_id`) as it runs and finishes. Input,
    /// output and error longer than [`MAX_TOOL_TEXT_BYTES`] are cut with a note rather than refused,
    /// so the card still shows what happened.
    pub fn upsert_tool_call(&self, message_id: &str, call: &ToolCall) -> StoreResult<()> {
        let input = serde_json::to_string(&call.input).expect("a JSON value always serialises");
        let input = if input.len() > MAX_TOOL_TEXT_BYTES {
            serde_json::to_string(&bounded(&input, MAX_TOOL_TEXT_BYTES)).expect("a string always serialises")
        } else {
            input
        };
        let output = call.output.as_deref().map(|t| bounded(t, MAX_TOOL_TEXT_BYTES));
        let error = call.error.as_deref().map(|t| bounded(t, MAX_TOOL_TEXT_BYTES));

        let mut inner = self.lock();
        let tx = inner.conn.transaction()?;
        let known: bool = tx.query_row("SELECT EXISTS(SELECT 1 FROM messages WHERE id = ?1)", [message_id], |r| r.get(0))?;
        if !known {
            return Err(StoreError::NotFound { what: "message", id: message_id.to_owned() });
        }
        let existing: bool = tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM tool_calls WHERE message_id = ?1 AND call_id = ?2)",
            params![message_id, call.call_id],
            |r| r.get(0),
        )?;
        if !existing {
            let count: i64 = tx.query_row("SELECT count(*) FROM tool_calls WHERE message_id = ?1", [message_id], |r| r.get(0))?;
            if count as usize >= MAX_TOOL_CALLS_PER_MESSAGE {
                return Err(StoreError::TooMany { what: "tool calls in one reply", max: MAX_TOOL_CALLS_PER_MESSAGE });
            }
        }
        tx.execute(
            "INSERT INTO tool_calls (message_id, call_id, tool, input, output, error, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (message_id, call_id) DO UPDATE SET
                 tool = excluded.tool, input = excluded.input, output = excluded.output, error = excluded.error, status = excluded.status",
            params![message_id, call.call_id, call.tool, input, output, error, call.status.as_str()],
        )?;
        tx.execute("UPDATE messages SET updated_at = ?2 WHERE id = ?1", params![message_id, now_ms()])?;
        tx.commit()?;
        Ok(())
    }

    /// The reply's token counts (the latest the runtime reported; the caller chooses what to pass).
    pub fn set_usage(&self, message_id: &str, usage: &Usage) -> StoreResult<()> {
        let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let changed = self.lock().conn.execute(
            "UPDATE messages SET input_tokens = ?2, output_tokens = ?3, reasoning_tokens = ?4, cache_read_tokens = ?5 WHERE id = ?1",
            params![
                message_id,
                clamp(usage.input_tokens),
                clamp(usage.output_tokens),
                clamp(usage.reasoning_tokens),
                clamp(usage.cache_read_tokens)
            ],
        )?;
        super::expect_one(changed, "message", message_id)
    }

    /// End a message: `done`, `error` (with the sentence the user sees) or `cancelled`. Buffered
    /// text is written first; any other status is refused.
    pub fn finish(&self, message_id: &str, status: MessageStatus, error: Option<&str>) -> StoreResult<()> {
        let mut inner = self.lock();
        let current = inner.status_of(message_id)?;
        if !status.is_finished() || !current.can_become(status) {
            return Err(StoreError::StatusChange { from: current, to: status });
        }
        inner.flush_one(message_id)?;
        let error = error.map(|e| bounded(e, MAX_TOOL_TEXT_BYTES));
        inner.conn.execute(
            "UPDATE messages SET status = ?2, error = ?3, updated_at = ?4 WHERE id = ?1",
            params![message_id, status.as_str(), error, now_ms()],
        )?;
        inner.pending.remove(message_id);
        tracing::debug!(message_id, status = status.as_str(), "message finished");
        Ok(())
    }

    /// End a reply as done with the text the runtime stored for its turn. What streamed is replaced
    /// by it: a gap in the event stream can leave the streamed text short, and a finished reply
    /// must read as the runtime kept it.
    pub fn finish_done(&self, message_id: &str, text: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let current = inner.status_of(message_id)?;
        if current.is_finished() {
            return Err(StoreError::StatusChange { from: current, to: MessageStatus::Done });
        }
        inner.pending.remove(message_id);
        inner.conn.execute(
            "UPDATE messages SET text = ?2, status = 'done', error = NULL, updated_at = ?3 WHERE id = ?1",
            params![message_id, bounded(text, MAX_REPLY_TEXT_BYTES), now_ms()],
        )?;
        tracing::debug!(message_id, "message finished");
        Ok(())
    }

    /// Call once at startup: turns a crash left unfinished become errors with a sentence. Replies
    /// that were being written get [`INTERRUPTED_REPLY_ERROR`] (their text so far is kept); user
    /// messages never sent get [`INTERRUPTED_SEND_ERROR`] and keep their text, ready to send again.
    /// Messages streaming in this process right now are left alone. Returns how many were changed.
    pub fn recover_interrupted(&self) -> StoreResult<usize> {
        let mut inner = self.lock();
        let live: Vec<String> = inner.pending.keys().cloned().collect();
        let tx = inner.conn.transaction()?;
        let live_json = serde_json::to_string(&live).expect("a string list always serialises");
        let now = now_ms();
        let not_live = "id NOT IN (SELECT value FROM json_each(?3))";
        let replies = tx.execute(
            &format!("UPDATE messages SET status = 'error', error = ?1, updated_at = ?2 WHERE role = 'assistant' AND status IN ('pending', 'sending', 'streaming') AND {not_live}"),
            params![INTERRUPTED_REPLY_ERROR, now, live_json],
        )?;
        let sends = tx.execute(
            &format!("UPDATE messages SET status = 'error', error = ?1, updated_at = ?2 WHERE role = 'user' AND status IN ('pending', 'sending') AND {not_live}"),
            params![INTERRUPTED_SEND_ERROR, now, live_json],
        )?;
        let running_tools = tx.execute(
            "UPDATE tool_calls SET status = 'error', error = coalesce(error, ?1)
             WHERE status = 'running' AND message_id IN (SELECT id FROM messages WHERE status = 'error' AND error = ?1)",
            params![INTERRUPTED_REPLY_ERROR],
        )?;
        tx.commit()?;
        if replies + sends > 0 {
            tracing::warn!(replies, sends, running_tools, "marked turns interrupted by the last shutdown");
        }
        Ok(replies + sends)
    }
}

#[cfg(test)]
mod tests;
