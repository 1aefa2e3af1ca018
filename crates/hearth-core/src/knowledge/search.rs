//! Ranked search and reading, always within the libraries a caller may read.

use std::io::Read;
use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::error::KnowledgeError;
use super::import::MAX_DOCUMENT_BYTES;
use super::managed;
use super::query::{expression, terms, MatchMode, Term};
use super::service::KnowledgeService;
use super::types::{Document, DocumentId, LibraryId, SearchHit};

/// Most hits one search returns.
pub const MAX_SEARCH_LIMIT: usize = 50;
/// Most libraries one search or read may cover (a grant lists them; the SQL binds each).
pub const MAX_SEARCH_LIBRARIES: usize = 256;
/// Most bytes of text one read returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// A word found in more than this share of all chunks is left out of the match when the query has
/// rarer words: bm25 gives it no weight (its idf is floored at that point), so it only costs time.
/// Which words are common is remembered per state of the index (see `frequency.rs`).
pub const COMMON_TERM_SHARE: f64 = 0.5;
/// When every word of a query is common, only this many matching chunks are ranked, the most
/// recently imported first: bm25 gives such words no weight, so ranking every match (most of the
/// index: 25,000 chunks and 20-40 ms in the benchmark) buys an order that means little.
pub const COMMON_QUERY_CHUNKS: usize = 512;
/// Tokens of context in a snippet.
pub const SNIPPET_TOKENS: i64 = 24;
/// Low bits of a chunk's row id holding its number within the document (see the schema). A document
/// has fewer chunks than bytes, and at most [`MAX_DOCUMENT_BYTES`] bytes.
pub(crate) const CHUNK_ID_BITS: u32 = 23;
const _: () = assert!(MAX_DOCUMENT_BYTES < 1 << CHUNK_ID_BITS);

/// Row id of a document's `seq`-th chunk.
pub(crate) fn chunk_id(document: DocumentId, seq: usize) -> i64 {
    (document.0 << CHUNK_ID_BITS) | seq as i64
}

/// The token in the `scope` column of every chunk of `library`.
pub(crate) fn scope_token(library: LibraryId) -> String {
    format!("lib{}", library.0)
}

/// `(?2, ?3, …)` for the library ids, which follow the first `first` parameters.
fn placeholders(first: usize, count: usize) -> String {
    let list: Vec<String> = (0..count).map(|i| format!("?{}", first + 1 + i)).collect();
    format!("({})", list.join(", "))
}

fn checked_libraries(libraries: &[LibraryId]) -> Result<Vec<i64>, KnowledgeError> {
    let mut ids: Vec<i64> = libraries.iter().map(|l| l.0).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() > MAX_SEARCH_LIBRARIES {
        return Err(KnowledgeError::TooManyLibraries { max: MAX_SEARCH_LIBRARIES });
    }
    Ok(ids)
}

/// The user's words may match the path or the text only (never the scope column).
fn text_filter(expression: &str) -> String {
    format!("{{title body}} : ({expression})")
}

/// Best chunk per document for `expression`, best documents first, only in `libraries`; with `bound`,
/// only the `bound` most recently imported matching chunks are ranked. The library filter is on the
/// chunk rows, bound as parameters, and each hit's library is checked again against the documents.
/// (It used to be a token in the FTS expression: bm25 then counted that token's rows, every chunk of
/// the granted libraries, on every search, for a column weighted zero. The scores are the same.)
fn ranked(
    conn: &Connection,
    expression: &str,
    libraries: &[i64],
    limit: usize,
    bound: Option<usize>,
) -> Result<Vec<SearchHit>, KnowledgeError> {
    let text_only = text_filter(expression);
    let in_libraries = placeholders(3, libraries.len());
    // Both statements take ?1 the expression, ?2 a count, ?3 the lowest chunk ranked (unused by the
    // first: parameters count up to the largest number, so it is bound anyway), then the libraries.
    let params = |count: usize, lowest: i64| {
        let leading = [Value::from(text_only.clone()), Value::from(count as i64), Value::from(lowest)];
        params_from_iter(leading.into_iter().chain(libraries.iter().map(|&id| Value::from(id))))
    };
    // The `bound`-th most recent match, found without ranking (FTS5 walks its row ids backwards).
    let lowest = match bound {
        Some(bound) if bound > 0 => {
            let mut nth = conn.prepare_cached(&format!(
                "SELECT chunks_fts.rowid FROM chunks_fts CROSS JOIN chunks ON chunks.id = chunks_fts.rowid
                 WHERE chunks_fts MATCH ?1 AND chunks.library_id IN {in_libraries}
                 ORDER BY chunks_fts.rowid DESC LIMIT 1 OFFSET ?2"
            ))?;
            nth.query_row(params(bound - 1, 0), |r| r.get(0)).optional()?.unwrap_or(0)
        }
        _ => 0,
    };
    // min(rank) makes the bare rowid the document's best chunk (an SQLite rule for min/max). CROSS
    // JOIN keeps the index as the outer loop: one chunk row lookup per match.
    let mut best = conn.prepare_cached(&format!(
        "SELECT chunks_fts.rowid >> {CHUNK_ID_BITS} AS document, chunks_fts.rowid, min(rank) AS best
         FROM chunks_fts CROSS JOIN chunks ON chunks.id = chunks_fts.rowid
         WHERE chunks_fts MATCH ?1 AND chunks_fts.rowid >= ?3 AND chunks.library_id IN {in_libraries}
         GROUP BY document ORDER BY best LIMIT ?2"
    ))?;
    let rows: Vec<(i64, i64, f64)> =
        best.query_map(params(limit, lowest), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
    let mut document = conn.prepare_cached("SELECT library_id, title FROM documents WHERE id = ?1")?;
    let mut snippet = conn.prepare_cached(&format!(
        "SELECT snippet(chunks_fts, 1, '«', '»', '…', {SNIPPET_TOKENS}) FROM chunks_fts WHERE chunks_fts MATCH ?1 AND rowid = ?2"
    ))?;
    let mut hits = Vec::with_capacity(rows.len());
    for (id, chunk, rank) in rows {
        let Some((library, path)) = document.query_row([id], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?))).optional()? else {
            continue;
        };
        if libraries.binary_search(&library).is_err() {
            tracing::error!(document = id, library, "knowledge chunk rows disagree with the documents table; hit dropped");
            continue;
        }
        let snippet: String = snippet.query_row(params![text_only, chunk], |r| r.get(0)).optional()?.unwrap_or_default();
        hits.push(SearchHit { document_id: DocumentId(id), library_id: LibraryId(library), path, snippet, score: -rank });
    }
    Ok(hits)
}

