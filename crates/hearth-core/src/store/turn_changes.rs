//! What each turn changed in its project's files, and whether it is undone; the runtime's own id of
//! each user message (where undo and fork cut the runtime's history).

use rusqlite::{params, OptionalExtension};

use super::error::{StoreError, StoreResult};
use super::Store;
use crate::changes::{ChangeList, Checkpoint};

/// Whether a turn's changes stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum TurnState {
    /// As the agent left them.
    Kept,
    /// Undone: the files are as before the turn, and redo can bring it back.
    Undone,
    /// Undone and then a new message was sent: the runtime has forgotten the turn for good.
    Discarded,
}

impl TurnState {
    fn as_str(self) -> &'static str {
        match self {
            TurnState::Kept => "kept",
            TurnState::Undone => "undone",
            TurnState::Discarded => "discarded",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "undone" => TurnState::Undone,
            "discarded" => TurnState::Discarded,
            _ => TurnState::Kept,
        }
    }
}

/// A reply's changes as the window shows them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct TurnChanges {
    pub list: ChangeList,
    pub state: TurnState,
}

/// A turn's record, for undo and redo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    pub reply_id: String,
    pub user_id: String,
    /// The runtime's id of the turn's user message, if the runtime took it.
    pub native_user_id: Option<String>,
    pub before: Checkpoint,
    pub after: Checkpoint,
    pub state: TurnState,
}

impl Store {
    /// Remember the runtime's id of a user message.
    pub fn set_native_id(&self, message_id: &str, native_id: &str) -> StoreResult<()> {
        let inner = self.lock();
        let n = inner.conn.execute("UPDATE messages SET native_id = ?2 WHERE id = ?1", params![message_id, native_id])?;
        if n == 0 {
            return Err(StoreError::NotFound { what: "message", id: message_id.to_owned() });
        }
        Ok(())
    }

    /// The runtime's id of the first user message after `message_id` in its conversation (where a
    /// fork at that message cuts), `None` when there is none or the runtime never took it.
    pub fn next_user_native_id(&self, conversation_id: &str, message_id: &str) -> StoreResult<Option<String>> {
        let inner = self.lock();
        let seq: i64 = inner
            .conn
            .query_row("SELECT seq FROM messages WHERE id = ?1 AND conversation_id = ?2", params![message_id, conversation_id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "message", id: message_id.to_owned() })?;
        let next: Option<Option<String>> = inner
            .conn
            .query_row("SELECT native_id FROM messages WHERE conversation_id = ?1 AND role = 'user' AND seq > ?2 ORDER BY seq LIMIT 1", params![conversation_id, seq], |r| r.get(0))
            .optional()?;
        Ok(next.flatten())
    }

    /// Keep what a finished turn changed.
    pub fn record_turn_changes(&self, reply_id: &str, user_id: &str, before: &Checkpoint, after: &Checkpoint, list: &ChangeList) -> StoreResult<()> {
        let inner = self.lock();
        let list = serde_json::to_string(list).expect("a change list serialises");
        inner.conn.execute(
            "INSERT INTO turn_changes (reply_id, conversation_id, user_id, before_tree, after_tree, list)
             SELECT id, conversation_id, ?2, ?3, ?4, ?5 FROM messages WHERE id = ?1
             ON CONFLICT (reply_id) DO UPDATE SET before_tree = ?3, after_tree = ?4, list = ?5, state = 'kept'",
            params![reply_id, user_id, before.0, after.0, list],
        )?;
        Ok(())
    }

    /// Every recorded turn of a conversation, oldest first.
    pub fn turn_records(&self, conversation_id: &str) -> StoreResult<Vec<TurnRecord>> {
        Ok(self.records_where("t.conversation_id = ?1", conversation_id)?.into_iter().map(|(record, _)| record).collect())
    }

    /// One reply's turn record, with its project's id.
    pub fn turn_record(&self, reply_id: &str) -> StoreResult<Option<(TurnRecord, String)>> {
        Ok(self.records_where("t.reply_id = ?1", reply_id)?.pop())
    }

