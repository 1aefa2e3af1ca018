//! Which words of a query are common: found in more than [`COMMON_TERM_SHARE`] of all chunks. Such a
//! word has no weight in bm25 (its idf is floored at exactly that share), so search leaves it out
//! while rarer words remain.
//!
//! The answers are remembered for one state of the index: everyday words recur in almost every query,
//! and finding out that a word is common means counting at least half of the index. The state is the
//! index's structure and averages records, which change with every write, merge or settings change,
//! from any connection; a search compares them inside its own read transaction.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::Connection;

use super::error::KnowledgeError;
use super::query::Term;
use super::search::COMMON_TERM_SHARE;
use super::service::lock;

/// Words remembered for one state of the index; the memory is emptied when it would hold more.
pub const MAX_CACHED_TERMS: usize = 4096;

#[derive(Default)]
struct Cache {
    /// The index state the answers hold for.
    version: Vec<u8>,
    /// A word in at least this many chunks is common.
    threshold: i64,
    common: HashMap<String, bool>,
}

#[derive(Default)]
pub(super) struct Frequencies {
    cache: Mutex<Cache>,
}

/// FTS5's averages (id 1) and structure (id 10) records, each prefixed by its length.
fn index_version(conn: &Connection) -> Result<Vec<u8>, rusqlite::Error> {
    let mut stmt = conn.prepare_cached("SELECT block FROM chunks_fts_data WHERE id IN (1, 10) ORDER BY id")?;
    let mut version = Vec::new();
    for block in stmt.query_map([], |r| r.get::<_, Option<Vec<u8>>>(0))? {
        let block = block?.unwrap_or_default();
        version.extend_from_slice(&(block.len() as u32).to_le_bytes());
        version.extend_from_slice(&block);
    }
    Ok(version)
}

/// The fewest chunks a common word is in: more than [`COMMON_TERM_SHARE`] of them.
fn threshold(conn: &Connection) -> Result<i64, rusqlite::Error> {
    let chunks: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
    Ok((chunks as f64 * COMMON_TERM_SHARE).floor() as i64 + 1)
}

/// Whether `token` is in at least `threshold` chunks: counting stops there, and without a rank
/// column FTS5 only walks the row ids.
fn is_common(conn: &Connection, token: &str, threshold: i64) -> Result<bool, rusqlite::Error> {
    let mut stmt = conn.prepare_cached("SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ?1 LIMIT ?2)")?;
    let rows: i64 = stmt.query_row(rusqlite::params![format!("\"{token}\""), threshold], |r| r.get(0))?;
    Ok(rows >= threshold)
}

impl Frequencies {
    /// For each term, whether it is common. Prefixes, phrases and other scripts (no plain token)
    /// never are. `conn` must be inside a read transaction, so every answer is of one snapshot.
    pub(super) fn common(&self, conn: &Connection, terms: &[Term]) -> Result<Vec<bool>, KnowledgeError> {
        let version = index_version(conn)?;
        let remembered = {
            let cache = lock(&self.cache);
            (cache.version == version && !version.is_empty()).then(|| {
                let known: Vec<Option<bool>> =
                    terms.iter().map(|t| t.token.as_ref().and_then(|token| cache.common.get(token).copied())).collect();
                (cache.threshold, known)
            })
        };
        let fresh = remembered.is_none();
        let (threshold, known) = match remembered {
            Some(remembered) => remembered,
            None => (threshold(conn)?, vec![None; terms.len()]),
        };
        let mut learned = Vec::new();
        let mut common = Vec::with_capacity(terms.len());
        for (term, known) in terms.iter().zip(known) {
            common.push(match (&term.token, known) {
                (None, _) => false,
                (Some(_), Some(known)) => known,
                (Some(token), None) => {
                    let answer = is_common(conn, token, threshold)?;
                    learned.push((token.clone(), answer));
                    answer
                }
            });
        }
        if fresh || !learned.is_empty() {
            let mut cache = lock(&self.cache);
            if cache.version != version {
                *cache = Cache { version, threshold, common: HashMap::new() };
            }
            if cache.common.len() + learned.len() > MAX_CACHED_TERMS {
                cache.common.clear();
            }
            cache.common.extend(learned);
        }
        Ok(common)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::query::terms;

    fn index(rows: &[&str]) -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        conn.execute("INSERT INTO libraries (id, name, created_at) VALUES (1, 'l', 0)", []).unwrap();
        conn.execute(
            "INSERT INTO documents (id, library_id, source_path, title, managed_path, content_hash, bytes, imported_at)
             VALUES (1, 1, 's', 't', 'm', 'h', 0, 0)",
            [],
        )
        .unwrap();
        for (i, body) in rows.iter().enumerate() {
            add(&conn, i as i64 + 1, body);
        }
        conn
    }

    fn add(conn: &Connection, id: i64, body: &str) {
        conn.execute("INSERT INTO chunks (id, document_id, library_id, start_line) VALUES (?1, 1, 1, 1)", [id]).unwrap();
        conn.execute("INSERT INTO chunks_fts (rowid, title, body, scope) VALUES (?1, 't', ?2, 'lib1')", rusqlite::params![id, body])
            .unwrap();
    }

    /// The rule as the fts5vocab table states it: the word's row count against the share.
    fn by_vocabulary(conn: &Connection, token: &str) -> bool {
        let chunks: i64 = conn.query_row("SELECT count(*) FROM chunks", [], |r| r.get(0)).unwrap();
        let rows: i64 = conn.query_row("SELECT coalesce(sum(doc), 0) FROM chunks_vocab WHERE term = ?1", [token], |r| r.get(0)).unwrap();
        rows as f64 > chunks as f64 * COMMON_TERM_SHARE
    }

    #[test]
    fn common_words_are_those_in_more_than_the_share_of_chunks_and_the_memory_follows_the_index() {
        let conn = index(&["alpha beta", "alpha gamma", "beta delta", "alpha"]);
        let frequencies = Frequencies::default();
        let query = terms("alpha beta gamma Alpha nothing alph* \"été\"");
        let expected: Vec<bool> =
            query.iter().map(|t| t.token.as_deref().is_some_and(|token| by_vocabulary(&conn, token))).collect();
        assert_eq!(expected, [true, false, false, true, false, false, false]);
        assert_eq!(frequencies.common(&conn, &query).unwrap(), expected);
        assert_eq!(frequencies.common(&conn, &query).unwrap(), expected, "remembered");
        // Exactly half is not more than half: "beta" is in 2 of 4 chunks. Two more chunks with it,
        // and "alpha" (3 of 6) stops being common while "beta" (4 of 6) becomes common.
        add(&conn, 5, "beta");
        add(&conn, 6, "beta");
        let now = frequencies.common(&conn, &query).unwrap();
        assert_eq!(now, [false, true, false, false, false, false, false]);
        assert!(now.iter().zip(&query).all(|(&c, t)| c == t.token.as_deref().is_some_and(|token| by_vocabulary(&conn, token))));
    }
}
