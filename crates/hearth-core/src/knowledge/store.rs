//! Writing one imported file into the open batch: its document row, chunk rows and index rows, then
//! its managed copy, which a copy thread writes while the next files are indexed. The batch commits
//! once all of its copies are written.
//!
//! No savepoints: FTS5 writes its pending index data out as a new segment at every savepoint, so a
//! savepoint per file made each file a segment, and writing and merging those segments was most of an
//! import. Instead a file that fails once its rows are being written rolls the whole batch back, and
//! the files the batch had finished are written again from memory (a batch holds about
//! [`super::IMPORT_BATCH_BYTES`] of them) before the error is returned. A statement that needs a
//! statement journal would flush FTS5 the same way, so every write here is a single-row statement.

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension};

use super::chunk::chunk_text;
use super::error::KnowledgeError;
use super::import::{Candidate, Loaded, Phases};
use super::managed;
use super::search::{chunk_id, scope_token};
use super::service::{delete_index_rows, now_ms, take_chunk_rows};
use super::types::{DocumentId, LibraryId};

/// Fails with [`KnowledgeError::LibraryNotFound`] unless `library` exists.
pub(super) fn check_library(conn: &Connection, library: LibraryId) -> Result<(), KnowledgeError> {
    let exists = conn.prepare_cached("SELECT 1 FROM libraries WHERE id = ?1")?.query_row([library.0], |_| Ok(())).optional()?;
    exists.ok_or(KnowledgeError::LibraryNotFound(library))
}

/// What storing a file did.
pub(super) enum Stored {
    Imported,
    Replaced,
    Unchanged,
}

/// Why storing a file failed.
pub(super) enum Failure {
    /// Before any of its rows were written: the batch may commit as it is.
    Clean(KnowledgeError),
    /// Once its rows were being written: the batch must be rolled back and replayed without it.
    Partial(KnowledgeError),
}

/// Copy jobs handed to the copy thread at once.
const COPY_GROUP_FILES: usize = 32;

/// A managed copy for the copy thread to write.
pub(super) struct CopyJob {
    /// After a failure the rest of the same batch's copies are not tried.
    batch: u64,
    relative: PathBuf,
    loaded: Arc<Loaded>,
    new: bool,
}

/// What the copy thread did with a job.
pub(super) enum Copied {
    Written(Duration),
    Failed(KnowledgeError),
    /// An earlier copy of the same batch failed.
    NotTried,
}

/// The copy thread: write managed copies in the order they come, so the files before a failed copy
/// are exactly those whose copies were written. Ends when the import drops its sender.
pub(super) fn copier(root: &Path, jobs: mpsc::Receiver<Vec<CopyJob>>, done: mpsc::Sender<Copied>) {
    let mut failed_batch = None;
    for job in jobs.into_iter().flatten() {
        let copied = if failed_batch == Some(job.batch) {
            Copied::NotTried
        } else {
            let started = Instant::now();
            let bytes = job.loaded.text.as_bytes();
            let written = if job.new {
                managed::write_new(root, &job.relative, bytes)
            } else {
                // Readers may be reading the old copy: replace it atomically.
                managed::write(root, &job.relative, bytes)
            };
            match written {
                Ok(()) => Copied::Written(started.elapsed()),
                Err(e) => {
                    failed_batch = Some(job.batch);
                    Copied::Failed(e)
                }
            }
        };
        if done.send(copied).is_err() {
            return;
        }
    }
}

/// The import's ends of the copy thread's channels.
pub(super) struct Copies {
    pub(super) jobs: mpsc::Sender<Vec<CopyJob>>,
    pub(super) done: mpsc::Receiver<Copied>,
    /// Batches begun.
    pub(super) batches: u64,
}

/// A file written in the open batch, kept until the batch commits so that it can be written again.
struct Staged {
    candidate: Candidate,
    loaded: Arc<Loaded>,
    document: DocumentId,
    /// A new document; else its earlier import is replaced.
    new: bool,
    managed_path: PathBuf,
    imported_at: i64,
}

