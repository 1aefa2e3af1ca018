//! FTS5 merge settings for imports. FTS5 writes the index rows of each transaction as a new segment
//! and by default merges segments a little at every write (`automerge`), and a whole level at once
//! when it reaches `crisismerge` segments. During an import that merge work is redone batch after
//! batch, each time over the data the previous batches wrote. An import turns it off, lets its
//! segments pile up, and merges them once at the end, in steps bounded in pages (one transaction each,
//! so other writers wait for one step at most). The settings live in the database: an import that
//! crashes leaves them set, and [`repair`] puts them back when the database is next opened.
//!
//! The write-ahead log is not checkpointed during an import either: by default every commit past
//! 1000 log pages copies the log into the database file, and an import's batches rewrite the same
//! b-tree and index pages again and again, so each was copied many times. One checkpoint after the
//! end copies each page once, off the import's path (see `checkpoint.rs`). That setting belongs to
//! the writer connection, so a crash cannot leave it.

use rusqlite::{params, Connection};

use super::error::KnowledgeError;
use super::service::KnowledgeService;

/// FTS5's default `automerge`, restored after an import (Hearth sets no other value).
pub const DEFAULT_AUTOMERGE: i64 = 4;
/// FTS5's default `crisismerge`, restored after an import.
pub const DEFAULT_CRISISMERGE: i64 = 16;
/// `crisismerge` during an import: a level is merged at once only at this many segments, which
/// bounds what a search running beside the import must visit (FTS5 allows at most 2000).
pub const BULK_CRISISMERGE: i64 = 128;
/// SQLite's default `wal_autocheckpoint` (log pages), restored after an import.
pub const DEFAULT_WAL_AUTOCHECKPOINT: i64 = 1000;
/// Pages of index written per step of the merge after an import: about 16 MB, tens of milliseconds.
pub const MERGE_STEP_PAGES: i64 = 4096;

fn set(conn: &Connection, key: &str, value: i64) -> Result<(), rusqlite::Error> {
    conn.prepare_cached("INSERT INTO chunks_fts (chunks_fts, rank) VALUES (?1, ?2)")?.execute(params![key, value])?;
    Ok(())
}

/// Switch the merging off for an import (inside its first batch's transaction).
pub(super) fn begin(conn: &Connection) -> Result<(), rusqlite::Error> {
    set(conn, "automerge", 0)?;
    set(conn, "crisismerge", BULK_CRISISMERGE)?;
    // Last: if anything before failed, the import does not count as begun and nothing is restored.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
}

fn restore(conn: &Connection) -> Result<(), rusqlite::Error> {
    set(conn, "automerge", DEFAULT_AUTOMERGE)?;
    set(conn, "crisismerge", DEFAULT_CRISISMERGE)
}

/// The merge settings as stored (FTS5's defaults when absent).
pub(crate) fn settings(conn: &Connection) -> Result<(i64, i64), rusqlite::Error> {
    let mut stmt = conn.prepare("SELECT k, CAST(v AS INTEGER) FROM chunks_fts_config WHERE k IN ('automerge', 'crisismerge')")?;
    let mut found = (DEFAULT_AUTOMERGE, DEFAULT_CRISISMERGE);
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
        match row? {
            (key, value) if key == "automerge" => found.0 = value,
            (_, value) => found.1 = value,
        }
    }
    Ok(found)
}

/// Put the merge settings back if an import was interrupted (a crash) before it could.
pub(super) fn repair(conn: &Connection) -> Result<(), KnowledgeError> {
    if settings(conn)? != (DEFAULT_AUTOMERGE, DEFAULT_CRISISMERGE) {
        tracing::warn!("an interrupted knowledge import left the index merge settings for bulk loading; restored");
        restore(conn)?;
    }
    Ok(())
}

fn total_changes(conn: &Connection) -> Result<i64, rusqlite::Error> {
    conn.query_row("SELECT total_changes()", [], |r| r.get(0))
}

/// Up to [`MERGE_STEP_PAGES`] pages of merging; whether there was any to do.
fn merge_step(conn: &Connection) -> Result<bool, rusqlite::Error> {
    let before = total_changes(conn)?;
    conn.prepare_cached("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('merge', ?1)")?.execute([MERGE_STEP_PAGES])?;
    // FTS5's documented test: fewer than two changes means the step found nothing to merge.
    Ok(total_changes(conn)? - before >= 2)
}

/// After an import: restore the settings, then (if `merge`) merge the levels holding at least FTS5's
/// `usermerge` (4) segments, one step per transaction, until a step finds nothing left to do. Only
/// those levels: an import into a large index merges what it wrote, not the whole index. Then
/// automatic checkpoints come back and the checkpoint thread copies the log into the database file.
pub(super) fn finish(service: &KnowledgeService, merge: bool) -> Result<(), KnowledgeError> {
    let merged = merge_all(service, merge);
    service.writer().pragma_update(None, "wal_autocheckpoint", DEFAULT_WAL_AUTOCHECKPOINT)?;
    service.checkpointer.request();
    merged
}

fn merge_all(service: &KnowledgeService, merge: bool) -> Result<(), KnowledgeError> {
    let mut restored = false;
    loop {
        let mut conn = service.writer();
        let tx = conn.transaction()?;
        if !restored {
            restore(&tx)?;
            restored = true;
        }
        let worked = merge && merge_step(&tx)?;
        tx.commit()?;
        if !worked {
            return Ok(());
        }
    }
}
