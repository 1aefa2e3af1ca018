//! Importing files and folders: scan (bounded), read as UTF-8 text or skip with a reason, copy into
//! the managed folder, chunk and index. Files are written in batches (one transaction, bounded in
//! files, bytes and time). A file that fails once its rows are being written rolls its batch back and
//! the files the batch had finished are written again (see `store.rs`): a cancelled or failed import
//! keeps every file it finished and never leaves a half-indexed one.
//!
//! Reading, checking and hashing files run on a second thread a few files ahead of the writer; the
//! index segments the batches write are merged once, after the import has returned, instead of at
//! every batch (see `bulk.rs`).

use std::io::Read;
use std::iter::Peekable;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::TransactionBehavior;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::bulk;
use super::error::KnowledgeError;
use super::service::KnowledgeService;
use super::store::{self, BatchWriter, Copies, Failure, Stored};
use super::types::{ImportProgress, ImportReport, LibraryId, SkippedPath};

/// Files larger than this are skipped: knowledge is text meant to be read, not data dumps.
pub const MAX_DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;
/// Folder levels below the imported folder that are entered.
pub const MAX_IMPORT_DEPTH: usize = 16;
/// Files taken from one folder import; the rest are reported as skipped.
pub const MAX_IMPORT_FILES: usize = 20_000;
/// Folders never entered: version control, dependencies and build output.
pub const SKIPPED_FOLDER_NAMES: &[&str] = &["node_modules", "target", "__pycache__"];

/// Files written in one transaction. Batching matters: every FTS5 commit writes a new index segment,
/// and the fewer the segments, the faster the searches until they are merged. Usually the time
/// bound ends a batch first.
pub const IMPORT_BATCH_FILES: usize = 2048;
/// Bytes written in one transaction.
pub const IMPORT_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Longest a batch holds the writer lock (renames and deletes wait at most about this long).
pub const IMPORT_BATCH_TIME: std::time::Duration = std::time::Duration::from_millis(250);
/// Files the prefetch thread (reading, checking and hashing ahead of the writer) hands over at once:
/// one hand-over per file made the two threads wait on each other thousands of times.
pub const PREFETCH_FILES: usize = 64;
/// Bytes after which the prefetch thread hands its files over. Two groups wait at most, each under
/// this plus one file of [`MAX_DOCUMENT_BYTES`]: about 10 MiB in flight.
pub const PREFETCH_BYTES: usize = 1024 * 1024;

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