/// The document as an earlier import left it.
struct Previous {
    id: DocumentId,
    hash: String,
    managed_path: String,
}

fn previous_import(conn: &Connection, library: LibraryId, source_path: &str) -> Result<Option<Previous>, KnowledgeError> {
    let mut stmt =
        conn.prepare_cached("SELECT id, content_hash, managed_path FROM documents WHERE library_id = ?1 AND source_path = ?2")?;
    let row = stmt.query_row(params![library.0, source_path], |r| {
        Ok(Previous { id: DocumentId(r.get(0)?), hash: r.get(1)?, managed_path: r.get(2)? })
    });
    Ok(row.optional()?)
}

/// Writes one batch's files; finds the library folder and the next document id when first needed.
pub(super) struct BatchWriter<'a> {
    root: &'a Path,
    library: LibraryId,
    copies: &'a mut Copies,
    batch: u64,
    folder_ready: bool,
    next_id: Option<i64>,
    /// Files whose rows are written, in order; each has a copy job.
    staged: Vec<Staged>,
    /// Copy jobs not yet handed to the copy thread (handed over in groups: fewer wake-ups).
    unsent: Vec<CopyJob>,
    /// Copy jobs of this batch the copy thread has answered.
    answered: usize,
}

impl<'a> BatchWriter<'a> {
    pub(super) fn new(root: &'a Path, library: LibraryId, copies: &'a mut Copies) -> Self {
        copies.batches += 1;
        let batch = copies.batches;
        BatchWriter {
            root,
            library,
            copies,
            batch,
            folder_ready: false,
            next_id: None,
            staged: Vec::new(),
            unsent: Vec::new(),
            answered: 0,
        }
    }

    /// Files whose rows this batch holds.
    pub(super) fn staged(&self) -> usize {
        self.staged.len()
    }

    /// Store one file: nothing if it is unchanged since its last import, else its rows in `tx`, then
    /// a job for its managed copy (a copy that cannot be written leaves no row once the batch is
    /// replayed, see [`Self::copied`]).
    pub(super) fn store(&mut self, tx: &Connection, candidate: Candidate, loaded: Loaded, phases: &mut Phases) -> Result<Stored, Failure> {
        let looking_up = Instant::now();
        let previous = previous_import(tx, self.library, &candidate.path.to_string_lossy()).map_err(Failure::Clean)?;
        let (document, managed_path, new) = match previous {
            Some(previous) if previous.hash == loaded.hash => {
                phases.lookup += looking_up.elapsed();
                return Ok(Stored::Unchanged);
            }
            Some(previous) => (previous.id, PathBuf::from(previous.managed_path), false),
            None => {
                let id = self.next_document_id(tx).map_err(Failure::Clean)?;
                let file_name = candidate.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                (id, managed::document_file(self.library, id, &file_name), true)
            }
        };
        if !self.folder_ready {
            managed::library_folder(self.root, self.library).map_err(Failure::Clean)?;
            self.folder_ready = true;
        }
        phases.lookup += looking_up.elapsed();
        let file = Staged { candidate, loaded: Arc::new(loaded), document, new, managed_path, imported_at: now_ms() };
        write_rows(tx, self.library, &file, phases).map_err(Failure::Partial)?;
        let job = CopyJob { batch: self.batch, relative: file.managed_path.clone(), loaded: Arc::clone(&file.loaded), new };
        self.unsent.push(job);
        if self.unsent.len() == COPY_GROUP_FILES {
            self.hand_over();
        }
        self.staged.push(file);
        Ok(if new { Stored::Imported } else { Stored::Replaced })
    }

    /// Wait for the copy thread to answer this batch's jobs. On a failure: how many files come
    /// before the failed copy (theirs are written), and its error.
    pub(super) fn copied(&mut self, phases: &mut Phases) -> Option<(usize, KnowledgeError)> {
        self.hand_over();
        let waiting = Instant::now();
        let mut failure = None;
        while self.answered < self.staged.len() {
            match self.copies.done.recv().expect("the copy thread runs until the import ends") {
                Copied::Written(took) => phases.copy += took,
                Copied::Failed(e) => failure = Some((self.answered, e)),
                Copied::NotTried => {}
            }
            self.answered += 1;
        }
        phases.copy_wait += waiting.elapsed();
        failure
    }

