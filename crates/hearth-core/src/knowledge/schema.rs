//! The knowledge database schema and its migrations, versioned with `PRAGMA user_version`.

use rusqlite::Connection;

use super::error::KnowledgeError;

/// Migrations, in order: `MIGRATIONS[n]` takes a database from version `n` to `n + 1`. Never edit a
/// released entry; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: libraries, documents (one per source file per library), chunks and their FTS5 index.
    // `chunks_fts` stores its own text with rowid = chunks.id = document id << CHUNK_ID_BITS | seq, so
    // a hit's document needs no lookup; `scope` holds a library token so the grant filter runs inside
    // the index. rank = bm25 weighting a path match over a body match, ignoring the scope column.
    "CREATE TABLE libraries (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE documents (
        id INTEGER PRIMARY KEY,
        library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
        source_path TEXT NOT NULL,
        title TEXT NOT NULL,
        managed_path TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        imported_at INTEGER NOT NULL,
        UNIQUE (library_id, source_path)
    );
    CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
        library_id INTEGER NOT NULL,
        start_line INTEGER NOT NULL
    );
    CREATE INDEX chunks_by_document ON chunks(document_id);
    CREATE INDEX chunks_by_library ON chunks(library_id);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(title, body, scope, tokenize = 'unicode61 remove_diacritics 2');
    INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0, 0.0)');
    CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');",
    // 2: the chunk table without secondary indexes or a foreign key. Keeping two indexes current cost
    // about a tenth of every import, and the key made each document deletion scan the whole table
    // (SQLite looks for child rows through an index on the child column, or by a scan). A document's
    // chunks are the row-id range `document << CHUNK_ID_BITS ..`, so deletes find them by row id;
    // searches reach chunks only by row id.
    "CREATE TABLE chunks_next (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL,
        library_id INTEGER NOT NULL,
        start_line INTEGER NOT NULL
    );
    INSERT INTO chunks_next (id, document_id, library_id, start_line)
        SELECT id, document_id, library_id, start_line FROM chunks;
    DROP TABLE chunks;
    ALTER TABLE chunks_next RENAME TO chunks;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) fn user_version(conn: &Connection) -> Result<i64, KnowledgeError> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// Bring the database to [`SCHEMA_VERSION`]; each step is one transaction.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), KnowledgeError> {
    let found = user_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(KnowledgeError::NewerSchema { found, supported: SCHEMA_VERSION });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let to = index as i64 + 1;
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", to)?;
        tx.commit()?;
        tracing::info!(version = to, "knowledge database migrated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_names(conn: &Connection) -> Vec<String> {
        let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn an_empty_database_migrates_from_zero_to_current_once() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("k.sqlite");
        let mut conn = Connection::open(&path).unwrap();
        assert_eq!(user_version(&conn).unwrap(), 0);
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let tables = table_names(&conn);
        for t in ["libraries", "documents", "chunks", "chunks_fts"] {
            assert!(tables.iter().any(|n| n == t), "{t} missing from {tables:?}");
        }
        // Running again (a reopen) must not re-run a step: it would fail on the existing tables.
        migrate(&mut conn).unwrap();
        drop(conn);
        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn a_version_1_database_keeps_its_chunks_and_loses_the_chunk_indexes_and_key() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO libraries VALUES (1, 'Notes', 0);
             INSERT INTO documents VALUES (1, 1, '/src/a.md', 'a.md', 'library-1/1-a.md', 'h', 10, 0);
             INSERT INTO chunks VALUES (8388608, 1, 1, 1), (8388609, 1, 1, 40);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();

        let chunks: Vec<(i64, i64, i64, i64)> = conn
            .prepare("SELECT id, document_id, library_id, start_line FROM chunks ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(chunks, [(8388608, 1, 1, 1), (8388609, 1, 1, 40)]);
        let indexes: i64 =
            conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'chunks'", [], |r| r.get(0)).unwrap();
        assert_eq!(indexes, 0, "every import would keep them current");
        let keys: i64 = conn.query_row("SELECT count(*) FROM pragma_foreign_key_list('chunks')", [], |r| r.get(0)).unwrap();
        assert_eq!(keys, 0, "deleting a document would scan the chunk table for its children");
        // The documents table keeps its own key, and still refuses a row of a library that is not there.
        let orphan = conn.execute("INSERT INTO documents VALUES (2, 9, '/src/b.md', 'b.md', 'm', 'h', 1, 0)", []);
        assert!(orphan.is_err());
    }

    #[test]
    fn a_newer_database_is_refused_with_a_clear_sentence() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(matches!(err, KnowledgeError::NewerSchema { .. }));
        assert!(err.to_string().contains("newer version of Hearth"), "{err}");
    }

    #[test]
    fn the_bundled_sqlite_has_fts5_with_bm25_and_snippets() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute("INSERT INTO chunks_fts(rowid, title, body, scope) VALUES (1, 't', 'the ember protocol', 'lib1')", []).unwrap();
        let (snippet, rank): (String, f64) = conn
            .query_row(
                "SELECT snippet(chunks_fts, 1, '«', '»', '…', 8), rank FROM chunks_fts WHERE chunks_fts MATCH 'ember'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(snippet, "the «ember» protocol");
        assert!(rank < 0.0);
    }
}
