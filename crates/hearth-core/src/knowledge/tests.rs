//! Service tests on real SQLite files and real folders in temp dirs, with the shared fixtures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/knowledge").canonicalize().unwrap()
}

fn open(tmp: &Path) -> KnowledgeService {
    KnowledgeService::open(tmp.join("data/knowledge.sqlite"), tmp.join("managed")).unwrap()
}

fn import(k: &KnowledgeService, library: LibraryId, path: &Path) -> ImportReport {
    k.import_path(library, path, &CancellationToken::new(), |_| {}).unwrap()
}

/// Rows in a table, read through a separate connection (what is really on disk).
fn rows(tmp: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(tmp.join("data/knowledge.sqlite")).unwrap();
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

fn files_under(dir: &Path) -> usize {
    walkdir::WalkDir::new(dir).into_iter().filter(|e| e.as_ref().unwrap().file_type().is_file()).count()
}

fn paths(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.path.as_str()).collect()
}

#[test]
fn importing_the_fixture_folder_reports_progress_that_adds_up_and_skips_binaries_with_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Fixtures").unwrap();
    let mut events = Vec::new();
    let report = k.import_path(lib.id, fixtures(), &CancellationToken::new(), |p| events.push(p)).unwrap();

    assert_eq!((report.imported, report.replaced, report.unchanged, report.cancelled), (5, 0, 0, false));
    let reasons: Vec<(String, String)> = report
        .skipped
        .iter()
        .map(|s| (s.path.file_name().unwrap().to_string_lossy().into_owned(), s.reason.to_string()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons.contains(&("blob.bin".into(), "binary file (contains NUL bytes), not text".into())), "{reasons:?}");
    assert!(reasons.iter().any(|(f, r)| f == "latin1-notes.txt" && r.starts_with("not UTF-8 text")), "{reasons:?}");

    // First event announces the totals; one event per file after it; the last one is complete.
    let first = &events[0];
    assert_eq!((first.files_done, first.files_total, first.bytes_done, first.current.clone()), (0, 7, 0, None));
    assert_eq!(events.len(), 8);
    let last = events.last().unwrap();
    assert_eq!((last.files_done, last.bytes_done), (last.files_total, last.bytes_total));
    let on_disk: u64 = walkdir::WalkDir::new(fixtures())
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(last.bytes_total, on_disk);
    assert!(events.windows(2).all(|w| w[1].files_done == w[0].files_done + 1 && w[1].bytes_done >= w[0].bytes_done));
    assert_eq!(
        report.imported as usize + report.skipped.len(),
        last.files_total as usize,
        "every scanned file is either imported or skipped"
    );

    let docs = k.list_documents(lib.id).unwrap();
    let mut titles: Vec<&str> = docs.iter().map(|d| d.path.as_str()).collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            "knowledge/README.md",
            "knowledge/ember-protocol.md",
            "knowledge/guides/deep/cinder-faq.md",
            "knowledge/src/lantern.rs",
            "knowledge/tidewater-ledger.txt"
        ]
    );
    assert_eq!(k.library(lib.id).unwrap().document_count, 5);
    assert_eq!(files_under(&k.managed_root().join(format!("library-{}", lib.id))), 5, "one managed copy per document");
}

#[test]
fn search_finds_the_right_document_with_a_marked_snippet_and_reads_it() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Fixtures").unwrap();
    import(&k, lib.id, &fixtures());

    let hits = k.search(&[lib.id], "zephyrine", 10).unwrap();
    assert_eq!(paths(&hits), ["knowledge/ember-protocol.md"], "skipped files must not be found");
    assert!(hits[0].snippet.contains("«zephyrine»"), "{}", hits[0].snippet);
    assert!(hits[0].score > 0.0);

    for (query, expected) in [
        ("marrowgloam wax", "knowledge/tidewater-ledger.txt"),
        ("kindle_lantern_quorum", "knowledge/src/lantern.rs"),
        ("Where is the Cinder archive kept", "knowledge/guides/deep/cinder-faq.md"),
        ("ashv*", "knowledge/guides/deep/cinder-faq.md"),
        ("ember protocol default port", "knowledge/ember-protocol.md"),
    ] {
        let hits = k.search(&[lib.id], query, 3).unwrap();
        assert_eq!(hits.first().map(|h| h.path.as_str()), Some(expected), "{query}: {hits:?}");
    }
    // A natural question whose words are not all in one chunk still finds the fact (any-word fallback).
    let hits = k.search(&[lib.id], "which wax seals ledgers nowadays?", 3).unwrap();
    assert_eq!(hits[0].path, "knowledge/tidewater-ledger.txt");

    let doc = k.read_document(&[lib.id], hits[0].document_id, 100_000).unwrap();
    assert!(doc.text.contains("every 41 days the current ledger is closed and sealed with marrowgloam wax") && !doc.truncated);
    let cut = k.read_document(&[lib.id], hits[0].document_id, 20).unwrap();
    assert_eq!((cut.text.as_str(), cut.truncated), ("Tidewater ledger han", true));
    assert!(k.search(&[lib.id], "nothing-matches-this-xyzzy", 10).unwrap().is_empty());
}

