//! The knowledge service's public data: what the UI shows and what the gateway hands to agents.

use std::path::PathBuf;

use super::import::SkipReason;

/// A library's id. Ids are SQLite row ids, far below 2^53, so they travel to the UI as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(transparent)]
pub struct LibraryId(pub i64);

/// A document's id (see [`LibraryId`] for the number type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(transparent)]
pub struct DocumentId(pub i64);

impl std::fmt::Display for LibraryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for DocumentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Library {
    pub id: LibraryId,
    pub name: String,
    /// Unix time in milliseconds.
    pub created_at: i64,
    pub document_count: u32,
}

/// A document as listed in a library (no text).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct DocumentInfo {
    pub id: DocumentId,
    pub library_id: LibraryId,
    /// Display path: the file's path relative to what was imported (e.g. `docs/guide/setup.md`).
    pub path: String,
    /// Where it was imported from; the managed copy does not depend on it still existing.
    pub source_path: String,
    pub bytes: u64,
    /// Unix time in milliseconds of the last import that changed it.
    pub imported_at: i64,
}

/// A document's text, read from its managed copy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub id: DocumentId,
    pub library_id: LibraryId,
    pub path: String,
    pub text: String,
    /// The text was cut at the requested byte bound (on a character boundary).
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub document_id: DocumentId,
    pub library_id: LibraryId,
    /// Display path of the document.
    pub path: String,
    /// The best-matching passage, matched terms marked «like this», cut parts marked with `…`.
    pub snippet: String,
    /// Relevance (negated bm25 of the best chunk): higher is better; comparable within one search.
    pub score: f64,
}

/// Sent after the folder is scanned and after each file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ImportProgress {
    pub files_done: u32,
    pub files_total: u32,
    /// Bytes of the files handled so far (imported or skipped).
    pub bytes_done: u64,
    pub bytes_total: u64,
    /// The file just handled; `None` for the first event.
    pub current: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SkippedPath {
    pub path: PathBuf,
    pub reason: SkipReason,
}

/// What an import did. For the files it scanned, `imported + replaced + unchanged` plus the skipped
/// files equals `files_total` of the progress events; `skipped` may also list folders it did not enter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// New documents.
    pub imported: u32,
    /// Documents whose source changed since their last import: their text and chunks were replaced.
    pub replaced: u32,
    /// Documents imported before with the same content: nothing was done.
    pub unchanged: u32,
    pub skipped: Vec<SkippedPath>,
    /// The import was cancelled; files handled before that stay imported.
    pub cancelled: bool,
}
