//! The app store: projects, conversations, messages (with tool calls and attachments), model profiles,
//! MCP server settings and app settings, in one SQLite file (`hearth.sqlite3` in the data folder).
//! Secrets (API keys, MCP environment values) are NOT in it: they go to a [`SecretStore`].
//!
//! # Calling from async code
//! The store is synchronous: one `rusqlite::Connection` behind a `Mutex`, every method a short
//! statement or transaction (microseconds to a few milliseconds). From async code call it through
//! `tokio::task::spawn_blocking` (the store is `Clone`, cheap, and `Send + Sync`):
//! ```ignore
//! let store = store.clone();
//! tokio::task::spawn_blocking(move || store.append_text(&message_id, &delta)).await??;
//! ```
//! Why not async wrappers: they would be exactly that `spawn_blocking` around each method, hiding
//! which calls block; keeping the API synchronous keeps it usable as is from the CLI and from tests,
//! and lets a caller batch several calls into one blocking task.
//!
//! # Promises
//! - A user's message is stored (status `pending`) before anything is sent to the runtime.
//! - Streamed reply text is coalesced in memory (see [`APPEND_FLUSH_BYTES`], [`APPEND_FLUSH_INTERVAL`])
//!   and every read sees it; after a crash, [`Store::recover_interrupted`] marks unfinished replies
//!   as errors with a sentence, and the user's own messages are never touched.

mod agents;
mod bounds;
mod conversations;
mod fork;
mod error;
mod mcp_servers;
mod messages;
mod profiles;
mod projects;
mod schema;
pub mod secrets;
mod settings;
mod streaming;
mod turn_changes;
#[cfg(test)]
pub(crate) mod test_support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

use crate::store::secrets::{SecretStore, SecretsBackend};

pub use agents::MAX_CUSTOM_AGENTS;
pub use bounds::*;
pub use conversations::Conversation;
pub use error::{human_bytes, StoreError, StoreResult};
pub use mcp_servers::{McpServer, McpServerInput};
pub use messages::{Attachment, Message, MessageRole, MessageStatus, NewAttachment, ToolCall, ToolCallStatus};
pub use profiles::{anthropic_root, ModelProfile, ModelProtocol, ProfileInput, BUILTIN_SCRIPTED_BASE_URL, BUILTIN_SCRIPTED_PROFILE_ID, BUILTIN_SCRIPTED_PROFILE_NAME};
pub use projects::Project;
pub use schema::{SCHEMA_VERSION, MIGRATIONS};
pub use settings::{peek_runtime_binary_override, AppSettings, Theme};
pub use streaming::INTERRUPTED_REPLY_ERROR;
pub use turn_changes::{TurnChanges, TurnRecord, TurnState};

/// File name of the database inside the data folder.
pub const DATABASE_FILE_NAME: &str = "hearth.sqlite3";

/// The app store. Cloning shares one connection.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
    secrets: Arc<dyn SecretStore>,
}

#[derive(Debug)]
struct Inner {
    conn: Connection,
    /// Streamed text not yet written, per assistant message id.
    pending: HashMap<String, streaming::PendingText>,
}

impl Store {
    /// Open (creating or upgrading) the database at `path`, with secrets kept in `secrets`. A file
    /// this build cannot use (not a database, from a newer Hearth, an upgrade that fails) is an error
    /// naming it, and is left byte for byte as it was.
    pub fn open(path: &Path, secrets: Arc<dyn SecretStore>) -> StoreResult<Self> {
        let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
        schema::refuse_newer(path)?;
        let mut conn = Connection::open(path).map_err(open_err)?;
        configure(&conn).map_err(open_err)?;
        schema::migrate(&mut conn, path)?;
        // Only now: switching to WAL rewrites the file's header, which a refused file must keep.
        use_wal(&conn).map_err(open_err)?;
        profiles::seed_builtin(&conn)?;
        tracing::info!(path = %path.display(), version = SCHEMA_VERSION, "store opened");
        Ok(Self { inner: Arc::new(Mutex::new(Inner { conn, pending: HashMap::new() })), secrets })
    }