    /// Turn records selected by `filter` (an SQL condition on `t`), oldest first, with their
    /// project's id.
    fn records_where(&self, filter: &str, arg: &str) -> StoreResult<Vec<(TurnRecord, String)>> {
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(&format!(
            "SELECT t.reply_id, t.user_id, u.native_id, t.before_tree, t.after_tree, t.state, c.project_id
             FROM turn_changes t JOIN messages r ON r.id = t.reply_id JOIN messages u ON u.id = t.user_id
             JOIN conversations c ON c.id = t.conversation_id
             WHERE {filter} ORDER BY r.seq"
        ))?;
        let rows = stmt.query_map([arg], |r| {
            let record = TurnRecord {
                reply_id: r.get(0)?,
                user_id: r.get(1)?,
                native_user_id: r.get(2)?,
                before: Checkpoint(r.get(3)?),
                after: Checkpoint(r.get(4)?),
                state: TurnState::parse(&r.get::<_, String>(5)?),
            };
            Ok((record, r.get(6)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Set the state of these turns, in one transaction.
    pub fn set_turn_states(&self, reply_ids: &[String], state: TurnState) -> StoreResult<()> {
        let mut inner = self.lock();
        let tx = inner.conn.transaction()?;
        for id in reply_ids {
            tx.execute("UPDATE turn_changes SET state = ?2 WHERE reply_id = ?1", params![id, state.as_str()])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// A new message was sent: undone turns of the conversation can no longer come back.
    pub fn discard_undone_turns(&self, conversation_id: &str) -> StoreResult<Vec<String>> {
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached("UPDATE turn_changes SET state = 'discarded' WHERE conversation_id = ?1 AND state = 'undone' RETURNING reply_id")?;
        let ids = stmt.query_map([conversation_id], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(ids)
    }
}

/// The changes of `messages`' replies, selected by `filter` (an SQL condition on `m`).
pub(super) fn attach_turn_changes(tx: &rusqlite::Connection, messages: &mut [super::Message], filter: &str, arg: &str) -> rusqlite::Result<()> {
    let index: std::collections::HashMap<String, usize> = messages.iter().enumerate().map(|(i, m)| (m.id.clone(), i)).collect();
    let mut stmt = tx.prepare_cached(&format!("SELECT t.reply_id, t.list, t.state FROM turn_changes t JOIN messages m ON m.id = t.reply_id WHERE {filter}"))?;
    for row in stmt.query_map([arg], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))? {
        let (reply_id, list, state) = row?;
        if let Some(&i) = index.get(&reply_id) {
            let list = serde_json::from_str(&list).unwrap_or_default();
            messages[i].changes = Some(TurnChanges { list, state: TurnState::parse(&state) });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::with_conversation;

    #[test]
    fn a_turns_changes_are_kept_with_its_reply_and_its_state_moves() {
        let (store, conv, _dir) = with_conversation();
        let user = store.add_user_message(&conv, "write a.txt x", Vec::new()).unwrap();
        let reply = store.begin_assistant_message(&conv).unwrap();
        store.set_native_id(&user.id, "msg_native").unwrap();
        let list = ChangeList { total_files: 1, additions: 1, ..Default::default() };
        store.record_turn_changes(&reply.id, &user.id, &Checkpoint("b".into()), &Checkpoint("a".into()), &list).unwrap();
        let records = store.turn_records(&conv).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!((records[0].native_user_id.as_deref(), records[0].state), (Some("msg_native"), TurnState::Kept));
        store.set_turn_states(std::slice::from_ref(&reply.id), TurnState::Undone).unwrap();
        let shown = store.list_messages(&conv).unwrap().into_iter().find(|m| m.id == reply.id).unwrap();
        assert_eq!(shown.changes, Some(TurnChanges { list, state: TurnState::Undone }));
        assert_eq!(store.discard_undone_turns(&conv).unwrap(), vec![reply.id.clone()]);
        assert_eq!(store.turn_records(&conv).unwrap()[0].state, TurnState::Discarded);
        assert!(matches!(store.set_native_id("nope", "x"), Err(StoreError::NotFound { .. })));
        let (record, _project) = store.turn_record(&reply.id).unwrap().expect("one reply's record");
        assert_eq!(record.reply_id, reply.id);
        assert_eq!(store.turn_record("nope").unwrap(), None);
        // A fork at a reply cuts before the next user message; there is none yet.
        assert_eq!(store.next_user_native_id(&conv, &reply.id).unwrap(), None);
        let later = store.add_user_message(&conv, "next", Vec::new()).unwrap();
        store.set_native_id(&later.id, "msg_later").unwrap();
        assert_eq!(store.next_user_native_id(&conv, &reply.id).unwrap().as_deref(), Some("msg_later"));
        assert!(matches!(store.next_user_native_id(&conv, "nope"), Err(StoreError::NotFound { .. })));
    }
}
