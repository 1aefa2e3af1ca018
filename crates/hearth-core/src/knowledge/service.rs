//! The service object: connections, libraries and documents. Import lives in `import.rs`, search and
//! reading in `search.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::bulk;
use super::error::KnowledgeError;
use super::frequency::Frequencies;
use super::maintenance::Maintenance;
use super::managed;
use super::schema;
use super::search::chunk_id;
use super::types::{DocumentId, DocumentInfo, Library, LibraryId};

/// Idle read-only connections kept for reuse; more are opened under load and closed after.
pub const READER_POOL_SIZE: usize = 4;
/// Page cache of each read connection, in KiB: the hot part of the index stays in memory.
pub const READER_CACHE_KIB: i64 = 32 * 1024;
/// Bytes of the database a read connection maps into memory (reads without copying).
pub const READER_MMAP_BYTES: i64 = 256 * 1024 * 1024;
/// Page cache of the writer, in KiB: an import's index segments and b-tree pages stay in memory
/// while they are written and merged (SQLite's default is 2 MiB).
pub const WRITER_CACHE_KIB: i64 = 64 * 1024;
/// Largest the write-ahead log stays on disk once it has been checkpointed (an import grows it to
/// about the size of what it wrote).
pub const WAL_SIZE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;
/// Longest library name, in characters.
pub const MAX_LIBRARY_NAME_CHARS: usize = 200;
/// How long a statement waits for a lock held by another connection before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub struct KnowledgeService {
    pub(super) db_path: PathBuf,
    /// Canonical, so containment checks compare real paths.
    pub(super) managed_root: PathBuf,
    pub(super) writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    /// Which query words are common, per state of the index.
    pub(super) frequencies: Frequencies,
    /// Merges and checkpoints after imports, on a thread of its own.
    pub(super) maintenance: Maintenance,
}

/// A pooled read-only connection, returned to the pool on drop.
pub(super) struct Reader<'a> {
    conn: Option<Connection>,
    pool: &'a Mutex<Vec<Connection>>,
}

impl std::ops::Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let mut pool = lock(self.pool);
        if pool.len() < READER_POOL_SIZE {
            pool.extend(self.conn.take());
        }
    }
}

/// A poisoned lock only means another thread panicked; SQLite rolled its transaction back.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn configure(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

