//! The database schema as an ordered list of named migrations. `PRAGMA user_version` records how many
//! have run; each runs in its own transaction together with the version bump, so a failed step leaves
//! the file exactly as it was. Never edit a released step: add a new one at the end.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::error::{StoreError, StoreResult};

/// One schema step.
pub struct Migration {
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every step, oldest first. The schema version of a file is the number of steps applied to it.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        name: "create_chat_tables",
        sql: "
            CREATE TABLE projects (
                id             TEXT PRIMARY KEY,
                name           TEXT NOT NULL,
                path           TEXT NOT NULL UNIQUE,
                added_at       INTEGER NOT NULL,
                last_opened_at INTEGER NOT NULL
            );
            CREATE TABLE conversations (
                id                TEXT PRIMARY KEY,
                project_id        TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
                title             TEXT NOT NULL,
                created_at        INTEGER NOT NULL,
                updated_at        INTEGER NOT NULL,
                native_session_id TEXT
            );
            CREATE INDEX conversations_by_project ON conversations(project_id, updated_at);
            -- seq orders a conversation's messages by insertion, stable across VACUUM.
            CREATE TABLE messages (
                seq             INTEGER PRIMARY KEY,
                id              TEXT NOT NULL UNIQUE,
                conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
                text            TEXT NOT NULL,
                status          TEXT NOT NULL,
                error           TEXT,
                created_at      INTEGER NOT NULL,
                updated_at      INTEGER NOT NULL
            );
            CREATE INDEX messages_by_conversation ON messages(conversation_id, seq);
            CREATE INDEX messages_by_status ON messages(status);
            CREATE TABLE tool_calls (
                seq        INTEGER PRIMARY KEY,
                message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                call_id    TEXT NOT NULL,
                tool       TEXT NOT NULL,
                input      TEXT NOT NULL,
                output     TEXT,
                error      TEXT,
                status     TEXT NOT NULL,
                UNIQUE (message_id, call_id)
            );
            CREATE TABLE attachments (
                id            TEXT PRIMARY KEY,
                message_id    TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                position      INTEGER NOT NULL,
                name          TEXT NOT NULL,
                media_type    TEXT NOT NULL,
                bytes_len     INTEGER NOT NULL,
                stored_path   TEXT NOT NULL,
                thumbnail_png BLOB
            );
            CREATE INDEX attachments_by_message ON attachments(message_id, position);
        ",
    },
    Migration {
        name: "create_settings_tables",
        sql: "
            CREATE TABLE model_profiles (
                id          TEXT PRIMARY KEY,
                name        TEXT NOT NULL,
                protocol    TEXT NOT NULL,
                base_url    TEXT NOT NULL,
                model       TEXT NOT NULL,
                image_input INTEGER NOT NULL,
                builtin     INTEGER NOT NULL DEFAULT 0,
                created_at  INTEGER NOT NULL
            );
            CREATE TABLE mcp_servers (
                id                  TEXT PRIMARY KEY,
                name                TEXT NOT NULL,
                command             TEXT NOT NULL,
                args                TEXT NOT NULL,
                env_keys            TEXT NOT NULL,
                enabled             INTEGER NOT NULL,
                allow_dynamic_tools INTEGER NOT NULL,
                assigned_runtimes   TEXT NOT NULL,
                created_at          INTEGER NOT NULL
            );
            CREATE TABLE app_settings (
                key   TEXT PRIMARY KEY,
                value TEXT NOT NULL
            );
        ",
    },
    Migration {
        name: "add_conversation_settings_and_usage",
        sql: "
            ALTER TABLE conversations ADD COLUMN profile_id TEXT REFERENCES model_profiles(id) ON DELETE SET NULL;
            ALTER TABLE conversations ADD COLUMN work_mode TEXT NOT NULL DEFAULT 'execute';
            ALTER TABLE conversations ADD COLUMN library_ids TEXT NOT NULL DEFAULT '[]';
            ALTER TABLE conversations ADD COLUMN compacted_at INTEGER;
            ALTER TABLE messages ADD COLUMN input_tokens INTEGER;
            ALTER TABLE messages ADD COLUMN output_tokens INTEGER;
            ALTER TABLE messages ADD COLUMN reasoning_tokens INTEGER;
            ALTER TABLE messages ADD COLUMN cache_read_tokens INTEGER;
        ",
    },
    Migration {
        name: "add_project_outside_policy",
        sql: "ALTER TABLE projects ADD COLUMN outside_project TEXT NOT NULL DEFAULT 'deny';",
    },
    Migration {
        name: "add_turn_changes",
        sql: "
            -- The runtime's own id of a user message: where undo and fork cut its history.
            ALTER TABLE messages ADD COLUMN native_id TEXT;
            -- What each turn changed in its project's files: the record's trees before and after it
            -- (see changes/), the change list as shown, and whether the turn is undone.
            CREATE TABLE turn_changes (
                reply_id        TEXT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
                conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                user_id         TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                before_tree     TEXT NOT NULL,
                after_tree      TEXT NOT NULL,
                list            TEXT NOT NULL,
                state           TEXT NOT NULL DEFAULT 'kept' CHECK (state IN ('kept', 'undone', 'discarded'))
            );
            CREATE INDEX turn_changes_by_conversation ON turn_changes(conversation_id);
        ",
    },
    Migration {
        name: "add_runtime_choice",
        sql: "
            -- Which runtime runs a project's conversations (`opencode`, `acp:<agent>`), and a
            -- conversation's own choice, fixed at its first message.
            ALTER TABLE projects ADD COLUMN runtime TEXT NOT NULL DEFAULT 'opencode';
            ALTER TABLE conversations ADD COLUMN runtime TEXT;
            -- Agents the user added by their command line (a JSON array: program, arguments).
            CREATE TABLE acp_agents (
                id         TEXT PRIMARY KEY,
                name       TEXT NOT NULL,
                command    TEXT NOT NULL,
                created_at INTEGER NOT NULL
            );
        ",
    },
    Migration {
        name: "add_project_host",
        sql: "
            -- The host of a project on another machine (anything ssh takes); NULL for a local one.
            -- Its `path` is then `ssh://<host><path>`, so the UNIQUE path still means one project
            -- per folder.
            ALTER TABLE projects ADD COLUMN host TEXT;
        ",
    },
];