#[test]
fn a_search_or_read_limited_to_library_a_never_sees_library_b() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let a = k.create_library("A").unwrap();
    let b = k.create_library("B").unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("a.md"), "alpha notes: the shared term is gossamerine\n").unwrap();
    std::fs::write(src.path().join("b.md"), "beta notes: the shared term is gossamerine, twice gossamerine\n").unwrap();
    import(&k, a.id, &src.path().join("a.md"));
    import(&k, b.id, &src.path().join("b.md"));

    let only_a = k.search(&[a.id], "gossamerine", 50).unwrap();
    assert_eq!(paths(&only_a), ["a.md"]);
    assert!(only_a.iter().all(|h| h.library_id == a.id));
    let both = k.search(&[a.id, b.id, a.id], "gossamerine", 50).unwrap();
    assert_eq!(both.len(), 2);
    assert!(k.search(&[], "gossamerine", 50).unwrap().is_empty(), "no grant, no hits");
    assert!(k.search(&[LibraryId(9999)], "gossamerine", 50).unwrap().is_empty());

    let b_doc = both.iter().find(|h| h.library_id == b.id).unwrap().document_id;
    let err = k.read_document(&[a.id], b_doc, 1000).unwrap_err();
    assert!(matches!(err, KnowledgeError::DocumentNotFound(_)), "{err}");
    assert!(k.read_document(&[b.id], b_doc, 1000).unwrap().text.contains("beta notes"));
    let too_many: Vec<LibraryId> = (0..=MAX_SEARCH_LIBRARIES as i64).map(LibraryId).collect();
    assert!(matches!(k.search(&too_many, "x", 1), Err(KnowledgeError::TooManyLibraries { .. })));
}

#[test]
fn fts_syntax_in_queries_never_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Fixtures").unwrap();
    import(&k, lib.id, &fixtures());
    let nasty = [
        "\"", "\"\"", "zephyrine\"", "*", "zephyrine*", "**", "AND", "OR", "NOT", "a AND", "OR b", "NOT NOT", "NEAR(a b)",
        "title:ember", ":", "body:", "(", ")", "((zephyrine", "-zephyrine", "+", "^ember", "{title body}: ember",
        "ember - protocol", "'; DROP TABLE documents; --", "\0", "zephyrine\0x", "\u{feff}", "…«»", "日本語 テキスト",
        "ember OR", "\"ember protocol\"", "ember:protocol", "a\"b\"c", "",
    ];
    for q in nasty {
        let hits = k.search(&[lib.id], q, 10).unwrap_or_else(|e| panic!("{q:?}: {e}"));
        assert!(hits.len() <= 10);
    }
    // Syntax characters are read as text around the words: these still find the document.
    for q in ["zephyrine\"", "((zephyrine", "-zephyrine", "zephyrine:", "\"zephyrine\" AND"] {
        let hits = k.search(&[lib.id], q, 10).unwrap();
        assert_eq!(paths(&hits), ["knowledge/ember-protocol.md"], "{q:?}");
    }
}

#[test]
fn a_word_found_everywhere_does_not_drown_the_words_that_matter() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Common").unwrap();
    let src = tempfile::tempdir().unwrap();
    for i in 0..6 {
        std::fs::write(src.path().join(format!("n{i}.md")), format!("note {i}: hearth hearth hearth\n")).unwrap();
    }
    std::fs::write(src.path().join("odd.md"), "the quillon is forged cold\n").unwrap();
    import(&k, lib.id, src.path());
    // "hearth" is in most chunks and "quillon" never beside it: every-word matching finds nothing,
    // and any-word matching would list all the notes. Dropping the everywhere-word finds the one.
    let hits = k.search(&[lib.id], "hearth quillon", 10).unwrap();
    assert_eq!(paths(&hits), [format!("{}/odd.md", src.path().file_name().unwrap().to_string_lossy())]);
    // A query of only such words still searches them.
    assert_eq!(k.search(&[lib.id], "hearth note", 10).unwrap().len(), 6);
}

