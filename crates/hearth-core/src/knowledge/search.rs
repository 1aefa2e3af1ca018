//! Ranked search and reading, always within the libraries a caller may read.

use std::io::Read;
use std::path::Path;

use rusqlite::{params_from_iter, Connection, OptionalExtension};

use super::error::KnowledgeError;
use super::managed;
use super::query::{match_expression, MatchMode};
use super::service::KnowledgeService;
use super::types::{Document, DocumentId, LibraryId, SearchHit};

/// Most hits one search returns.
pub const MAX_SEARCH_LIMIT: usize = 50;
/// Most libraries one search or read may cover (a grant lists them; the SQL binds each).
pub const MAX_SEARCH_LIBRARIES: usize = 256;
/// Most bytes of text one read returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// Tokens of context in a snippet.
pub const SNIPPET_TOKENS: i64 = 24;
/// bm25 weights of the FTS columns (title, body): a match in the file's path counts more.
const TITLE_WEIGHT: f64 = 4.0;
const BODY_WEIGHT: f64 = 1.0;

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

/// Best chunk per document for `expression`, best documents first.
fn ranked(conn: &Connection, expression: &str, libraries: &[i64], limit: usize) -> Result<Vec<SearchHit>, KnowledgeError> {
    // bm25() may not sit inside an aggregate, so rank chunks in a materialized CTE first; then
    // min(rank) makes the bare columns come from each document's best chunk (an SQLite rule).
    let sql = format!(
        "WITH matched AS MATERIALIZED (
             SELECT c.document_id, c.library_id, chunks_fts.rowid AS chunk,
                    bm25(chunks_fts, {TITLE_WEIGHT}, {BODY_WEIGHT}) AS rank
             FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
             WHERE chunks_fts MATCH ?1 AND c.library_id IN {})
         SELECT document_id, library_id, chunk, min(rank) AS best FROM matched
         GROUP BY document_id ORDER BY best LIMIT {limit}",
        placeholders(1, libraries.len())
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let params = std::iter::once(rusqlite::types::Value::from(expression.to_string()))
        .chain(libraries.iter().map(|&id| rusqlite::types::Value::from(id)));
    let rows: Vec<(i64, i64, i64, f64)> = stmt
        .query_map(params_from_iter(params), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let mut snippet = conn.prepare_cached(&format!(
        "SELECT snippet(chunks_fts, -1, '«', '»', '…', {SNIPPET_TOKENS}), title FROM chunks_fts
         WHERE chunks_fts MATCH ?1 AND rowid = ?2"
    ))?;
    let mut hits = Vec::with_capacity(rows.len());
    for (document, library, chunk, best) in rows {
        let Some((snippet, path)) =
            snippet.query_row(rusqlite::params![expression, chunk], |r| Ok((r.get(0)?, r.get(1)?))).optional()?
        else {
            continue;
        };
        hits.push(SearchHit { document_id: DocumentId(document), library_id: LibraryId(library), path, snippet, score: -best });
    }
    Ok(hits)
}

impl KnowledgeService {
    /// Search `libraries` for `query` (any text; it is never FTS syntax), at most `limit` hits (capped
    /// at [`MAX_SEARCH_LIMIT`]), one per document, best first. Every word must match; if no chunk has
    /// them all, chunks with any of them are ranked instead. Unknown or deleted libraries give no hits.
    pub fn search(&self, libraries: &[LibraryId], query: &str, limit: usize) -> Result<Vec<SearchHit>, KnowledgeError> {
        let libraries = checked_libraries(libraries)?;
        let limit = limit.min(MAX_SEARCH_LIMIT);
        if libraries.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let conn = self.reader()?;
        let Some(all) = match_expression(query, MatchMode::All) else {
            return Ok(Vec::new());
        };
        let hits = ranked(&conn, &all, &libraries, limit)?;
        if !hits.is_empty() {
            return Ok(hits);
        }
        match match_expression(query, MatchMode::Any) {
            Some(any) if any != all => ranked(&conn, &any, &libraries, limit),
            _ => Ok(hits),
        }
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