/// The version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Refuse an existing file written by a newer Hearth, looking at it through a read-only connection
/// so that nothing in it changes (not even the journal mode in its header).
pub(crate) fn refuse_newer(path: &Path) -> StoreResult<()> {
    if !path.exists() {
        return Ok(());
    }
    let open_err = |source| StoreError::Open { path: path.to_path_buf(), source };
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(open_err)?;
    let found = schema_version(&conn).map_err(open_err)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: path.to_path_buf(), found, supported: SCHEMA_VERSION });
    }
    Ok(())
}

/// Bring the file at `path` up to `upto` steps (normally all of them; tests stop early to make old
/// files).
pub(crate) fn migrate_to(conn: &mut Connection, path: &Path, upto: usize) -> StoreResult<()> {
    let found = schema_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: path.to_path_buf(), found, supported: SCHEMA_VERSION });
    }
    for (index, step) in MIGRATIONS.iter().enumerate().take(upto).skip(found as usize) {
        let version = index as i64 + 1;
        let run = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction()?;
            tx.execute_batch(step.sql)?;
            // user_version lives in the file header, which the transaction covers.
            tx.pragma_update(None, "user_version", version)?;
            tx.commit()
        };
        run(conn).map_err(|source| StoreError::Migration { path: path.to_path_buf(), step: step.name, source })?;
        tracing::info!(step = step.name, version, "database migrated");
    }
    Ok(())
}

pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> StoreResult<()> {
    migrate_to(conn, path, MIGRATIONS.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::WorkMode;
    use crate::store::test_support::{open_at, project_dir, secrets};
    use crate::store::{MessageStatus, Store};

    /// A file as the first release wrote it: only step 1, with a project, a conversation and a
    /// message in it.
    fn write_v1_file(db: &std::path::Path, project_path: &str) {
        let mut conn = Connection::open(db).unwrap();
        migrate_to(&mut conn, db, 1).unwrap();
        assert_eq!(schema_version(&conn).unwrap(), 1);
        conn.execute_batch(&format!(
            "INSERT INTO projects VALUES ('p1', 'Old project', '{project_path}', 10, 20);
             INSERT INTO conversations VALUES ('c1', 'p1', 'Old talk', 30, 40, 'ses_old');
             INSERT INTO messages (id, conversation_id, role, text, status, error, created_at, updated_at)
                 VALUES ('m1', 'c1', 'user', 'hello from v1', 'done', NULL, 30, 30);
             INSERT INTO tool_calls (message_id, call_id, tool, input, output, error, status)
                 VALUES ('m1', 'call_1', 'read', '{{\"path\":\"a.txt\"}}', 'contents', NULL, 'done');"
        ))
        .unwrap();
    }

    #[test]
    fn an_old_file_is_migrated_and_keeps_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let project = project_dir(dir.path(), "old");
        let db = dir.path().join("hearth.sqlite3");
        write_v1_file(&db, project.to_str().unwrap());

        let store = open_at(dir.path());
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);

        let projects = store.list_projects().unwrap();
        assert_eq!(projects.len(), 1);
        assert_eq!(projects[0].name, "Old project");
        let conversations = store.list_conversations("p1").unwrap();
        assert_eq!(conversations.len(), 1);
        let c = &conversations[0];
        assert_eq!((c.title.as_str(), c.native_session_id.as_deref()), ("Old talk", Some("ses_old")));
        // Columns added later take their defaults on old rows.
        assert_eq!((c.work_mode, c.library_ids.len(), c.compacted_at, c.profile_id.as_ref()), (WorkMode::Execute, 0, None, None));

        let messages = store.list_messages("c1").unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!((messages[0].text.as_str(), messages[0].status), ("hello from v1", MessageStatus::Done));
        assert_eq!(messages[0].tool_calls[0].output.as_deref(), Some("contents"));
        assert_eq!(messages[0].usage, None);

        // And the migrated file takes new data of every kind.
        store.set_work_mode("c1", WorkMode::Ask).unwrap();
        assert!(!store.list_profiles().unwrap().is_empty(), "the built-in profile is seeded into old files too");
    }

    #[test]
    fn a_file_from_a_newer_hearth_is_refused_by_name_and_left_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("hearth.sqlite3");
        {
            let conn = Connection::open(&db).unwrap();
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 40).unwrap();
        }
        let before = std::fs::read(&db).unwrap();
        let err = Store::open(&db, secrets(dir.path())).unwrap_err();
        assert!(
            matches!(&err, StoreError::NewerSchema { path, found, supported } if path == &db && *found == SCHEMA_VERSION + 40 && *supported == SCHEMA_VERSION),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&db.display().to_string()) && text.contains("newer version of Hearth"), "{text}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "the file is left as it was");
    }

    #[test]
    fn a_failed_upgrade_names_the_file_and_step_and_leaves_the_file_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("hearth.sqlite3");
        {
            // A version-2 file whose conversations table already has a column step 3 adds.
            let mut conn = Connection::open(&db).unwrap();
            migrate_to(&mut conn, &db, 2).unwrap();
            conn.execute_batch("ALTER TABLE conversations ADD COLUMN profile_id TEXT").unwrap();
        }
        let before = std::fs::read(&db).unwrap();
        let err = Store::open(&db, secrets(dir.path())).unwrap_err();
        assert!(
            matches!(&err, StoreError::Migration { path, step: "add_conversation_settings_and_usage", .. } if path == &db),
            "{err:?}"
        );
        assert!(err.to_string().contains(&db.display().to_string()), "{err}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "the file is left as it was");
    }

    #[test]
    fn a_failing_step_rolls_back_to_the_previous_version() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.sqlite3");
        let mut conn = Connection::open(&db).unwrap();
        migrate_to(&mut conn, &db, 1).unwrap();
        // Sabotage step 2: its table already exists.
        conn.execute_batch("CREATE TABLE mcp_servers (id TEXT)").unwrap();
        let err = migrate(&mut conn, &db).unwrap_err();
        assert!(err.to_string().contains("create_settings_tables") && err.to_string().contains("left as it was"), "{err}");
        assert_eq!(schema_version(&conn).unwrap(), 1);
        let model_profiles: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'model_profiles'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(model_profiles, 0, "half a step must not remain");
    }

    #[test]
    fn every_step_has_a_distinct_name() {
        let mut names: Vec<_> = MIGRATIONS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MIGRATIONS.len());
    }
}
