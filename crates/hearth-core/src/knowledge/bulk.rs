//! FTS5 settings for imports and library deletions, which write many index rows. FTS5 collects a
//! transaction's index rows in memory and writes them as a new segment when the transaction commits
//! or that memory passes `hashsize` (1 MiB by default), and by default merges segments a little at
//! every write (`automerge`), and a whole level at once when it reaches `crisismerge` segments. With the defaults an import redid merge work batch after
//! batch, each time over the data the previous batches wrote. An import turns the merging off and
//! leaves its segments to be merged once, after it has returned (see `maintenance.rs`), in steps
//! bounded in pages (one transaction each, so other writers wait for one step at most). The settings
//! live in the database: an import that crashes leaves them set, and [`repair`] puts them back when
//! the database is next opened.
//!
//! `hashsize` stays small on purpose (see [`BULK_HASHSIZE`]): writing a token into FTS5's pending
//! index is most of an import, and it is fast only while that index fits in the processor's cache.
//!
//! The write-ahead log is not checkpointed during an import either: by default every commit past
//! 1000 log pages copies the log into the database file, and an import's batches rewrite the same
//! b-tree and index pages again and again, so each was copied many times. One checkpoint after the
//! end copies each page once, off the import's path. That setting belongs to the writer connection,
//! so a crash cannot leave it.

use rusqlite::{params, Connection};

use super::error::KnowledgeError;
use super::maintenance::Work;
use super::service::KnowledgeService;

/// FTS5's default `automerge`, restored after an import (Hearth sets no other value).
pub const DEFAULT_AUTOMERGE: i64 = 4;
/// FTS5's default `crisismerge`, restored after an import.
pub const DEFAULT_CRISISMERGE: i64 = 16;
/// `crisismerge` during an import: a level is merged at once only at this many segments, which
/// bounds what a search running beside the import must visit (FTS5 allows at most 2000).
pub const BULK_CRISISMERGE: i64 = 128;
/// FTS5's default `hashsize` (bytes of pending index data that make it write a segment).
pub const DEFAULT_HASHSIZE: i64 = 1024 * 1024;
/// `hashsize` during an import: a segment per 2 MiB of index data, a few per batch. A whole batch
/// in one segment (32 MiB) made imports about 10 % slower, not faster: every token written is a
/// look-up and an append in the pending index, and once that outgrows the cache each is a miss (the
/// knowledge benchmark, 10 runs each, alternating: median 36.5 MB/s at 32 MiB, 40.5 MB/s at 2 MiB,
/// faster in 9 of 10 pairs; 1 MiB, the default, flushes twice as often and was slower again). The
/// extra segments are merged after the import with the rest. Only a level that reaches
/// [`BULK_CRISISMERGE`] segments during the import, about 128 × 2 MiB of index data, is merged
/// sooner: inside the batch that brings it there.
pub const BULK_HASHSIZE: i64 = 2 * 1024 * 1024;
/// SQLite's default `wal_autocheckpoint` (log pages), restored after an import.
pub const DEFAULT_WAL_AUTOCHECKPOINT: i64 = 1000;
/// Pages of index written per step of the merge after an import: about 16 MB, tens of milliseconds.
pub const MERGE_STEP_PAGES: i64 = 4096;

fn set(conn: &Connection, key: &str, value: i64) -> Result<(), rusqlite::Error> {
    conn.prepare_cached("INSERT INTO chunks_fts (chunks_fts, rank) VALUES (?1, ?2)")?.execute(params![key, value])?;
    Ok(())
}

/// The index settings an import changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSettings {
    pub automerge: i64,
    pub crisismerge: i64,
    pub hashsize: i64,
}

impl IndexSettings {
    /// FTS5's own, which Hearth keeps outside imports.
    pub const DEFAULT: IndexSettings =
        IndexSettings { automerge: DEFAULT_AUTOMERGE, crisismerge: DEFAULT_CRISISMERGE, hashsize: DEFAULT_HASHSIZE };
    /// During an import.
    pub const BULK: IndexSettings = IndexSettings { automerge: 0, crisismerge: BULK_CRISISMERGE, hashsize: BULK_HASHSIZE };
}

fn apply(conn: &Connection, settings: IndexSettings) -> Result<(), rusqlite::Error> {
    set(conn, "automerge", settings.automerge)?;
    set(conn, "crisismerge", settings.crisismerge)?;
    set(conn, "hashsize", settings.hashsize)
}

/// Switch to the import settings (inside an import's first batch's transaction, or a deletion's).
pub(super) fn begin(conn: &Connection) -> Result<(), rusqlite::Error> {
    apply(conn, IndexSettings::BULK)?;
    // Last: if anything before failed, the import does not count as begun and nothing is restored.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
}

/// The index settings as stored (FTS5's defaults when absent).
pub(crate) fn settings(conn: &Connection) -> Result<IndexSettings, rusqlite::Error> {
    let mut stmt = conn.prepare("SELECT k, CAST(v AS INTEGER) FROM chunks_fts_config WHERE k IN ('automerge', 'crisismerge', 'hashsize')")?;
    let mut found = IndexSettings::DEFAULT;
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
        match row? {
            (key, value) if key == "automerge" => found.automerge = value,
            (key, value) if key == "crisismerge" => found.crisismerge = value,
            (_, value) => found.hashsize = value,
        }
    }
    Ok(found)
}

/// Put the index settings back if an import was interrupted (a crash) before it could.
pub(super) fn repair(conn: &Connection) -> Result<(), KnowledgeError> {
    if settings(conn)? != IndexSettings::DEFAULT {
        tracing::warn!("an interrupted knowledge import left the index settings for bulk loading; restored");
        apply(conn, IndexSettings::DEFAULT)?;
    }
    Ok(())
}

fn total_changes(conn: &Connection) -> Result<i64, rusqlite::Error> {
    conn.query_row("SELECT total_changes()", [], |r| r.get(0))
}

/// Up to [`MERGE_STEP_PAGES`] pages of merging, in the caller's transaction; whether there was any
/// to do. Only levels holding at least FTS5's `usermerge` (4) segments are merged: after an import
/// into a large index that is what the import wrote, not the whole index.
pub(super) fn merge_step(conn: &Connection) -> Result<bool, rusqlite::Error> {
    let before = total_changes(conn)?;
    conn.prepare_cached("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('merge', ?1)")?.execute([MERGE_STEP_PAGES])?;
    // FTS5's documented test: fewer than two changes means the step found nothing to merge.
    Ok(total_changes(conn)? - before >= 2)
}

/// After an import: restore the settings (one transaction), bring automatic checkpoints back, and
/// ask the maintenance thread to merge what the import wrote (if `merge`: it ended well, or was
/// cancelled) and to checkpoint the log.
pub(super) fn finish(service: &KnowledgeService, merge: bool) -> Result<(), KnowledgeError> {
    let restored = {
        let mut conn = service.writer();
        let restored = conn.transaction().and_then(|tx| {
            apply(&tx, IndexSettings::DEFAULT)?;
            tx.commit()
        });
        let checkpoints = conn.pragma_update(None, "wal_autocheckpoint", DEFAULT_WAL_AUTOCHECKPOINT);
        restored.and(checkpoints)
    };
    service.maintenance.request(if merge { Work::MergeAndCheckpoint } else { Work::Checkpoint });
    Ok(restored?)
}
