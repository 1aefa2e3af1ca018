//! Checkpointing the write-ahead log off the writer's path. An import turns automatic checkpoints off
//! (see `bulk.rs`), so when it ends the log holds everything it wrote. Copying that into the database
//! file takes about a quarter of a second per 40 MB imported; a thread with a connection of its own
//! does it after the import has returned, as SQLite recommends, so neither the import nor the next
//! write waits for it. Readers and the writer go on meanwhile (a passive checkpoint waits for no one).

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};

use super::service::{lock, BUSY_TIMEOUT};

/// Checkpoints asked for and run, so a caller can wait for the one it asked for.
#[derive(Default)]
struct Counts {
    requested: u64,
    completed: u64,
}

type Shared = Arc<(Mutex<Counts>, Condvar)>;

/// Owns the checkpoint thread; dropping it lets a running checkpoint finish and joins the thread.
pub(super) struct Checkpointer {
    requests: Option<mpsc::Sender<()>>,
    counts: Shared,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub(super) fn spawn(db_path: PathBuf) -> std::io::Result<Self> {
        let (requests, incoming) = mpsc::channel();
        let counts = Shared::default();
        let shared = Arc::clone(&counts);
        let thread = std::thread::Builder::new().name("knowledge-checkpoint".into()).spawn(move || run(db_path, incoming, shared))?;
        Ok(Checkpointer { requests: Some(requests), counts, thread: Some(thread) })
    }

    /// Ask for a checkpoint; returns at once.
    pub(super) fn request(&self) {
        lock(&self.counts.0).requested += 1;
        if let Some(requests) = &self.requests {
            // Fails only once the thread has ended (it never does before drop).
            let _ = requests.send(());
        }
    }

    /// Wait until every checkpoint asked for so far has run (or failed, which is logged).
    pub(super) fn wait(&self) {
        let (counts, done) = &*self.counts;
        let mut counts = lock(counts);
        let target = counts.requested;
        while counts.completed < target {
            counts = done.wait(counts).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(db_path: PathBuf, incoming: mpsc::Receiver<()>, counts: Shared) {
    let mut conn = None;
    while incoming.recv().is_ok() {
        // One checkpoint serves every request made before it starts.
        while incoming.try_recv().is_ok() {}
        let target = lock(&counts.0).requested;
        let started = Instant::now();
        match checkpoint(&db_path, &mut conn) {
            Ok((log, copied)) => tracing::info!(
                log_pages = log,
                copied_pages = copied,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "knowledge log checkpointed"
            ),
            // The log stays intact and automatic checkpoints copy it later: nothing is lost.
            Err(e) => tracing::warn!(%e, "knowledge log checkpoint failed; a later write retries it"),
        }
        let (shared, done) = &*counts;
        lock(shared).completed = target;
        done.notify_all();
    }
}

/// Pages in the log and pages copied into the database file.
fn checkpoint(db_path: &Path, conn: &mut Option<Connection>) -> Result<(i64, i64), rusqlite::Error> {
    let conn = match conn {
        Some(conn) => conn,
        None => {
            let opened = Connection::open_with_flags(db_path, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
            opened.busy_timeout(BUSY_TIMEOUT)?;
            conn.insert(opened)
        }
    };
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(1)?, r.get(2)?)))
}