impl KnowledgeService {
    /// Search `libraries` for `query` (any text; it is never FTS syntax), at most `limit` hits (capped
    /// at [`MAX_SEARCH_LIMIT`]), one per document, best first. Every word must match; if no chunk has
    /// them all, chunks with any of them are ranked instead. Common words (see [`COMMON_TERM_SHARE`])
    /// are left out while rarer ones remain; a query of only common words ranks the most recent
    /// [`COMMON_QUERY_CHUNKS`] chunks that match. Unknown or deleted libraries give no hits.
    pub fn search(&self, libraries: &[LibraryId], query: &str, limit: usize) -> Result<Vec<SearchHit>, KnowledgeError> {
        let libraries = checked_libraries(libraries)?;
        let limit = limit.min(MAX_SEARCH_LIMIT);
        if libraries.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let conn = self.reader()?;
        // One read transaction: every statement of this search sees the same snapshot.
        let tx = conn.unchecked_transaction()?;
        let terms = terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let common = self.frequencies.common(&tx, &terms)?;
        let only_common = common.iter().all(|&c| c);
        let terms: Vec<Term> =
            if only_common { terms } else { terms.into_iter().zip(common).filter(|(_, common)| !common).map(|(t, _)| t).collect() };
        let bound = only_common.then_some(COMMON_QUERY_CHUNKS);
        let all = expression(&terms, MatchMode::All).expect("terms are not empty");
        let mut hits = ranked(&tx, &all, &libraries, limit, bound)?;
        if hits.is_empty() && terms.len() > 1 {
            let any = expression(&terms, MatchMode::Any).expect("terms are not empty");
            hits = ranked(&tx, &any, &libraries, limit, bound)?;
        }
        Ok(hits)
    }

    /// Read a document's text from its managed copy, at most `max_bytes` (capped at
    /// [`MAX_READ_BYTES`]) cut on a character boundary. A document outside `libraries` is not found.
    pub fn read_document(&self, libraries: &[LibraryId], document: DocumentId, max_bytes: usize) -> Result<Document, KnowledgeError> {
        let ids = checked_libraries(libraries)?;
        let not_found = KnowledgeError::DocumentNotFound(document);
        if ids.is_empty() {
            return Err(not_found);
        }
        let row: Option<(i64, String, String)> = {
            let conn = self.reader()?;
            let sql = format!(
                "SELECT library_id, title, managed_path FROM documents WHERE id = ?1 AND library_id IN {}",
                placeholders(1, ids.len())
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let params = std::iter::once(document.0).chain(ids.iter().copied());
            stmt.query_row(params_from_iter(params), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?
        };
        let (library, path, managed_path) = row.ok_or(not_found)?;
        let file_path = managed::resolve_managed(&self.managed_root, Path::new(&managed_path))?;
        let max_bytes = max_bytes.min(MAX_READ_BYTES);
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&file_path).and_then(|f| f.take(max_bytes as u64 + 1).read_to_end(&mut bytes));
        match read {
            Ok(_) => {}
            // Deleted (or its library deleted) since the row was read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(KnowledgeError::DocumentNotFound(document)),
            Err(e) => return Err(KnowledgeError::io(file_path, e)),
        }
        let truncated = bytes.len() > max_bytes;
        bytes.truncate(max_bytes);
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            // Only a cut inside a character can fail here: imported copies are checked UTF-8.
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).unwrap_or_default()
            }
        };
        let text = text.strip_prefix('\u{feff}').map(str::to_owned).unwrap_or(text);
        Ok(Document { id: document, library_id: LibraryId(library), path, text, truncated })
    }
}
