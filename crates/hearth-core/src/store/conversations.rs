//! Conversations: one per thread of work in a project, each with its own runtime session.

use rusqlite::{params, OptionalExtension, Row};

use super::error::{check_name, StoreError, StoreResult};
use super::{expect_one, from_json_list, new_id, now_ms, to_json_list, Store, MAX_LIBRARIES_PER_CONVERSATION, MAX_NAME_CHARS};
use crate::runtime::{RuntimeChoice, WorkMode};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: String,
    pub project_id: String,
    pub title: String,
    pub created_at: i64,
    /// Last activity (a message sent or a reply started); the list is ordered by it.
    pub updated_at: i64,
    /// The runtime's session for this conversation, kept so it continues after a restart.
    pub native_session_id: Option<String>,
    pub profile_id: Option<String>,
    pub work_mode: WorkMode,
    /// Knowledge libraries the agent may search in this conversation.
    pub library_ids: Vec<String>,
    /// When the conversation was last compacted, if ever.
    pub compacted_at: Option<i64>,
    /// Its own runtime choice; `None` follows the project's until the first message fixes it.
    pub runtime: Option<RuntimeChoice>,
}

const COLUMNS: &str = "id, project_id, title, created_at, updated_at, native_session_id, profile_id, work_mode, library_ids, compacted_at, runtime";

fn from_row(row: &Row<'_>) -> rusqlite::Result<Conversation> {
    Ok(Conversation {
        id: row.get(0)?,
        project_id: row.get(1)?,
        title: row.get(2)?,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        native_session_id: row.get(5)?,
        profile_id: row.get(6)?,
        work_mode: work_mode_from_str(&row.get::<_, String>(7)?),
        library_ids: from_json_list(&row.get::<_, String>(8)?),
        compacted_at: row.get(9)?,
        runtime: row.get::<_, Option<String>>(10)?.map(|t| RuntimeChoice::from_stored(&t)),
    })
}

pub(crate) fn work_mode_str(mode: WorkMode) -> &'static str {
    match mode {
        WorkMode::Execute => "execute",
        WorkMode::Ask => "ask",
    }
}

fn work_mode_from_str(text: &str) -> WorkMode {
    match text {
        "ask" => WorkMode::Ask,
        // Anything else (including a value from a newer build) is the default, never an error that hides
        // the conversation.
        _ => WorkMode::Execute,
    }
}

impl Store {
    pub fn create_conversation(&self, project_id: &str, title: &str) -> StoreResult<Conversation> {
        let title = title.trim();
        check_name("conversation title", title, MAX_NAME_CHARS)?;
        let inner = self.lock();
        let exists: bool = inner.conn.query_row("SELECT EXISTS(SELECT 1 FROM projects WHERE id = ?1)", [project_id], |r| r.get(0))?;
        if !exists {
            return Err(StoreError::NotFound { what: "project", id: project_id.to_owned() });
        }
        let now = now_ms();
        let conversation = Conversation {
            id: new_id(),
            project_id: project_id.to_owned(),
            title: title.to_owned(),
            created_at: now,
            updated_at: now,
            native_session_id: None,
            profile_id: None,
            work_mode: WorkMode::Execute,
            library_ids: Vec::new(),
            compacted_at: None,
            runtime: None,
        };
        inner.conn.execute(
            "INSERT INTO conversations (id, project_id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
            params![conversation.id, conversation.project_id, conversation.title, now],
        )?;
        Ok(conversation)
    }