    /// After the batch was rolled back: write its first `keep` files again, in a transaction of
    /// their own. Their managed copies are in place already.
    pub(super) fn replay(&self, conn: &mut Connection, keep: usize) -> Result<(), KnowledgeError> {
        let tx = conn.transaction()?;
        let mut phases = Phases::default();
        for file in &self.staged[..keep] {
            write_rows(&tx, self.library, file, &mut phases)?;
        }
        tx.commit()?;
        tracing::info!(library = %self.library, files = keep, "knowledge import kept the files of its failed batch");
        Ok(())
    }

    fn hand_over(&mut self) {
        if !self.unsent.is_empty() {
            let jobs = std::mem::take(&mut self.unsent);
            self.copies.jobs.send(jobs).expect("the copy thread runs until the import ends");
        }
    }

    fn next_document_id(&mut self, tx: &Connection) -> Result<DocumentId, KnowledgeError> {
        let next = match self.next_id {
            Some(next) => next,
            // The id SQLite would give the row (the largest plus one), chosen here so that the managed
            // copy's name is known before the row is written.
            None => tx.query_row("SELECT coalesce(max(id), 0) + 1 FROM documents", [], |r| r.get(0))?,
        };
        self.next_id = Some(next + 1);
        Ok(DocumentId(next))
    }
}

/// The document row, chunk rows and index rows of one file (replacing its earlier ones).
fn write_rows(tx: &Connection, library: LibraryId, file: &Staged, phases: &mut Phases) -> Result<(), KnowledgeError> {
    let started = Instant::now();
    let (candidate, bytes) = (&file.candidate, file.loaded.text.len() as i64);
    if file.new {
        tx.prepare_cached(
            "INSERT INTO documents (id, library_id, source_path, title, managed_path, content_hash, bytes, imported_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            file.document.0,
            library.0,
            candidate.path.to_string_lossy(),
            candidate.title,
            file.managed_path.to_string_lossy(),
            file.loaded.hash,
            bytes,
            file.imported_at
        ])?;
    } else {
        tx.prepare_cached("UPDATE documents SET title = ?1, content_hash = ?2, bytes = ?3, imported_at = ?4 WHERE id = ?5")?
            .execute(params![candidate.title, file.loaded.hash, bytes, file.imported_at, file.document.0])?;
    }
    let mut earlier = if file.new { Vec::new() } else { take_chunk_rows(tx, file.document)? }.into_iter().peekable();
    let chunking = Instant::now();
    let chunks = chunk_text(file.loaded.body());
    let inserting = Instant::now();
    let mut chunk_row = tx.prepare_cached("INSERT INTO chunks (id, document_id, library_id, start_line) VALUES (?1, ?2, ?3, ?4)")?;
    let mut fts_row = tx.prepare_cached("INSERT INTO chunks_fts (rowid, title, body, scope) VALUES (?1, ?2, ?3, ?4)")?;
    let scope = scope_token(library);
    for (seq, chunk) in chunks.iter().enumerate() {
        let id = chunk_id(file.document, seq);
        // An earlier index row goes just before the new row of its id, so the row ids FTS5 is given
        // never go back: each time they do, it writes its pending index out as a segment, and deleting
        // all of a file's rows before inserting any made replacing a file cost several times
        // importing one.
        delete_index_rows(tx, std::iter::from_fn(|| earlier.next_if(|&old| old <= id)))?;
        chunk_row.execute(params![id, file.document.0, library.0, chunk.start_line])?;
        fts_row.execute(params![id, candidate.title, chunk.text, scope])?;
    }
    delete_index_rows(tx, earlier)?;
    phases.chunk += inserting - chunking;
    phases.insert += (chunking - started) + inserting.elapsed();
    Ok(())
}
