//! Search gives the hits it gave before it was made faster: the same documents in the same order,
//! with the same snippets and scores. The reference below is the earlier implementation: the library
//! filter inside the FTS5 expression, common words looked up in the vocabulary table every time.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use tokio_util::sync::CancellationToken;

use super::search::CHUNK_ID_BITS;
use super::*;

/// Document, library, path, snippet, score.
type Hit = (i64, i64, String, String, f64);

fn reference_ranked(conn: &Connection, expression: &str, libraries: &[i64], limit: usize) -> Vec<Hit> {
    let scopes: Vec<String> = libraries.iter().map(|id| format!("\"lib{id}\"")).collect();
    let text_only = format!("{{title body}} : ({expression})");
    let full = format!("{text_only} AND scope : ({})", scopes.join(" OR "));
    let mut best = conn
        .prepare(&format!(
            "SELECT rowid >> {CHUNK_ID_BITS} AS document, rowid, min(rank) AS best FROM chunks_fts
             WHERE chunks_fts MATCH ?1 GROUP BY document ORDER BY best LIMIT ?2"
        ))
        .unwrap();
    let rows: Vec<(i64, i64, f64)> =
        best.query_map(params![full, limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    let snippet_sql = format!(
        "SELECT snippet(chunks_fts, 1, '«', '»', '…', {SNIPPET_TOKENS}) FROM chunks_fts WHERE chunks_fts MATCH ?1 AND rowid = ?2"
    );
    rows.into_iter()
        .map(|(id, chunk, rank)| {
            let (library, path): (i64, String) =
                conn.query_row("SELECT library_id, title FROM documents WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            let snippet: String = conn.query_row(&snippet_sql, params![text_only, chunk], |r| r.get(0)).unwrap();
            (id, library, path, snippet, -rank)
        })
        .collect()
}

fn reference_search(conn: &Connection, libraries: &[i64], query: &str, limit: usize) -> Vec<Hit> {
    let mut terms = terms(query);
    if terms.len() >= 2 {
        let chunks: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
        let rare: Vec<Term> = terms
            .iter()
            .filter(|t| match &t.token {
                Some(token) => {
                    let rows: i64 =
                        conn.query_row("SELECT doc FROM chunks_vocab WHERE term = ?1", [token], |r| r.get(0)).optional().unwrap().unwrap_or(0);
                    rows as f64 <= chunks as f64 * COMMON_TERM_SHARE
                }
                None => true,
            })
            .cloned()
            .collect();
        if !rare.is_empty() {
            terms = rare;
        }
    }
    let Some(all) = expression(&terms, MatchMode::All) else { return Vec::new() };
    let mut hits = reference_ranked(conn, &all, libraries, limit);
    if hits.is_empty() && terms.len() > 1 {
        hits = reference_ranked(conn, &expression(&terms, MatchMode::Any).unwrap(), libraries, limit);
    }
    hits
}

/// Deterministic words with a skewed frequency, as in prose (xorshift; the benchmark's generator).
struct Words(u64);
impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn word(&mut self) -> String {
        let u = self.below(1 << 16) as f64 / 65536.0;
        name((u * u * u * 400.0) as u64)
    }
}

fn name(rank: u64) -> String {
    const SYLLABLES: [&str; 8] = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "or"];
    let (mut n, mut w) = (rank + 8, String::new());
    while n > 0 {
        w.push_str(SYLLABLES[(n % 8) as usize]);
        n /= 8;
    }
    w
}

/// Two libraries of documents of one to three chunks, fewer chunks in all than
/// [`COMMON_QUERY_CHUNKS`], so that a query of common words ranks every match as it did before.
fn corpus(root: &Path, words: &mut Words) {
    for i in 0..180 {
        let dir = root.join(if i % 4 == 0 { "b" } else { "a" }).join(format!("t{}", i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = format!("# Note {i}\nmarker{i} here\n");
        for _ in 0..5 + words.below(70) {
            let line: Vec<String> = (0..8).map(|_| words.word()).collect();
            text.push_str(&line.join(" "));
            text.push('\n');
        }
        std::fs::write(dir.join(format!("n{i}.md")), text).unwrap();
    }
}

#[test]
fn search_gives_the_same_hits_snippets_and_scores_as_the_earlier_implementation() {
    let tmp = tempfile::tempdir().unwrap();
    let k = KnowledgeService::open(tmp.path().join("k.sqlite"), tmp.path().join("managed")).unwrap();
    let (a, b) = (k.create_library("A").unwrap().id, k.create_library("B").unwrap().id);
    let src = tempfile::tempdir().unwrap();
    let mut words = Words(0x9E37_79B9_7F4A_7C15);
    corpus(src.path(), &mut words);
    let none = CancellationToken::new();
    k.import_path(a, src.path().join("a"), &none, |_| {}).unwrap();
    k.import_path(b, src.path().join("b"), &none, |_| {}).unwrap();
    let conn = Connection::open(tmp.path().join("k.sqlite")).unwrap();
    let chunks: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
    assert!(chunks > 100 && chunks < COMMON_QUERY_CHUNKS as i64, "{chunks} chunks");

    let mut queries = vec![
        "marker17".to_string(),
        "marker8 marker9".to_string(),
        "a/t3/n10.md".to_string(),
        name(0),
        format!("{} {}", name(0), name(1)),
        format!("{} {}", name(1), name(1)),
    ];
    for _ in 0..40 {
        let content = |w: &mut Words| name(20 + w.below(200));
        let everyday = |w: &mut Words| name(w.below(4));
        queries.push(format!("{} {}", content(&mut words), content(&mut words)));
        queries.push(format!("{} {} {} {}?", everyday(&mut words), content(&mut words), everyday(&mut words), content(&mut words)));
        queries.push(format!("{}* {}", &content(&mut words)[..3], content(&mut words)));
    }
    let mut compared = 0;
    for query in &queries {
        for (scope, limit) in [(vec![a.0], 10), (vec![a.0, b.0], 50), (vec![b.0], 3)] {
            let expected = reference_search(&conn, &scope, query, limit);
            let scope_ids: Vec<LibraryId> = scope.iter().map(|&id| LibraryId(id)).collect();
            let got: Vec<Hit> = k
                .search(&scope_ids, query, limit)
                .unwrap()
                .into_iter()
                .map(|h| (h.document_id.0, h.library_id.0, h.path, h.snippet, h.score))
                .collect();
            assert_eq!(got, expected, "{query:?} in {scope:?}");
            compared += got.len();
        }
    }
    assert!(compared > 500, "the queries found too little to compare: {compared} hits");
}

#[test]
fn a_query_of_only_common_words_ranks_the_most_recent_matches() {
    let tmp = tempfile::tempdir().unwrap();
    let k = KnowledgeService::open(tmp.path().join("k.sqlite"), tmp.path().join("managed")).unwrap();
    let lib = k.create_library("Notes").unwrap();
    let src = tempfile::tempdir().unwrap();
    let files = COMMON_QUERY_CHUNKS + 100;
    for i in 0..files {
        std::fs::write(src.path().join(format!("n{i:04}.md")), format!("hearth note {i}\n")).unwrap();
    }
    k.import_path(lib.id, src.path(), &CancellationToken::new(), |_| {}).unwrap();
    let docs = k.list_documents(lib.id).unwrap();
    let mut ids: Vec<i64> = docs.iter().map(|d| d.id.0).collect();
    ids.sort_unstable();
    let oldest_ranked = ids[files - COMMON_QUERY_CHUNKS];
    for query in ["hearth", "hearth note", "note hearth note"] {
        let hits = k.search(&[lib.id], query, 20).unwrap();
        assert_eq!(hits.len(), 20, "{query}");
        assert!(hits.iter().all(|h| h.document_id.0 >= oldest_ranked), "{query}: only the most recent are ranked");
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score && w[0].document_id != w[1].document_id));
    }
    // A rarer word still finds any document, old ones included.
    assert_eq!(k.search(&[lib.id], "hearth 3", 5).unwrap().len(), 1);
}