pub(super) struct Candidate {
    pub(super) path: PathBuf,
    /// Display path: relative to the imported folder's parent, or the file name.
    pub(super) title: String,
    /// Size when scanned.
    pub(super) bytes: u64,
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

/// A file read, checked as text and hashed.
pub(super) struct Loaded {
    /// The file as read, a byte order mark included: the managed copy holds exactly these bytes.
    pub(super) text: String,
    /// Bytes of the byte order mark at the start of `text`, which are not indexed.
    bom: usize,
    /// Hex SHA-256 of the file's bytes.
    pub(super) hash: String,
}

impl Loaded {
    /// The text that is chunked and indexed.
    pub(super) fn body(&self) -> &str {
        &self.text[self.bom..]
    }
}

/// Read a file as text, or say why it is not a document. `scanned` is its size at the scan: the
/// buffer is allocated once, and the bytes become the `String` without a copy.
fn read_text(path: &Path, scanned: u64) -> Result<(String, usize), SkipReason> {
    let unreadable = |e: std::io::Error| SkipReason::Unreadable { detail: e.to_string() };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::with_capacity(scanned.min(MAX_DOCUMENT_BYTES) as usize + 1);
    // Read one byte past the bound so a file that grew since the scan is still caught.
    file.take(MAX_DOCUMENT_BYTES + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(bytes.len() as u64);
        return Err(SkipReason::TooLarge { bytes });
    }
    if memchr::memchr(0, &bytes).is_some() {
        return Err(SkipReason::Binary);
    }
    let text = String::from_utf8(bytes).map_err(|e| SkipReason::NotUtf8 { valid_up_to: e.utf8_error().valid_up_to() })?;
    let bom = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    if text[bom..].trim().is_empty() {
        return Err(SkipReason::Empty);
    }
    Ok((text, bom))
}

/// One scanned file as the prefetch thread hands it to the writer.
struct Fetched {
    candidate: Candidate,
    loaded: Result<Loaded, SkipReason>,
    read: Duration,
    hash: Duration,
}

/// The prefetch thread: read, check and hash each candidate, in order, handing them over in groups
/// (see [`PREFETCH_FILES`]) until the writer stops taking them.
fn prefetch(candidates: Vec<Candidate>, groups: mpsc::SyncSender<Vec<Fetched>>) {
    let (mut group, mut bytes) = (Vec::with_capacity(PREFETCH_FILES), 0);
    let count = candidates.len();
    for (index, candidate) in candidates.into_iter().enumerate() {
        let started = Instant::now();
        let read = read_text(&candidate.path, candidate.bytes);
        let hashed = Instant::now();
        let loaded = read.map(|(text, bom)| {
            let hash = format!("{:x}", Sha256::digest(text.as_bytes()));
            Loaded { text, bom, hash }
        });
        bytes += loaded.as_ref().map_or(0, |l| l.text.len());
        group.push(Fetched { candidate, loaded, read: hashed - started, hash: hashed.elapsed() });
        if group.len() == PREFETCH_FILES || bytes >= PREFETCH_BYTES || index + 1 == count {
            if groups.send(std::mem::take(&mut group)).is_err() {
                return; // the import stopped
            }
            bytes = 0;
        }
    }
}

/// Where an import's time went, logged when it ends (the knowledge benchmark prints it).
#[derive(Debug, Default)]
pub(super) struct Phases {
    pub(super) scan: Duration,
    /// Reading and checking files, then hashing them: on the prefetch thread, beside the rest.
    pub(super) read: Duration,
    pub(super) hash: Duration,
    /// The writer waiting for the prefetch thread.
    pub(super) wait: Duration,
    /// Looking up a file's earlier import.
    pub(super) lookup: Duration,
    pub(super) chunk: Duration,
    /// Document, chunk and index rows (FTS5 tokenizes here).
    pub(super) insert: Duration,
    /// Writing managed copies: on the copy thread, beside the rest.
    pub(super) copy: Duration,
    /// The writer waiting for the copy thread at the end of a batch.
    pub(super) copy_wait: Duration,
    /// Committing batches (FTS5 writes each batch's last index segment here).
    pub(super) commit: Duration,
    /// Restoring the index settings after the last batch (the merge runs after the import returns).
    pub(super) finish: Duration,
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "scan {:.0} ms, read {:.0} ms and hash {:.0} ms (prefetch thread), waiting for them {:.0} ms, lookup {:.0} ms, \
             chunk {:.0} ms, insert {:.0} ms, managed copy {:.0} ms (copy thread), waiting for it {:.0} ms, commit {:.0} ms, \
             finish {:.0} ms",
            ms(self.scan),
            ms(self.read),
            ms(self.hash),
            ms(self.wait),
            ms(self.lookup),
            ms(self.chunk),
            ms(self.insert),
            ms(self.copy),
            ms(self.copy_wait),
            ms(self.commit),
            ms(self.finish)
        )
    }
}

/// One import's state across its batches.
struct Run<'a> {
    library: LibraryId,
    cancel: &'a CancellationToken,
    report: ImportReport,
    event: ImportProgress,
    phases: Phases,
    /// The bulk-load merge settings were applied (see `bulk.rs`).
    bulk: bool,
}

