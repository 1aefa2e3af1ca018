//! Importing files and folders: scan (bounded), read as UTF-8 text or skip with a reason, copy into
//! the managed folder, chunk and index. Files are written in batches (one transaction, bounded in
//! files, bytes and time), each file in its own savepoint: a cancelled or failed import keeps every
//! file it finished and never leaves a half-indexed one.

use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::chunk::chunk_text;
use super::error::KnowledgeError;
use super::managed;
use super::search::{chunk_id, scope_token};
use super::service::{delete_chunks, now_ms, KnowledgeService};
use super::types::{DocumentId, ImportProgress, ImportReport, LibraryId, SkippedPath};

/// Files larger than this are skipped: knowledge is text meant to be read, not data dumps.
pub const MAX_DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;
/// Folder levels below the imported folder that are entered.
pub const MAX_IMPORT_DEPTH: usize = 16;
/// Files taken from one folder import; the rest are reported as skipped.
pub const MAX_IMPORT_FILES: usize = 20_000;
/// Folders never entered: version control, dependencies and build output.
pub const SKIPPED_FOLDER_NAMES: &[&str] = &["node_modules", "target", "__pycache__"];

/// Files written in one transaction. Batching matters: every FTS5 commit writes a new index segment.
pub const IMPORT_BATCH_FILES: usize = 256;
/// Bytes written in one transaction.
pub const IMPORT_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Longest a batch holds the writer lock (renames and deletes wait at most about this long).
pub const IMPORT_BATCH_TIME: std::time::Duration = std::time::Duration::from_millis(250);

/// Why a file or folder was not imported.
#[derive(Debug, Clone, PartialEq, Eq, specta::Type)]
#[specta(type = String)]
pub enum SkipReason {
    Binary,
    NotUtf8 { valid_up_to: usize },
    TooLarge { bytes: u64 },
    Empty,
    Hidden,
    IgnoredFolder,
    Symlink,
    NotAFile,
    TooDeep,
    TooManyFiles,
    Unreadable { detail: String },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Binary => write!(f, "binary file (contains NUL bytes), not text"),
            SkipReason::NotUtf8 { valid_up_to } => write!(f, "not UTF-8 text (invalid bytes at offset {valid_up_to})"),
            SkipReason::TooLarge { bytes } => write!(
                f,
                "too large ({:.1} MiB; documents may be at most {} MiB)",
                *bytes as f64 / 1048576.0,
                MAX_DOCUMENT_BYTES / 1048576
            ),
            SkipReason::Empty => write!(f, "empty: no text to search"),
            SkipReason::Hidden => write!(f, "hidden (name starts with a dot); import it on its own to include it"),
            SkipReason::IgnoredFolder => write!(f, "dependency or build folder, not entered"),
            SkipReason::Symlink => write!(f, "symbolic link, not followed"),
            SkipReason::NotAFile => write!(f, "not a regular file"),
            SkipReason::TooDeep => write!(f, "more than {MAX_IMPORT_DEPTH} folder levels deep, not entered"),
            SkipReason::TooManyFiles => write!(f, "more than {MAX_IMPORT_FILES} files; the rest were not imported"),
            SkipReason::Unreadable { detail } => write!(f, "cannot be read: {detail}"),
        }
    }
}

