//! What the faster import relies on: a file failing half-written leaves no trace while the files
//! before it stay (there are no per-file savepoints any more), the index settings always go back,
//! and an import's batches end up merged (after it has returned).

use std::path::Path;

use rusqlite::Connection;
use tokio_util::sync::CancellationToken;

use super::*;

fn open(tmp: &Path) -> KnowledgeService {
    KnowledgeService::open(tmp.join("data/knowledge.sqlite"), tmp.join("managed")).unwrap()
}

fn import(k: &KnowledgeService, library: LibraryId, path: &Path) -> Result<ImportReport, KnowledgeError> {
    k.import_path(library, path, &CancellationToken::new(), |_| {})
}

/// A separate connection: what is really on disk.
fn db(tmp: &Path) -> Connection {
    Connection::open(tmp.join("data/knowledge.sqlite")).unwrap()
}

fn rows(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

fn copies(k: &KnowledgeService, library: LibraryId) -> usize {
    std::fs::read_dir(k.managed_root().join(format!("library-{library}"))).unwrap().count()
}

/// Segments in the FTS5 index, from its structure record: a 4-byte cookie, a 4-byte version marker
/// in newer records, then the counts of levels and segments as SQLite varints.
fn segments(conn: &Connection) -> u64 {
    let block: Vec<u8> = conn.query_row("SELECT block FROM chunks_fts_data WHERE id = 10", [], |r| r.get(0)).unwrap();
    let mut at = if block.get(4..8) == Some(&[0xff, 0x00, 0x00, 0x01][..]) { 8 } else { 4 };
    let mut varint = || {
        let mut value = 0u64;
        loop {
            let byte = block[at];
            at += 1;
            value = (value << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 == 0 {
                return value;
            }
        }
    };
    let _levels = varint();
    varint()
}

/// Makes the database refuse the second chunk of any document whose path holds "poison": by then its
/// document row, first chunk and first index row are written.
const POISON: &str = "CREATE TRIGGER poison BEFORE INSERT ON chunks
    WHEN NEW.id & 8388607 = 1 AND (SELECT title FROM documents WHERE id = NEW.document_id) LIKE '%poison%'
    BEGIN SELECT RAISE(ABORT, 'injected failure'); END;";

fn long_text(word: &str) -> String {
    (0..200).map(|i| format!("line {i} of the notes about {word}\n")).collect()
}

#[test]
fn a_file_failing_half_written_leaves_no_trace_and_the_files_before_it_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("notes");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.md"), "alpha notes mention wintergreen\n").unwrap();
    std::fs::write(dir.join("b.md"), "beta notes mention wintergreen\n").unwrap();
    std::fs::write(dir.join("c-poison.md"), long_text("nightshade")).unwrap();
    std::fs::write(dir.join("d.md"), "delta notes mention wintergreen\n").unwrap();
    db(tmp.path()).execute_batch(POISON).unwrap();

    let err = import(&k, lib.id, &dir).unwrap_err();
    assert!(matches!(err, KnowledgeError::Database(_)) && err.to_string().contains("injected failure"), "{err}");
    let docs: Vec<String> = k.list_documents(lib.id).unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(docs, ["notes/a.md", "notes/b.md"], "the files before the failed one stay, nothing after it");
    let conn = db(tmp.path());
    assert_eq!((rows(&conn, "chunks"), rows(&conn, "chunks_fts")), (2, 2), "no row of the failed file");
    assert_eq!(copies(&k, lib.id), 2, "no managed copy of it either");
    assert!(k.search(&[lib.id], "nightshade", 10).unwrap().is_empty());
    assert_eq!(bulk::settings(&conn).unwrap(), IndexSettings::DEFAULT, "index settings restored");

    conn.execute_batch("DROP TRIGGER poison").unwrap();
    let rest = import(&k, lib.id, &dir).unwrap();
    assert_eq!((rest.imported, rest.unchanged), (2, 2));
    assert_eq!(k.search(&[lib.id], "nightshade", 10).unwrap().len(), 1);
    assert_eq!(rows(&conn, "chunks"), rows(&conn, "chunks_fts"));
}

#[test]
fn a_managed_copy_that_cannot_be_written_keeps_the_files_before_it_and_nothing_of_it_or_after() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("notes");
    std::fs::create_dir(&dir).unwrap();
    for name in ["a", "b", "c", "d"] {
        std::fs::write(dir.join(format!("{name}.md")), format!("{name} notes mention wintergreen\n")).unwrap();
    }
    // The third document gets id 3: a folder where its copy goes makes writing the copy fail.
    let library_dir = k.managed_root().join(format!("library-{}", lib.id));
    std::fs::create_dir_all(library_dir.join("3-c.md")).unwrap();

    let err = import(&k, lib.id, &dir).unwrap_err();
    assert!(matches!(err, KnowledgeError::Io { .. }), "{err}");
    let docs: Vec<String> = k.list_documents(lib.id).unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(docs, ["notes/a.md", "notes/b.md"]);
    let conn = db(tmp.path());
    assert_eq!((rows(&conn, "chunks"), rows(&conn, "chunks_fts")), (2, 2));
    assert!(library_dir.join("1-a.md").is_file() && library_dir.join("2-b.md").is_file());
    assert!(!library_dir.join("4-d.md").exists(), "no copy of a file after the failed one");
    assert_eq!(copies(&k, lib.id), 3, "two copies and the folder in the way");
}

