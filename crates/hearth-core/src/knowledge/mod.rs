//! The knowledge service: libraries of imported documents, kept as managed copies in a folder Hearth
//! owns and indexed in SQLite FTS5 for ranked search with snippets.
//!
//! # Concurrency
//! Every method is synchronous and may block on disk I/O. [`KnowledgeService`] is `Send + Sync`; share
//! it in an `Arc` and call it from async code through [`KnowledgeService::blocking`] (or your own
//! `tokio::task::spawn_blocking`). Behind it sits one writer connection (a `Mutex`) and a small pool
//! of read-only connections: the database runs in WAL mode, so searches and reads never wait for an
//! import, and an import takes the writer lock one batch at a time (bounded by
//! [`IMPORT_BATCH_TIME`]) so user edits (rename, delete) are not stuck behind a long folder import.
//! One more thread, owned by the service and joined when it drops, merges the index segments an
//! import wrote and copies the write-ahead log into the database file after the import has returned
//! (`maintenance.rs`), so neither the import nor the next write pays for them.
//!
//! # Scoping
//! `search` and `read_document` take the set of libraries the caller may read (a request's grant).
//! Search filters each matching chunk by its library in SQL (bound parameters, never text in the FTS
//! expression) and checks each hit's library against the documents table again; reading filters in
//! SQL. No hit or document outside that set can come back. (Every chunk also carries its library's
//! token in a `scope` column the user's words cannot reach; the index keeps it for compatibility.)

mod bulk;
mod chunk;
mod error;
mod frequency;
mod import;
mod maintenance;
mod managed;
mod query;
mod schema;
mod search;
mod service;
mod store;
mod types;

#[cfg(test)]
mod import_tests;
#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;

pub use bulk::{
    IndexSettings, BULK_CRISISMERGE, BULK_HASHSIZE, DEFAULT_AUTOMERGE, DEFAULT_CRISISMERGE, DEFAULT_HASHSIZE, DEFAULT_WAL_AUTOCHECKPOINT,
    MERGE_STEP_PAGES,
};
pub use chunk::{chunk_text, Chunk, CHUNK_MAX_BYTES, CHUNK_OVERLAP_BYTES};
pub use error::KnowledgeError;
pub use frequency::MAX_CACHED_TERMS;
pub use import::{
    SkipReason, IMPORT_BATCH_BYTES, IMPORT_BATCH_FILES, IMPORT_BATCH_TIME, MAX_DOCUMENT_BYTES, MAX_IMPORT_DEPTH,
    MAX_IMPORT_FILES, PREFETCH_BYTES, PREFETCH_FILES, SKIPPED_FOLDER_NAMES,
};
pub use managed::resolve_managed;
pub use query::{expression, match_expression, terms, MatchMode, Term, MAX_QUERY_BYTES, MAX_QUERY_TERMS};
pub use schema::SCHEMA_VERSION;
pub use search::{COMMON_QUERY_CHUNKS, COMMON_TERM_SHARE, MAX_READ_BYTES, MAX_SEARCH_LIBRARIES, MAX_SEARCH_LIMIT, SNIPPET_TOKENS};
pub use service::{
    KnowledgeService, BUSY_TIMEOUT, MAX_LIBRARY_NAME_CHARS, READER_CACHE_KIB, READER_MMAP_BYTES, READER_POOL_SIZE, WAL_SIZE_LIMIT_BYTES,
    WRITER_CACHE_KIB,
};
pub use types::*;
