//! A conversation forked at one of its replies: a new conversation in the same project holding the
//! messages up to that reply (with their tool calls and attachments), continuing in its own native
//! session. The original is untouched.

use rusqlite::{params, OptionalExtension};

use super::conversations::Conversation;
use super::error::{StoreError, StoreResult};
use super::{new_id, now_ms, Store};

impl Store {
    /// Copy `from`'s settings and its messages up to and including `upto_message_id` into a new
    /// conversation titled `title`, bound to `native_session`.
    pub fn fork_conversation(&self, from: &str, upto_message_id: &str, title: &str, native_session: &str) -> StoreResult<Conversation> {
        let mut inner = self.lock();
        let tx = inner.conn.transaction()?;
        let upto: i64 = tx
            .query_row("SELECT seq FROM messages WHERE id = ?1 AND conversation_id = ?2", params![upto_message_id, from], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "message", id: upto_message_id.to_owned() })?;
        let id = new_id();
        let now = now_ms();
        let copied = tx.execute(
            "INSERT INTO conversations (id, project_id, title, created_at, updated_at, native_session_id, profile_id, work_mode, library_ids)
             SELECT ?2, project_id, ?3, ?4, ?4, ?5, profile_id, work_mode, library_ids FROM conversations WHERE id = ?1",
            params![from, id, title, now, native_session],
        )?;
        if copied == 0 {
            return Err(StoreError::NotFound { what: "conversation", id: from.to_owned() });
        }
        let originals: Vec<String> = {
            let mut stmt = tx.prepare("SELECT id FROM messages WHERE conversation_id = ?1 AND seq <= ?2 ORDER BY seq")?;
            let rows = stmt.query_map(params![from, upto], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        for original in originals {
            let copy = new_id();
            tx.execute(
                "INSERT INTO messages (id, conversation_id, role, text, status, error, created_at, updated_at, input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, native_id)
                 SELECT ?2, ?3, role, text, status, error, created_at, updated_at, input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, native_id FROM messages WHERE id = ?1",
                params![original, copy, id],
            )?;
            tx.execute(
                "INSERT INTO tool_calls (message_id, call_id, tool, input, output, error, status)
                 SELECT ?2, call_id, tool, input, output, error, status FROM tool_calls WHERE message_id = ?1 ORDER BY seq",
                params![original, copy],
            )?;
            // The image files stay where the original keeps them; their thumbnails are copied.
            tx.execute(
                "INSERT INTO attachments (id, message_id, position, name, media_type, bytes_len, stored_path, thumbnail_png)
                 SELECT lower(hex(randomblob(16))), ?2, position, name, media_type, bytes_len, stored_path, thumbnail_png FROM attachments WHERE message_id = ?1",
                params![original, copy],
            )?;
        }
        tx.commit()?;
        drop(inner);
        self.get_conversation(&id)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::with_conversation;
    use crate::store::{MessageStatus, StoreError};

    #[test]
    fn a_fork_copies_the_messages_up_to_the_reply_and_leaves_the_original() {
        let (store, conv, _dir) = with_conversation();
        let mut replies = Vec::new();
        for turn in 0..3 {
            store.add_user_message(&conv, &format!("question {turn}"), Vec::new()).unwrap();
            let reply = store.begin_assistant_message(&conv).unwrap();
            store.finish_done(&reply.id, &format!("answer {turn}")).unwrap();
            replies.push(reply.id);
        }
        store.set_work_mode(&conv, crate::runtime::WorkMode::Ask).unwrap();
        let fork = store.fork_conversation(&conv, &replies[1], "Fork", "ses_fork").unwrap();
        assert_eq!(fork.native_session_id.as_deref(), Some("ses_fork"));
        assert_eq!(fork.work_mode, crate::runtime::WorkMode::Ask, "the settings come along");
        let texts: Vec<String> = store.list_messages(&fork.id).unwrap().into_iter().map(|m| m.text).collect();
        assert_eq!(texts, ["question 0", "answer 0", "question 1", "answer 1"]);
        let copied = store.list_messages(&fork.id).unwrap();
        assert!(copied.iter().filter(|m| m.role == crate::store::MessageRole::Assistant).all(|m| m.status == MessageStatus::Done));
        assert_eq!(store.list_messages(&conv).unwrap().len(), 6, "the original keeps everything");
        assert!(matches!(store.fork_conversation(&conv, "nope", "x", "s"), Err(StoreError::NotFound { .. })));
    }
}