    /// The store in Hearth's data folder: `hearth.sqlite3`, with secrets in the desktop keyring or
    /// the 0600 `secrets.json` beside it, as `backend` allows (see [`secrets::open_in_data_dir`]).
    pub fn open_in_data_dir(data_dir: &Path, backend: SecretsBackend) -> StoreResult<Self> {
        let secrets = secrets::open_in_data_dir(data_dir, backend)?;
        Self::open(&data_dir.join(DATABASE_FILE_NAME), secrets)
    }

    /// The secrets this store writes API keys and MCP environment values to.
    pub fn secrets(&self) -> &Arc<dyn SecretStore> {
        &self.secrets
    }

    pub fn schema_version(&self) -> StoreResult<i64> {
        Ok(schema::schema_version(&self.lock().conn)?)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change is one statement or one transaction, so a panic elsewhere while holding the
        // lock cannot leave the database half-written: a poisoned lock is still safe to use.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Connection settings that write nothing to the file.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // NORMAL sync is durable across app crashes in WAL mode (only a power loss can drop the last
    // commits).
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// WAL: readers (e.g. the CLI) never block the app's writes.
fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "SQLite refused WAL journaling; continuing with its default");
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// JSON text of a list of strings (stored in TEXT columns).
pub(crate) fn to_json_list(items: &[String]) -> String {
    serde_json::to_string(items).expect("a string list always serialises")
}

/// A list of strings from its JSON column; a damaged value reads as empty rather than hiding the row.
pub(crate) fn from_json_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "unreadable list in the database; treating it as empty");
        Vec::new()
    })
}

/// `NotFound` when an UPDATE/DELETE touched no row.
pub(crate) fn expect_one(changed: usize, what: &'static str, id: &str) -> StoreResult<()> {
    if changed == 0 {
        return Err(StoreError::NotFound { what, id: id.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::test_support::{open_at, project_dir};
    use super::*;

    #[test]
    fn the_store_can_be_shared_with_blocking_tasks() {
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<Store>();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_turns_through_spawn_blocking_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        let project = store.add_project(&project_dir(dir.path(), "p")).unwrap();
        let mut tasks = Vec::new();
        for n in 0..4 {
            let store = store.clone();
            let project_id = project.id.clone();
            tasks.push(tokio::task::spawn_blocking(move || -> StoreResult<(String, String)> {
                let conversation = store.create_conversation(&project_id, &format!("Talk {n}"))?;
                store.add_user_message(&conversation.id, &format!("question {n}"), Vec::new())?;
                let reply = store.begin_assistant_message(&conversation.id)?;
                for i in 0..500 {
                    store.append_text(&reply.id, &format!("{n}:{i} "))?;
                }
                store.finish(&reply.id, MessageStatus::Done, None)?;
                Ok((conversation.id, (0..500).map(|i| format!("{n}:{i} ")).collect()))
            }));
        }
        for task in tasks {
            let (conversation, expected) = task.await.unwrap().unwrap();
            let messages = store.list_messages(&conversation).unwrap();
            assert_eq!(messages.len(), 2);
            assert_eq!(messages[1].text, expected);
        }
    }

    #[test]
    fn a_file_left_by_a_crash_opens_with_everything_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_at(dir.path());
        store.add_project(&project_dir(dir.path(), "p")).unwrap();
        // Like a crash: the connection is never closed, so the write-ahead log is not folded in.
        std::mem::forget(store);
        let wal = dir.path().join(format!("{DATABASE_FILE_NAME}-wal"));
        assert!(std::fs::metadata(&wal).unwrap().len() > 0, "the committed project is still in the log");
        let store = open_at(dir.path());
        assert_eq!(store.list_projects().unwrap().len(), 1);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DATABASE_FILE_NAME);
        std::fs::write(&db, vec![b'x'; 4096]).unwrap();
        let err = Store::open_in_data_dir(dir.path(), SecretsBackend::FileOnly).unwrap_err();
        assert!(matches!(&err, StoreError::Open { path, .. } if path == &db), "{err:?}");
        assert!(err.to_string().starts_with(&format!("Hearth could not open its database {}", db.display())), "{err}");
        assert_eq!(std::fs::read(&db).unwrap(), vec![b'x'; 4096], "the file is left as it was");
    }
}