#[test]
fn hits_are_one_per_document_and_the_limit_is_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Many").unwrap();
    let src = tempfile::tempdir().unwrap();
    for i in 0..MAX_SEARCH_LIMIT + 10 {
        // Each file spans several chunks that all hold the word.
        let text: String = (0..200).map(|line| format!("file {i} line {line} mentions larkspur\n")).collect();
        std::fs::write(src.path().join(format!("f{i:03}.txt")), text).unwrap();
    }
    assert_eq!(import(&k, lib.id, src.path()).imported as usize, MAX_SEARCH_LIMIT + 10);
    assert!(rows(tmp.path(), "chunks") > 2 * (MAX_SEARCH_LIMIT as i64 + 10));
    let hits = k.search(&[lib.id], "larkspur", usize::MAX).unwrap();
    assert_eq!(hits.len(), MAX_SEARCH_LIMIT);
    let mut ids: Vec<_> = hits.iter().map(|h| h.document_id).collect();
    ids.dedup();
    assert_eq!(ids.len(), MAX_SEARCH_LIMIT, "one hit per document");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score), "best first");
    assert_eq!(k.search(&[lib.id], "larkspur", 3).unwrap().len(), 3);
    assert!(k.search(&[lib.id], "larkspur", 0).unwrap().is_empty());
}

#[test]
fn reimporting_a_changed_file_replaces_its_chunks_and_an_unchanged_one_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join("plan.md");
    // Long enough for several chunks, so replacing must drop all of them.
    let old: String = (0..200).map(|i| format!("line {i}: the old codename is bramblewick\n")).collect();
    std::fs::write(&file, &old).unwrap();
    assert_eq!(import(&k, lib.id, &file).imported, 1);
    let chunks_before = rows(tmp.path(), "chunks");
    assert!(chunks_before > 1);
    let before = k.list_documents(lib.id).unwrap();
    assert_eq!(k.search(&[lib.id], "bramblewick", 10).unwrap().len(), 1, "one hit for a many-chunk document");

    let again = import(&k, lib.id, &file);
    assert_eq!((again.imported, again.replaced, again.unchanged), (0, 0, 1));
    assert_eq!(k.list_documents(lib.id).unwrap(), before, "unchanged: not even the import time moves");
    assert_eq!(rows(tmp.path(), "chunks"), chunks_before);

    std::fs::write(&file, "the new codename is thistledown\n").unwrap();
    let changed = import(&k, lib.id, &file);
    assert_eq!((changed.imported, changed.replaced), (0, 1));
    assert!(k.search(&[lib.id], "bramblewick", 10).unwrap().is_empty(), "old text is gone");
    let hits = k.search(&[lib.id], "thistledown", 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].document_id, before[0].id, "same document, replaced in place");
    assert_eq!(rows(tmp.path(), "chunks"), 1);
    assert_eq!(rows(tmp.path(), "chunks_fts"), 1);
    assert_eq!(k.read_document(&[lib.id], hits[0].document_id, 1000).unwrap().text, "the new codename is thistledown\n");

    // Growing again: the new chunks take the ids of the old one and beyond.
    let grown: String = (0..300).map(|i| format!("line {i}: the third codename is marrowlight\n")).collect();
    std::fs::write(&file, &grown).unwrap();
    assert_eq!(import(&k, lib.id, &file).replaced, 1);
    assert!(k.search(&[lib.id], "thistledown", 10).unwrap().is_empty(), "the one-chunk version is gone");
    assert_eq!(k.search(&[lib.id], "marrowlight", 10).unwrap().len(), 1);
    let chunks = rows(tmp.path(), "chunks");
    assert!(chunks > chunks_before, "{chunks} chunks");
    assert_eq!(rows(tmp.path(), "chunks_fts"), chunks);
    k.wait_for_maintenance();
    let conn = rusqlite::Connection::open(tmp.path().join("data/knowledge.sqlite")).unwrap();
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')", []).expect("the index matches its rows");
}