    /// A project's conversations, most recent activity first.
    pub fn list_conversations(&self, project_id: &str) -> StoreResult<Vec<Conversation>> {
        let inner = self.lock();
        let mut stmt = inner.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM conversations WHERE project_id = ?1 ORDER BY updated_at DESC, rowid DESC"
        ))?;
        let rows = stmt.query_map([project_id], from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn get_conversation(&self, id: &str) -> StoreResult<Conversation> {
        let inner = self.lock();
        inner
            .conn
            .query_row(&format!("SELECT {COLUMNS} FROM conversations WHERE id = ?1"), [id], from_row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound { what: "conversation", id: id.to_owned() })
    }

    pub fn rename_conversation(&self, id: &str, title: &str) -> StoreResult<()> {
        let title = title.trim();
        check_name("conversation title", title, MAX_NAME_CHARS)?;
        self.update_conversation(id, "title = ?2", title)
    }

    /// Delete a conversation with its messages, tool calls and attachment records.
    pub fn delete_conversation(&self, id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let changed = inner.conn.execute("DELETE FROM conversations WHERE id = ?1", [id])?;
        expect_one(changed, "conversation", id)?;
        inner.forget_pending_of_deleted();
        Ok(())
    }

    pub fn set_native_session(&self, id: &str, native_session_id: Option<&str>) -> StoreResult<()> {
        self.update_conversation(id, "native_session_id = ?2", native_session_id)
    }

    /// Choose the model profile (`None` = the app's default profile).
    pub fn set_conversation_profile(&self, id: &str, profile_id: Option<&str>) -> StoreResult<()> {
        if let Some(profile_id) = profile_id {
            self.get_profile(profile_id)?;
        }
        self.update_conversation(id, "profile_id = ?2", profile_id)
    }

    /// Choose the conversation's own runtime (`None` follows the project's). Only before its first
    /// message: its native session lives in the runtime that started it.
    pub fn set_conversation_runtime(&self, id: &str, runtime: Option<&RuntimeChoice>) -> StoreResult<()> {
        let inner = self.lock();
        let has_messages: bool = inner.conn.query_row("SELECT EXISTS(SELECT 1 FROM messages WHERE conversation_id = ?1)", [id], |r| r.get(0))?;
        if has_messages {
            return Err(StoreError::RuntimeFixed);
        }
        let changed = inner.conn.execute("UPDATE conversations SET runtime = ?2 WHERE id = ?1", params![id, runtime.map(RuntimeChoice::as_stored)])?;
        expect_one(changed, "conversation", id)
    }

    /// The runtime that runs the conversation: its own choice, else — fixed now, at its first
    /// message — the project's. Returns the choice in force.
    pub fn fix_conversation_runtime(&self, id: &str, project_choice: &RuntimeChoice) -> StoreResult<RuntimeChoice> {
        let inner = self.lock();
        inner.conn.execute("UPDATE conversations SET runtime = ?2 WHERE id = ?1 AND runtime IS NULL", params![id, project_choice.as_stored()])?;
        let stored: Option<String> = inner.conn.query_row("SELECT runtime FROM conversations WHERE id = ?1", [id], |r| r.get(0)).optional()?.flatten();
        stored.map(|t| RuntimeChoice::from_stored(&t)).ok_or_else(|| StoreError::NotFound { what: "conversation", id: id.to_owned() })
    }

    pub fn set_work_mode(&self, id: &str, mode: WorkMode) -> StoreResult<()> {
        self.update_conversation(id, "work_mode = ?2", work_mode_str(mode))
    }

    /// The knowledge libraries this conversation may use (duplicates are dropped, order kept).
    pub fn set_conversation_libraries(&self, id: &str, library_ids: &[String]) -> StoreResult<()> {
        let mut unique: Vec<String> = Vec::with_capacity(library_ids.len());
        for lib in library_ids {
            if !unique.contains(lib) {
                unique.push(lib.clone());
            }
        }
        if unique.len() > MAX_LIBRARIES_PER_CONVERSATION {
            return Err(StoreError::TooMany { what: "libraries per conversation", max: MAX_LIBRARIES_PER_CONVERSATION });
        }
        self.update_conversation(id, "library_ids = ?2", to_json_list(&unique))
    }

    /// Record that the runtime compacted this conversation now.
    pub fn mark_compacted(&self, id: &str) -> StoreResult<()> {
        self.update_conversation(id, "compacted_at = ?2", now_ms())
    }

    fn update_conversation(&self, id: &str, set: &str, value: impl rusqlite::ToSql) -> StoreResult<()> {
        let changed = self.lock().conn.execute(&format!("UPDATE conversations SET {set} WHERE id = ?1"), params![id, value])?;
        expect_one(changed, "conversation", id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{open_at, project_dir, with_conversation};
    use crate::store::MessageStatus;

    #[test]
    fn conversation_settings_are_kept_across_reopening() {
        let (store, id, dir) = with_conversation();
        store.set_native_session(&id, Some("ses_123")).unwrap();
        store.set_work_mode(&id, WorkMode::Ask).unwrap();
        store.set_conversation_libraries(&id, &["lib-a".into(), "lib-b".into(), "lib-a".into()]).unwrap();
        store.set_conversation_profile(&id, Some(crate::store::BUILTIN_SCRIPTED_PROFILE_ID)).unwrap();
        store.mark_compacted(&id).unwrap();
        store.rename_conversation(&id, "Renamed").unwrap();
        drop(store);

        let store = open_at(dir.path());
        let c = store.get_conversation(&id).unwrap();
        assert_eq!(c.title, "Renamed");
        assert_eq!(c.native_session_id.as_deref(), Some("ses_123"));
        assert_eq!(c.work_mode, WorkMode::Ask);
        assert_eq!(c.library_ids, ["lib-a", "lib-b"]);
        assert_eq!(c.profile_id.as_deref(), Some(crate::store::BUILTIN_SCRIPTED_PROFILE_ID));
        assert!(c.compacted_at.is_some());
    }

    #[test]
    fn an_unknown_profile_or_conversation_is_a_sentence() {
        let (store, id, _dir) = with_conversation();
        let err = store.set_conversation_profile(&id, Some("nope")).unwrap_err();
        assert_eq!(err.to_string(), "This model profile no longer exists (it may have been deleted).");
        let err = store.set_work_mode("nope", WorkMode::Ask).unwrap_err();
        assert_eq!(err.to_string(), "This conversation no longer exists (it may have been deleted).");
        let too_many: Vec<String> = (0..=MAX_LIBRARIES_PER_CONVERSATION).map(|i| format!("lib{i}")).collect();
        assert!(matches!(store.set_conversation_libraries(&id, &too_many), Err(StoreError::TooMany { .. })));
    }

    #[test]
    fn conversations_list_by_latest_activity() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let project = store.add_project(&project_dir(dir.path(), "p")).unwrap();
        let a = store.create_conversation(&project.id, "A").unwrap();
        let b = store.create_conversation(&project.id, "B").unwrap();
        let titles = |s: &Store| s.list_conversations(&project.id).unwrap().into_iter().map(|c| c.title).collect::<Vec<_>>();
        assert_eq!(titles(&store), ["B", "A"]);
        std::thread::sleep(std::time::Duration::from_millis(2));
        store.add_user_message(&a.id, "hello", Vec::new()).unwrap();
        assert_eq!(titles(&store), ["A", "B"]);
        let _ = b;
    }

    #[test]
    fn deleting_a_conversation_deletes_its_messages_tool_calls_and_attachments() {
        let (store, id, _dir) = with_conversation();
        let attachment = crate::store::NewAttachment {
            name: "a.png".into(),
            media_type: "image/png".into(),
            bytes_len: 10,
            stored_path: "/tmp/a.png".into(),
            thumbnail_png: Some(vec![1, 2, 3]),
        };
        store.add_user_message(&id, "look", vec![attachment]).unwrap();
        let reply = store.begin_assistant_message(&id).unwrap();
        let call = crate::store::ToolCall {
            call_id: "call_1".into(),
            tool: "read".into(),
            input: serde_json::json!({}),
            output: None,
            error: None,
            status: crate::store::ToolCallStatus::Running,
        };
        store.upsert_tool_call(&reply.id, &call).unwrap();
        store.finish(&reply.id, MessageStatus::Done, None).unwrap();

        store.delete_conversation(&id).unwrap();
        assert!(store.list_messages(&id).unwrap().is_empty());
        let inner = store.lock();
        for table in ["messages", "tool_calls", "attachments"] {
            let n: i64 = inner.conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap();
            assert_eq!(n, 0, "{table} left behind");
        }
    }
}
