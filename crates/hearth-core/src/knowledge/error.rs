//! Knowledge errors: each Display is a sentence a user can act on.

use std::path::PathBuf;

use super::types::{DocumentId, LibraryId};

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("The knowledge database {path} cannot be opened: {detail}")]
    Open { path: PathBuf, detail: String },
    #[error("The knowledge database was written by a newer version of Hearth (schema {found}; this version knows up to {supported}). Update Hearth to use it.")]
    NewerSchema { found: i64, supported: i64 },
    #[error("The knowledge database failed: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("The knowledge library {0} does not exist (it may have been deleted).")]
    LibraryNotFound(LibraryId),
    #[error("The document {0} does not exist or is not in a library this request may read.")]
    DocumentNotFound(DocumentId),
    #[error("A library needs a name of 1 to {max} characters.")]
    InvalidName { max: usize },
    #[error("{path} does not exist (was it moved or deleted?).")]
    SourceMissing { path: PathBuf },
    #[error("{path} cannot be read or written: {detail}")]
    Io { path: PathBuf, detail: String },
    #[error("The path {path} would lead outside Hearth's knowledge folder, so it was refused.")]
    OutsideRoot { path: PathBuf },
    #[error("A search may cover at most {max} libraries at once.")]
    TooManyLibraries { max: usize },
}

impl KnowledgeError {
    pub(crate) fn io(path: impl Into<PathBuf>, e: std::io::Error) -> Self {
        KnowledgeError::Io { path: path.into(), detail: e.to_string() }
    }
}