#[test]
fn the_managed_copy_outlives_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("moving.txt"), "this note mentions quarrystone\n").unwrap();
    import(&k, lib.id, &src.path().join("moving.txt"));
    drop(src);
    let hit = &k.search(&[lib.id], "quarrystone", 5).unwrap()[0];
    assert_eq!(k.read_document(&[lib.id], hit.document_id, 1000).unwrap().text, "this note mentions quarrystone\n");
}

#[test]
fn deleting_a_library_removes_its_rows_and_managed_copies_only() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let gone = k.create_library("Gone").unwrap();
    let kept = k.create_library("Kept").unwrap();
    import(&k, gone.id, &fixtures());
    import(&k, kept.id, &fixtures().join("ember-protocol.md"));
    let gone_dir = k.managed_root().join(format!("library-{}", gone.id));
    assert_eq!(files_under(&gone_dir), 5);

    k.delete_library(gone.id).unwrap();
    assert!(!gone_dir.exists());
    assert_eq!(k.list_libraries().unwrap().iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["Kept"]);
    assert_eq!(rows(tmp.path(), "documents"), 1);
    let kept_chunks = rows(tmp.path(), "chunks");
    assert_eq!(rows(tmp.path(), "chunks_fts"), kept_chunks);
    assert!(k.search(&[gone.id], "marrowgloam", 10).unwrap().is_empty());
    assert_eq!(k.search(&[gone.id, kept.id], "zephyrine", 10).unwrap().len(), 1);
    assert!(matches!(k.delete_library(gone.id), Err(KnowledgeError::LibraryNotFound(_))));
    // A deletion writes with the import settings; done or refused, it puts them back.
    k.wait_for_maintenance();
    let conn = rusqlite::Connection::open(tmp.path().join("data/knowledge.sqlite")).unwrap();
    assert_eq!(bulk::settings(&conn).unwrap(), IndexSettings::DEFAULT);
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')", []).expect("the index matches its rows");
    let err = k.import_path(gone.id, fixtures(), &CancellationToken::new(), |_| {}).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");

    // Deleting one document removes its copy too.
    let doc = k.list_documents(kept.id).unwrap()[0].id;
    k.delete_document(doc).unwrap();
    assert_eq!(files_under(&k.managed_root().join(format!("library-{}", kept.id))), 0);
    assert!(k.search(&[kept.id], "zephyrine", 10).unwrap().is_empty());
    assert_eq!((rows(tmp.path(), "chunks"), rows(tmp.path(), "chunks_fts")), (0, 0));
    assert!(matches!(k.delete_document(doc), Err(KnowledgeError::DocumentNotFound(_))));
}

#[test]
fn deleting_a_document_takes_its_own_chunks_and_none_of_its_neighbours() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Fixtures").unwrap();
    import(&k, lib.id, &fixtures());
    let documents = k.list_documents(lib.id).unwrap();
    let mut ids: Vec<i64> = documents.iter().map(|d| d.id.0).collect();
    ids.sort();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "one import numbers its documents in a row: {ids:?}");
    let chunks_of = |id: i64| -> i64 {
        let conn = rusqlite::Connection::open(tmp.path().join("data/knowledge.sqlite")).unwrap();
        conn.query_row("SELECT count(*) FROM chunks WHERE document_id = ?1", [id], |r| r.get(0)).unwrap()
    };
    let middle = ids[ids.len() / 2];
    let (before, gone) = (rows(tmp.path(), "chunks"), chunks_of(middle));
    assert!(gone > 0);

    k.delete_document(DocumentId(middle)).unwrap();
    assert_eq!(chunks_of(middle), 0);
    assert_eq!(rows(tmp.path(), "chunks"), before - gone);
    assert_eq!(rows(tmp.path(), "chunks_fts"), before - gone);
    for &neighbour in [middle - 1, middle + 1].iter() {
        assert!(chunks_of(neighbour) > 0, "document {neighbour} kept its chunks");
    }
}