type Files = Peekable<std::iter::Flatten<mpsc::IntoIter<Vec<Fetched>>>>;

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
        let started = Instant::now();
        let path = path.as_ref();
        let source = std::fs::canonicalize(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => KnowledgeError::SourceMissing { path: path.to_path_buf() },
            _ => KnowledgeError::io(path, e),
        })?;
        self.library(library)?;
        let mut report = ImportReport::default();
        let candidates = scan(&source, &mut report.skipped)?;
        let event = ImportProgress {
            files_done: 0,
            files_total: candidates.len() as u32,
            bytes_done: 0,
            bytes_total: candidates.iter().map(|c| c.bytes).sum(),
            current: None,
        };
        tracing::info!(library = %library, source = %source.display(), files = event.files_total, "knowledge import started");
        progress(event.clone());
        let phases = Phases { scan: started.elapsed(), ..Phases::default() };
        let mut run = Run { library, cancel, report, event, phases, bulk: false };
        let (fetched, to_index) = mpsc::sync_channel(1);
        let (jobs, to_copy) = mpsc::channel();
        let (copied, done) = mpsc::channel();
        let root = self.managed_root.as_path();
        let written: Result<(), KnowledgeError> = std::thread::scope(|scope| {
            scope.spawn(move || prefetch(candidates, fetched));
            scope.spawn(move || store::copier(root, to_copy, copied));
            // Returning drops these ends: the prefetch thread's next send fails, the copy thread's
            // queue ends, and both threads stop.
            let mut files = to_index.into_iter().flatten().peekable();
            let mut copies = Copies { jobs, done, batches: 0 };
            loop {
                let waited = Instant::now();
                let more = files.peek().is_some();
                run.phases.wait += waited.elapsed();
                if !more || run.report.cancelled {
                    return Ok(());
                }
                self.batch(&mut run, &mut files, &mut copies, &mut progress)?;
            }
        });
        // The settings go back even after a failure (a crash leaves them to `open`); the merge only
        // follows an import that ended well (cancelled included: it keeps later searches fast).
        let finish_started = Instant::now();
        let finished = if run.bulk { bulk::finish(self, written.is_ok()) } else { Ok(()) };
        run.phases.finish = finish_started.elapsed();
        written?;
        finished?;
        let report = run.report;
        tracing::info!(
            library = %library, imported = report.imported, replaced = report.replaced, unchanged = report.unchanged,
            skipped = report.skipped.len(), cancelled = report.cancelled, elapsed_ms = started.elapsed().as_millis() as u64,
            phases = %run.phases, "knowledge import finished"
        );
        Ok(report)
    }

    /// One transaction of files, bounded in files, bytes and time. It commits once the copy thread
    /// has written its managed copies; after a failure, the files before the failed one stay.
    fn batch(
        &self,
        run: &mut Run<'_>,
        files: &mut Files,
        copies: &mut Copies,
        progress: &mut impl FnMut(ImportProgress),
    ) -> Result<(), KnowledgeError> {
        let mut conn = self.writer();
        // Immediate: the batch allocates document ids, so no other connection may write in between.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Checked under the writer lock: a library deleted mid-import ends the import cleanly.
        store::check_library(&tx, run.library)?;
        if !run.bulk {
            bulk::begin(&tx)?;
            run.bulk = true;
        }
        let mut writer = BatchWriter::new(&self.managed_root, run.library, copies);
        let mut failure = None;
        let (batch_started, mut batch_files, mut batch_bytes) = (Instant::now(), 0, 0);
        while batch_files < IMPORT_BATCH_FILES && batch_bytes < IMPORT_BATCH_BYTES && batch_started.elapsed() < IMPORT_BATCH_TIME {
            let waited = Instant::now();
            let Some(Fetched { candidate, loaded, read, hash }) = files.next() else { break };
            run.phases.wait += waited.elapsed();
            if run.cancel.is_cancelled() {
                run.report.cancelled = true;
                break;
            }
            run.phases.read += read;
            run.phases.hash += hash;
            let (path, scanned) = (candidate.path.clone(), candidate.bytes);
            match loaded {
                Err(reason) => {
                    tracing::debug!(path = %path.display(), %reason, "knowledge import skipped a file");
                    run.report.skipped.push(SkippedPath { path: path.clone(), reason });
                }
                Ok(loaded) => {
                    batch_files += 1;
                    batch_bytes += loaded.text.len();
                    match writer.store(&tx, candidate, loaded, &mut run.phases) {
                        Ok(Stored::Unchanged) => run.report.unchanged += 1,
                        Ok(Stored::Imported) => run.report.imported += 1,
                        Ok(Stored::Replaced) => run.report.replaced += 1,
                        Err(failed) => {
                            failure = Some(failed);
                            break;
                        }
                    }
                }
            }
            run.event.files_done += 1;
            run.event.bytes_done += scanned;
            run.event.current = Some(path);
            progress(run.event.clone());
        }
        // The first failure in file order decides what stays: a failed copy is of a file before the
        // one whose rows failed, if any.
        let (keep, error) = match (writer.copied(&mut run.phases), failure) {
            (Some((before, e)), _) => (Some(before), Some(e)),
            (None, Some(Failure::Partial(e))) => (Some(writer.staged()), Some(e)),
            // Nothing of the failed file was written: the batch commits as it is.
            (None, Some(Failure::Clean(e))) => (None, Some(e)),
            (None, None) => (None, None),
        };
        let committing = Instant::now();
        match keep {
            None => tx.commit()?,
            Some(keep) => {
                if let Err(rollback) = tx.rollback() {
                    tracing::error!(%rollback, "knowledge import could not roll a failed batch back");
                }
                // Write the files before the failed one again.
                writer.replay(&mut conn, keep)?;
            }
        }
        run.phases.commit += committing.elapsed();
        error.map_or(Ok(()), Err)
    }
}