impl KnowledgeService {
    /// Open (creating if needed) the database at `db_path` and the managed folder at `managed_root`,
    /// migrating the schema to [`super::SCHEMA_VERSION`].
    pub fn open(db_path: impl AsRef<Path>, managed_root: impl AsRef<Path>) -> Result<Self, KnowledgeError> {
        let db_path = db_path.as_ref().to_path_buf();
        let open_err = |detail: String| KnowledgeError::Open { path: db_path.clone(), detail };
        if let Some(parent) = db_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| open_err(e.to_string()))?;
        }
        let root = managed_root.as_ref();
        std::fs::create_dir_all(root).map_err(|e| KnowledgeError::io(root, e))?;
        let managed_root = std::fs::canonicalize(root).map_err(|e| KnowledgeError::io(root, e))?;

        let mut writer = Connection::open(&db_path).map_err(|e| open_err(e.to_string()))?;
        configure(&writer).map_err(|e| open_err(e.to_string()))?;
        // WAL: readers never wait for the writer. NORMAL sync is durable across app crashes; a power
        // cut may lose the last imports, never corrupt the file.
        let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(mode, "knowledge database is not in WAL mode; searches may wait for imports");
        }
        writer.pragma_update(None, "synchronous", "NORMAL")?;
        writer.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
        writer.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT_BYTES)?;
        schema::migrate(&mut writer)?;
        bulk::repair(&writer)?;
        tracing::info!(db = %db_path.display(), root = %managed_root.display(), "knowledge service open");
        let maintenance = Maintenance::spawn(db_path.clone()).map_err(|e| open_err(e.to_string()))?;
        Ok(KnowledgeService {
            maintenance,
            db_path,
            managed_root,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            frequencies: Frequencies::default(),
        })
    }

    /// Run `f` on a blocking thread: the way async callers (gateway, Tauri commands) use the service.
    pub async fn blocking<T, F>(self: &Arc<Self>, f: F) -> T
    where
        F: FnOnce(&KnowledgeService) -> T + Send + 'static,
        T: Send + 'static,
    {
        let this = Arc::clone(self);
        match tokio::task::spawn_blocking(move || f(&this)).await {
            Ok(value) => value,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// Wait until the index merge and log checkpoint the last import asked for have run. Nothing
    /// needs them for correctness (the segments and the log are part of the database); benchmarks
    /// and tests use it to look at the index as it settles.
    pub fn wait_for_maintenance(&self) {
        self.maintenance.wait();
    }

    pub fn managed_root(&self) -> &Path {
        &self.managed_root
    }

    pub(super) fn writer(&self) -> MutexGuard<'_, Connection> {
        lock(&self.writer)
    }

    pub(super) fn reader(&self) -> Result<Reader<'_>, KnowledgeError> {
        let pooled = lock(&self.readers).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(&self.db_path, flags)
                    .map_err(|e| KnowledgeError::Open { path: self.db_path.clone(), detail: e.to_string() })?;
                configure(&conn)?;
                conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
                conn.pragma_update(None, "mmap_size", READER_MMAP_BYTES)?;
                conn
            }
        };
        Ok(Reader { conn: Some(conn), pool: &self.readers })
    }

    fn valid_name(name: &str) -> Result<&str, KnowledgeError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_LIBRARY_NAME_CHARS {
            return Err(KnowledgeError::InvalidName { max: MAX_LIBRARY_NAME_CHARS });
        }
        Ok(name)
    }

    pub fn create_library(&self, name: &str) -> Result<Library, KnowledgeError> {
        let name = Self::valid_name(name)?;
        let created_at = now_ms();
        let conn = self.writer();
        conn.execute("INSERT INTO libraries (name, created_at) VALUES (?1, ?2)", params![name, created_at])?;
        let id = LibraryId(conn.last_insert_rowid());
        tracing::info!(library = %id, name, "knowledge library created");
        Ok(Library { id, name: name.to_string(), created_at, document_count: 0 })
    }

    pub fn list_libraries(&self) -> Result<Vec<Library>, KnowledgeError> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT l.id, l.name, l.created_at, (SELECT count(*) FROM documents d WHERE d.library_id = l.id)
             FROM libraries l ORDER BY l.name COLLATE NOCASE, l.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Library { id: LibraryId(r.get(0)?), name: r.get(1)?, created_at: r.get(2)?, document_count: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn library(&self, id: LibraryId) -> Result<Library, KnowledgeError> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT l.name, l.created_at, (SELECT count(*) FROM documents d WHERE d.library_id = l.id)
             FROM libraries l WHERE l.id = ?1",
        )?;
        let library = stmt
            .query_row([id.0], |r| Ok(Library { id, name: r.get(0)?, created_at: r.get(1)?, document_count: r.get(2)? }))
            .optional()?;
        library.ok_or(KnowledgeError::LibraryNotFound(id))
    }

    pub fn rename_library(&self, id: LibraryId, name: &str) -> Result<(), KnowledgeError> {
        let name = Self::valid_name(name)?;
        let changed = self.writer().execute("UPDATE libraries SET name = ?1 WHERE id = ?2", params![name, id.0])?;
        if changed == 0 {
            return Err(KnowledgeError::LibraryNotFound(id));
        }
        Ok(())
    }

    /// Delete a library with its documents, chunks and managed copies.
    pub fn delete_library(&self, id: LibraryId) -> Result<(), KnowledgeError> {
        let deleted = self.delete_library_rows(id);
        // Its index rows were deleted as an import writes them: restore the settings, and merge the
        // deletions into the index on the maintenance thread.
        let finished = bulk::finish(self, deleted.is_ok());
        deleted?;
        finished?;
        tracing::info!(library = %id, "knowledge library deleted");
        Ok(())
    }

    fn delete_library_rows(&self, id: LibraryId) -> Result<(), KnowledgeError> {
        let mut conn = self.writer();
        let tx = conn.transaction()?;
        bulk::begin(&tx)?;
        // One pass over the narrow chunk table (it has no index by library: imports would pay for it).
        let chunks: Vec<i64> =
            tx.prepare("SELECT id FROM chunks WHERE library_id = ?1")?.query_map([id.0], |r| r.get(0))?.collect::<Result<_, _>>()?;
        delete_index_rows(&tx, chunks)?;
        tx.execute("DELETE FROM chunks WHERE library_id = ?1", [id.0])?;
        tx.execute("DELETE FROM documents WHERE library_id = ?1", [id.0])?;
        if tx.execute("DELETE FROM libraries WHERE id = ?1", [id.0])? == 0 {
            return Err(KnowledgeError::LibraryNotFound(id));
        }
        tx.commit()?;
        // Still under the writer lock, so no import can recreate the folder in between.
        managed::remove(&self.managed_root, &managed::library_dir(id))
    }

    pub fn list_documents(&self, library: LibraryId) -> Result<Vec<DocumentInfo>, KnowledgeError> {
        let conn = self.reader()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id, title, source_path, bytes, imported_at FROM documents WHERE library_id = ?1 ORDER BY title, id",
        )?;
        let rows = stmt.query_map([library.0], |r| {
            Ok(DocumentInfo {
                id: DocumentId(r.get(0)?),
                library_id: library,
                path: r.get(1)?,
                source_path: r.get(2)?,
                bytes: r.get::<_, i64>(3)?.max(0) as u64,
                imported_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Delete one document, its chunks and its managed copy.
    pub fn delete_document(&self, id: DocumentId) -> Result<(), KnowledgeError> {
        let mut conn = self.writer();
        let tx = conn.transaction()?;
        let managed_path: Option<String> =
            tx.query_row("SELECT managed_path FROM documents WHERE id = ?1", [id.0], |r| r.get(0)).optional()?;
        let managed_path = managed_path.ok_or(KnowledgeError::DocumentNotFound(id))?;
        delete_chunks(&tx, id)?;
        tx.execute("DELETE FROM documents WHERE id = ?1", [id.0])?;
        tx.commit()?;
        managed::remove(&self.managed_root, Path::new(&managed_path))?;
        tracing::info!(document = %id, "knowledge document deleted");
        Ok(())
    }
}

/// Remove a document's chunks from the index and the chunk table.
pub(super) fn delete_chunks(conn: &Connection, document: DocumentId) -> Result<(), rusqlite::Error> {
    delete_index_rows(conn, take_chunk_rows(conn, document)?)
}

/// Remove a document's rows from the narrow chunk table and return their ids, ascending; their index
/// rows are left to the caller. The ids of a document's chunks are the range from its first chunk's
/// id to the next document's.
pub(super) fn take_chunk_rows(conn: &Connection, document: DocumentId) -> Result<Vec<i64>, rusqlite::Error> {
    let range = [chunk_id(document, 0), chunk_id(DocumentId(document.0 + 1), 0)];
    let mut select = conn.prepare_cached("SELECT id FROM chunks WHERE id >= ?1 AND id < ?2 ORDER BY id")?;
    let ids = select.query_map(range, |r| r.get(0))?.collect::<Result<_, _>>()?;
    conn.prepare_cached("DELETE FROM chunks WHERE id >= ?1 AND id < ?2")?.execute(range)?;
    Ok(ids)
}

/// Remove the index rows of chunks, one `rowid = ?` at a time: FTS5 deletes that way several times
/// faster than by a row-id range or an `IN` list, which it serves by a scan.
pub(super) fn delete_index_rows(conn: &Connection, ids: impl IntoIterator<Item = i64>) -> Result<(), rusqlite::Error> {
    let mut delete = conn.prepare_cached("DELETE FROM chunks_fts WHERE rowid = ?1")?;
    for id in ids {
        delete.execute([id])?;
    }
    Ok(())
}