/// Sent to the UI as its sentence.
impl serde::Serialize for SkipReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct Candidate {
    path: PathBuf,
    /// Display path: relative to the imported folder's parent, or the file name.
    title: String,
    bytes: u64,
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// The files to import under `source` (already canonical) and what was passed over.
fn scan(source: &Path, skipped: &mut Vec<SkippedPath>) -> Result<Vec<Candidate>, KnowledgeError> {
    let meta = std::fs::metadata(source).map_err(|e| KnowledgeError::io(source, e))?;
    let name = source.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if meta.is_file() {
        return Ok(vec![Candidate { path: source.to_path_buf(), title: name, bytes: meta.len() }]);
    }
    let mut candidates = Vec::new();
    let mut walk = walkdir::WalkDir::new(source).min_depth(1).max_depth(MAX_IMPORT_DEPTH).sort_by_file_name().into_iter();
    let mut skip = |path: &Path, reason| skipped.push(SkippedPath { path: path.to_path_buf(), reason });
    while let Some(entry) = walk.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let path = e.path().unwrap_or(source).to_path_buf();
                skip(&path, SkipReason::Unreadable { detail: e.to_string() });
                continue;
            }
        };
        let kind = entry.file_type();
        let path = entry.path();
        if kind.is_symlink() {
            skip(path, SkipReason::Symlink);
        } else if kind.is_dir() {
            let reason = if is_hidden(entry.file_name()) {
                Some(SkipReason::Hidden)
            } else if SKIPPED_FOLDER_NAMES.iter().any(|n| entry.file_name() == *n) {
                Some(SkipReason::IgnoredFolder)
            } else if entry.depth() == MAX_IMPORT_DEPTH {
                Some(SkipReason::TooDeep)
            } else {
                None
            };
            if let Some(reason) = reason {
                skip(path, reason);
                walk.skip_current_dir();
            }
        } else if !kind.is_file() {
            skip(path, SkipReason::NotAFile);
        } else if is_hidden(entry.file_name()) {
            skip(path, SkipReason::Hidden);
        } else if candidates.len() == MAX_IMPORT_FILES {
            skip(source, SkipReason::TooManyFiles);
            break;
        } else {
            let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
            let relative = path.strip_prefix(source).unwrap_or(path);
            let title = Path::new(&name).join(relative).to_string_lossy().into_owned();
            candidates.push(Candidate { path: path.to_path_buf(), title, bytes });
        }
    }
    Ok(candidates)
}

/// Read a file as text, or say why it is not a document.
fn read_text(path: &Path) -> Result<(Vec<u8>, String), SkipReason> {
    let unreadable = |e: std::io::Error| SkipReason::Unreadable { detail: e.to_string() };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    // Read one byte past the bound so a file that grew since the scan is still caught.
    file.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(bytes.len() as u64);
        return Err(SkipReason::TooLarge { bytes });
    }
    if memchr::memchr(0, &bytes).is_some() {
        return Err(SkipReason::Binary);
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text.strip_prefix('\u{feff}').unwrap_or(text).to_owned(),
        Err(e) => return Err(SkipReason::NotUtf8 { valid_up_to: e.valid_up_to() }),
    };
    if text.trim().is_empty() {
        return Err(SkipReason::Empty);
    }
    Ok((bytes, text))
}

enum Outcome {
    Imported,
    Replaced,
    Unchanged,
}