#[test]
fn a_replacement_failing_half_written_keeps_the_earlier_version_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("poison-plan.md");
    std::fs::write(&file, long_text("bramblewick")).unwrap();
    assert_eq!(import(&k, lib.id, &file).unwrap().imported, 1);
    let conn = db(tmp.path());
    let chunks = rows(&conn, "chunks");
    let before = k.list_documents(lib.id).unwrap();

    conn.execute_batch(POISON).unwrap();
    std::fs::write(&file, long_text("thistledown")).unwrap();
    assert!(matches!(import(&k, lib.id, &file), Err(KnowledgeError::Database(_))));
    assert_eq!(k.list_documents(lib.id).unwrap(), before, "row, hash and import time unchanged");
    assert_eq!((rows(&conn, "chunks"), rows(&conn, "chunks_fts")), (chunks, chunks));
    assert_eq!(k.search(&[lib.id], "bramblewick", 10).unwrap().len(), 1);
    assert!(k.search(&[lib.id], "thistledown", 10).unwrap().is_empty());
    let text = k.read_document(&[lib.id], before[0].id, 100_000).unwrap().text;
    assert_eq!(text, long_text("bramblewick"), "the managed copy is the indexed version");
}

#[test]
fn an_import_restores_the_merge_settings_and_leaves_its_batches_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Many").unwrap();
    let src = tempfile::tempdir().unwrap();
    // At least five batches, so at least five segments: enough for the merge after the import.
    let files = IMPORT_BATCH_FILES * 4 + 10;
    for i in 0..files {
        std::fs::write(src.path().join(format!("n{i:04}.md")), format!("note {i} about marker{i}\n")).unwrap();
    }
    assert_eq!(import(&k, lib.id, src.path()).unwrap().imported as usize, files);
    let conn = db(tmp.path());
    assert_eq!(bulk::settings(&conn).unwrap(), IndexSettings::DEFAULT);
    // The batches are searchable at once; the merge follows on the maintenance thread.
    assert_eq!(k.search(&[lib.id], &format!("marker{}", files - 1), 5).unwrap().len(), 1);
    k.wait_for_maintenance();
    assert_eq!(segments(&conn), 1, "one segment for the whole import");
    for i in [0, files / 2, files - 1] {
        assert_eq!(k.search(&[lib.id], &format!("marker{i}"), 5).unwrap().len(), 1);
    }
    // A cancelled import puts the settings back too.
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(k.import_path(lib.id, src.path(), &cancel, |_| {}).unwrap().cancelled);
    assert_eq!(bulk::settings(&conn).unwrap(), IndexSettings::DEFAULT);
}

#[test]
fn index_settings_left_by_an_interrupted_import_are_restored_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    drop(open(tmp.path()));
    // What a crash in the middle of an import leaves.
    db(tmp.path())
        .execute_batch(&format!(
            "INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('automerge', 0);
             INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('crisismerge', {BULK_CRISISMERGE});
             INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('hashsize', {BULK_HASHSIZE});"
        ))
        .unwrap();
    assert_eq!(bulk::settings(&db(tmp.path())).unwrap(), IndexSettings::BULK);
    let _k = open(tmp.path());
    assert_eq!(bulk::settings(&db(tmp.path())).unwrap(), IndexSettings::DEFAULT);
}

#[test]
fn an_import_reaches_the_database_file_once_its_log_is_checkpointed_and_checkpoints_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Logged").unwrap();
    let src = tempfile::tempdir().unwrap();
    // About 4 MB of text: far more than the 1000 log pages after which a commit would checkpoint.
    let files = 600;
    for i in 0..files {
        std::fs::write(src.path().join(format!("n{i:04}.md")), long_text(&format!("marker{i}"))).unwrap();
    }
    let text_bytes = files * long_text("marker0").len();
    assert_eq!(import(&k, lib.id, src.path()).unwrap().imported as usize, files);
    k.wait_for_maintenance();
    // Automatic checkpoints were off during the import; the checkpoint after it copied the log.
    let db_file = std::fs::metadata(tmp.path().join("data/knowledge.sqlite")).unwrap().len() as usize;
    assert!(db_file > text_bytes, "database file {db_file} bytes, imported text {text_bytes}");
    let writer_setting: i64 = k.writer().query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0)).unwrap();
    assert_eq!(writer_setting, DEFAULT_WAL_AUTOCHECKPOINT);
    // A second connection sees every file (the log is part of the database at all times).
    assert_eq!(rows(&db(tmp.path()), "documents") as usize, files);
}

#[test]
fn a_service_dropped_while_its_index_merges_closes_and_the_database_opens_again_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Dropped").unwrap();
    let src = tempfile::tempdir().unwrap();
    let files = IMPORT_BATCH_FILES * 3;
    for i in 0..files {
        std::fs::write(src.path().join(format!("n{i:04}.md")), format!("note {i} about marker{i}\n")).unwrap();
    }
    assert_eq!(import(&k, lib.id, src.path()).unwrap().imported as usize, files);
    // The merge has at most begun: dropping ends it after its step and joins the thread.
    drop(k);
    let k = open(tmp.path());
    assert_eq!(bulk::settings(&db(tmp.path())).unwrap(), IndexSettings::DEFAULT);
    for i in [0, files / 2, files - 1] {
        assert_eq!(k.search(&[lib.id], &format!("marker{i}"), 5).unwrap().len(), 1, "marker{i}");
    }
}