#[test]
fn paths_leading_outside_the_managed_root_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Notes").unwrap();
    import(&k, lib.id, &fixtures().join("ember-protocol.md"));
    let doc = k.list_documents(lib.id).unwrap()[0].id;

    // A stored path tampered into a traversal or an absolute path is refused, not read.
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "do not read").unwrap();
    let conn = rusqlite::Connection::open(tmp.path().join("data/knowledge.sqlite")).unwrap();
    for bad in ["../secret.txt".to_string(), secret.display().to_string(), format!("library-{}/../../secret.txt", lib.id)] {
        conn.execute("UPDATE documents SET managed_path = ?1", [&bad]).unwrap();
        let err = k.read_document(&[lib.id], doc, 1000).unwrap_err();
        assert!(matches!(err, KnowledgeError::OutsideRoot { .. }), "{bad}: {err}");
    }

    // A library folder swapped for a symlink out of the root: the import refuses to write through it.
    let other = k.create_library("Other").unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, k.managed_root().join(format!("library-{}", other.id))).unwrap();
    let err = k.import_path(other.id, fixtures().join("ember-protocol.md"), &CancellationToken::new(), |_| {}).unwrap_err();
    assert!(matches!(err, KnowledgeError::OutsideRoot { .. }), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing written outside");
    assert!(k.list_documents(other.id).unwrap().is_empty(), "the refused file left no row");
    assert_eq!(rows(tmp.path(), "chunks"), rows(tmp.path(), "chunks_fts"));
}

#[test]
fn symlinks_hidden_files_huge_files_and_empty_files_in_a_folder_are_skipped_with_reasons() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Mixed").unwrap();
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("mixed");
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    std::fs::create_dir_all(dir.join("node_modules/pkg")).unwrap();
    std::fs::write(dir.join(".git/config"), "hidden folder").unwrap();
    std::fs::write(dir.join("node_modules/pkg/index.js"), "dependency").unwrap();
    std::fs::write(dir.join(".env"), "API_KEY=secret").unwrap();
    std::fs::write(dir.join("empty.md"), "  \n").unwrap();
    std::fs::write(dir.join("huge.txt"), "a".repeat(MAX_DOCUMENT_BYTES as usize + 1)).unwrap();
    std::fs::write(tmp.path().join("outside.md"), "outside the import").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside.md"), dir.join("link.md")).unwrap();
    std::fs::write(dir.join("ok.md"), "the only real document").unwrap();

    let report = import(&k, lib.id, &dir);
    assert_eq!(report.imported, 1);
    let skipped: Vec<(String, String)> = report
        .skipped
        .iter()
        .map(|s| (s.path.strip_prefix(&dir).unwrap().display().to_string(), s.reason.to_string()))
        .collect();
    let reason = |name: &str| skipped.iter().find(|(p, _)| p == name).map(|(_, r)| r.as_str()).unwrap_or("not skipped");
    assert!(reason(".git").starts_with("hidden"), "{skipped:?}");
    assert!(reason(".env").starts_with("hidden"));
    assert!(reason("node_modules").starts_with("dependency or build folder"));
    assert!(reason("empty.md").starts_with("empty"));
    assert_eq!(reason("huge.txt"), "too large (4.0 MiB; documents may be at most 4 MiB)");
    assert!(reason("link.md").starts_with("symbolic link"));
    assert_eq!(skipped.len(), 6, "{skipped:?}");
    assert!(k.search(&[lib.id], "secret", 5).unwrap().is_empty());
    assert!(k.search(&[lib.id], "outside", 5).unwrap().is_empty());

    // Importing a missing path is a clear error.
    let err = k.import_path(lib.id, src.path().join("nope"), &CancellationToken::new(), |_| {}).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn cancelling_stops_before_the_next_file_and_keeps_finished_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    let lib = k.create_library("Fixtures").unwrap();
    let cancel = CancellationToken::new();
    let mut events = 0;
    let report = k
        .import_path(lib.id, fixtures(), &cancel, |p| {
            events += 1;
            if p.files_done == 2 {
                cancel.cancel();
            }
        })
        .unwrap();
    assert!(report.cancelled);
    assert_eq!(events, 3, "the scan event and two files");
    // Sorted by name: README.md imported, blob.bin skipped, then cancelled.
    assert_eq!((report.imported, report.skipped.len()), (1, 1));
    assert_eq!(k.list_documents(lib.id).unwrap().len(), 1);
    // Importing again finishes the job.
    let rest = import(&k, lib.id, &fixtures());
    assert_eq!((rest.imported, rest.unchanged), (4, 1));
}