impl KnowledgeService {
    /// Import a file or a folder (recursively, within the bounds above) into `library`, calling
    /// `progress` after the scan and after each file. Cancelling stops before the next file.
    pub fn import_path(
        &self,
        library: LibraryId,
        path: impl AsRef<Path>,
        cancel: &CancellationToken,
        mut progress: impl FnMut(ImportProgress),
    ) -> Result<ImportReport, KnowledgeError> {
        let path = path.as_ref();
        let source = std::fs::canonicalize(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => KnowledgeError::SourceMissing { path: path.to_path_buf() },
            _ => KnowledgeError::io(path, e),
        })?;
        self.library(library)?;
        let mut report = ImportReport::default();
        let candidates = scan(&source, &mut report.skipped)?;
        let mut event = ImportProgress {
            files_done: 0,
            files_total: candidates.len() as u32,
            bytes_done: 0,
            bytes_total: candidates.iter().map(|c| c.bytes).sum(),
            current: None,
        };
        tracing::info!(library = %library, source = %source.display(), files = event.files_total, "knowledge import started");
        progress(event.clone());
        let mut candidates = candidates.into_iter().peekable();
        while candidates.peek().is_some() && !report.cancelled {
            let mut conn = self.writer();
            let mut tx = conn.transaction()?;
            let (batch_started, mut batch_files, mut batch_bytes) = (std::time::Instant::now(), 0, 0);
            while batch_files < IMPORT_BATCH_FILES && batch_bytes < IMPORT_BATCH_BYTES && batch_started.elapsed() < IMPORT_BATCH_TIME {
                let Some(candidate) = candidates.next() else { break };
                if cancel.is_cancelled() {
                    report.cancelled = true;
                    break;
                }
                match read_text(&candidate.path) {
                    Err(reason) => {
                        tracing::debug!(path = %candidate.path.display(), %reason, "knowledge import skipped a file");
                        report.skipped.push(SkippedPath { path: candidate.path.clone(), reason });
                    }
                    Ok((bytes, text)) => {
                        let outcome = match self.store(&mut tx, library, &candidate, &bytes, &text) {
                            Ok(outcome) => outcome,
                            Err(e) => {
                                // Keep the files this batch finished; the failed one rolled back.
                                tx.commit()?;
                                return Err(e);
                            }
                        };
                        match outcome {
                            Outcome::Imported => report.imported += 1,
                            Outcome::Replaced => report.replaced += 1,
                            Outcome::Unchanged => report.unchanged += 1,
                        }
                        batch_files += 1;
                        batch_bytes += bytes.len();
                    }
                }
                event.files_done += 1;
                event.bytes_done += candidate.bytes;
                event.current = Some(candidate.path);
                progress(event.clone());
            }
            tx.commit()?;
        }
        tracing::info!(
            library = %library, imported = report.imported, replaced = report.replaced, unchanged = report.unchanged,
            skipped = report.skipped.len(), cancelled = report.cancelled, "knowledge import finished"
        );
        Ok(report)
    }

    /// Insert or replace one document in its own savepoint; the managed copy is written before the
    /// savepoint is released, so a failure leaves neither row nor chunks.
    fn store(
        &self,
        tx: &mut rusqlite::Transaction<'_>,
        library: LibraryId,
        candidate: &Candidate,
        bytes: &[u8],
        text: &str,
    ) -> Result<Outcome, KnowledgeError> {
        let hash = format!("{:x}", Sha256::digest(bytes));
        let source_path = candidate.path.to_string_lossy();
        let tx = tx.savepoint()?;
        // Checked under the writer lock: a library deleted mid-import ends the import cleanly.
        let exists = tx.query_row("SELECT 1 FROM libraries WHERE id = ?1", [library.0], |_| Ok(())).optional()?;
        if exists.is_none() {
            return Err(KnowledgeError::LibraryNotFound(library));
        }
        let existing: Option<(i64, String, String)> = tx
            .query_row(
                "SELECT id, content_hash, managed_path FROM documents WHERE library_id = ?1 AND source_path = ?2",
                params![library.0, source_path],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let (document, managed_path, outcome) = match existing {
            Some((_, old_hash, _)) if old_hash == hash => return Ok(Outcome::Unchanged),
            Some((id, _, managed_path)) => {
                let id = DocumentId(id);
                delete_chunks(&tx, id)?;
                tx.execute(
                    "UPDATE documents SET title = ?1, content_hash = ?2, bytes = ?3, imported_at = ?4 WHERE id = ?5",
                    params![candidate.title, hash, bytes.len() as i64, now_ms(), id.0],
                )?;
                (id, PathBuf::from(managed_path), Outcome::Replaced)
            }
            None => {
                tx.execute(
                    "INSERT INTO documents (library_id, source_path, title, managed_path, content_hash, bytes, imported_at)
                     VALUES (?1, ?2, ?3, '', ?4, ?5, ?6)",
                    params![library.0, source_path, candidate.title, hash, bytes.len() as i64, now_ms()],
                )?;
                let id = DocumentId(tx.last_insert_rowid());
                let file_name = candidate.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let managed_path = managed::document_file(library, id, &file_name);
                tx.execute("UPDATE documents SET managed_path = ?1 WHERE id = ?2", params![managed_path.to_string_lossy(), id.0])?;
                (id, managed_path, Outcome::Imported)
            }
        };
        insert_chunks(&tx, library, document, &candidate.title, text)?;
        managed::write(&self.managed_root, &managed_path, bytes)?;
        tx.commit()?;
        Ok(outcome)
    }
}

fn insert_chunks(conn: &Connection, library: LibraryId, document: DocumentId, title: &str, text: &str) -> Result<(), KnowledgeError> {
    let mut chunk_row = conn.prepare_cached("INSERT INTO chunks (id, document_id, library_id, start_line) VALUES (?1, ?2, ?3, ?4)")?;
    let mut fts_row = conn.prepare_cached("INSERT INTO chunks_fts (rowid, title, body, scope) VALUES (?1, ?2, ?3, ?4)")?;
    let scope = scope_token(library);
    for (seq, chunk) in chunk_text(text).iter().enumerate() {
        let id = chunk_id(document, seq);
        chunk_row.execute(params![id, document.0, library.0, chunk.start_line])?;
        fts_row.execute(params![id, title, chunk.text, scope])?;
    }
    Ok(())
}