#[test]
fn reopening_the_database_keeps_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let (lib, doc) = {
        let k = open(tmp.path());
        let lib = k.create_library("Kept").unwrap();
        k.rename_library(lib.id, "  Kept forever ").unwrap();
        import(&k, lib.id, &fixtures());
        (lib.id, k.search(&[lib.id], "zephyrine", 1).unwrap()[0].document_id)
    };
    let k = open(tmp.path());
    let libs = k.list_libraries().unwrap();
    assert_eq!((libs.len(), libs[0].name.as_str(), libs[0].document_count), (1, "Kept forever", 5));
    assert_eq!(k.search(&[lib], "zephyrine", 1).unwrap()[0].document_id, doc);
    assert!(k.read_document(&[lib], doc, 10_000).unwrap().text.contains("port of the Ember Protocol is 7719"));
    assert_eq!(import(&k, lib, &fixtures()).unchanged, 5, "hashes survived too");
}

#[test]
fn an_existing_version_zero_database_is_migrated_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("data/knowledge.sqlite");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE unrelated (x); INSERT INTO unrelated VALUES (1);").unwrap();
        assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), 0);
    }
    let k = open(tmp.path());
    let lib = k.create_library("After migration").unwrap();
    import(&k, lib.id, &fixtures().join("tidewater-ledger.txt"));
    assert_eq!(k.search(&[lib.id], "marrowgloam", 5).unwrap().len(), 1);
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), SCHEMA_VERSION);
    assert_eq!(conn.query_row("SELECT x FROM unrelated", [], |r| r.get::<_, i64>(0)).unwrap(), 1, "data kept");
    assert_eq!(conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).unwrap(), "wal");
}

#[test]
fn library_names_are_checked_and_renames_of_missing_libraries_fail_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let k = open(tmp.path());
    for bad in ["", "   ", &"x".repeat(MAX_LIBRARY_NAME_CHARS + 1)] {
        let err = k.create_library(bad).unwrap_err();
        assert!(err.to_string().starts_with("A library needs a name"), "{err}");
    }
    let err = k.rename_library(LibraryId(42), "x").unwrap_err();
    assert_eq!(err.to_string(), "The knowledge library 42 does not exist (it may have been deleted).");
    let b = k.create_library("beta").unwrap();
    let a = k.create_library("Alpha").unwrap();
    assert_eq!(k.list_libraries().unwrap().iter().map(|l| l.id).collect::<Vec<_>>(), [a.id, b.id], "sorted by name");
}

#[test]
fn searches_racing_a_library_deletion_end_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let k = Arc::new(open(tmp.path()));
    let lib = k.create_library("Doomed").unwrap();
    import(&k, lib.id, &fixtures());
    let doc = k.search(&[lib.id], "zephyrine", 1).unwrap()[0].document_id;
    const SEARCHERS: usize = 3;
    let started = Arc::new(std::sync::Barrier::new(SEARCHERS + 1));
    let searchers: Vec<_> = (0..SEARCHERS)
        .map(|_| {
            let (k, started) = (Arc::clone(&k), Arc::clone(&started));
            std::thread::spawn(move || {
                assert_eq!(k.search(&[lib.id], "zephyrine", 5).unwrap().len(), 1);
                started.wait();
                // Search and read until the deletion shows; every answer is a result or a clean miss.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let hits = k.search(&[lib.id], "zephyrine", 5).expect("a search never errors");
                    match k.read_document(&[lib.id], doc, 100) {
                        Ok(d) => assert!(d.text.starts_with("# The Ember")),
                        Err(KnowledgeError::DocumentNotFound(_)) => {}
                        Err(e) => panic!("unclean error: {e}"),
                    }
                    if hits.is_empty() {
                        return true;
                    }
                    if std::time::Instant::now() > deadline {
                        return false;
                    }
                }
            })
        })
        .collect();
    started.wait();
    k.delete_library(lib.id).unwrap();
    for s in searchers {
        assert!(s.join().expect("no panic"), "the deletion became visible to every searcher");
    }
    assert!(k.search(&[lib.id], "zephyrine", 5).unwrap().is_empty());
}

#[tokio::test]
async fn async_callers_use_the_blocking_helper() {
    let tmp = tempfile::tempdir().unwrap();
    let k = Arc::new(open(tmp.path()));
    let lib = k.blocking(|k| k.create_library("Async")).await.unwrap();
    let report = k
        .blocking(move |k| k.import_path(lib.id, fixtures().join("src"), &CancellationToken::new(), |_| {}))
        .await
        .unwrap();
    assert_eq!(report.imported, 1);
    let hits = k.blocking(move |k| k.search(&[lib.id], "kindle_lantern_quorum", 5)).await.unwrap();
    assert_eq!(paths(&hits), ["src/lantern.rs"]);
}
