//! What the agent changed in a project, and taking it back.
//!
//! Hearth keeps its own record of a project's files rather than the runtime's: OpenCode's snapshots
//! exist only in git repositories, skip untracked files over 2 MB, and revert inside the runtime, so
//! they would fail a plain folder and every runtime family but one. A project's record is a private
//! bare git repository under Hearth's data folder (never the project's own `.git`, whose index and
//! history Hearth does not touch) whose work tree is the project folder. A [`Checkpoint`] is the
//! tree of the folder at one moment; the turn's changes are the difference of the checkpoints
//! before and after it, and undo writes the "before" side back, file by file, only where the file
//! is still what the agent left ([`restore`]).
//!
//! The project's `.gitignore` rules apply: ignored files (build output, dependencies) are not kept
//! and not undone. Files over [`MAX_TRACKED_FILE_BYTES`] are not kept either.

mod diff;
mod restore;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{IndexAddOption, Oid, Repository, Tree};

pub use diff::{DiffLine, DiffLineKind, FileDiff, MAX_DIFF_BLOB_BYTES, MAX_DIFF_LINES_PER_PAGE};
pub use restore::{Conflict, ConflictKind, FileMove, Version};

/// Largest file a checkpoint keeps; a larger one is neither shown nor undone.
pub const MAX_TRACKED_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Files a refused undo names one by one; the rest are counted.
pub const MAX_NAMED_CONFLICTS: usize = 10;
/// Most files one turn's change list names; past it the list says how many more there were.
pub const MAX_LISTED_CHANGES: usize = 5_000;

/// The state of a project's files at one moment: a tree id in the project's record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Checkpoint(pub String);

impl Checkpoint {
    fn oid(&self) -> Result<Oid, ChangesError> {
        Oid::from_str(&self.0).map_err(|_| ChangesError::UnknownCheckpoint(self.0.clone()))
    }
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One file a turn changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Relative to the project folder, `/`-separated.
    pub path: String,
    pub kind: ChangeKind,
    /// Lines added and removed; `None` for a binary file or one too large to compare.
    pub additions: Option<u32>,
    pub deletions: Option<u32>,
    pub binary: bool,
    /// Larger than [`MAX_DIFF_BLOB_BYTES`] on either side: named, not compared.
    pub too_large: bool,
}

/// A turn's changes: the files (at most [`MAX_LISTED_CHANGES`]) and how many there were.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct ChangeList {
    pub files: Vec<FileChange>,
    pub total_files: u32,
    pub additions: u32,
    pub deletions: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    #[error("Hearth could not keep a record of this project's files ({path}): {source}")]
    Record { path: PathBuf, source: git2::Error },
    #[error("Hearth could not read the project's files to record them: {0}")]
    Scan(git2::Error),
    #[error("That point in the project's history is no longer kept ({0}).")]
    UnknownCheckpoint(String),
    #[error("The change to “{0}” is not in this turn.")]
    NotInTurn(String),
    #[error("{}", conflict_sentence(.0))]
    Conflicts(Vec<Conflict>),
    #[error("Hearth could not write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

fn conflict_sentence(conflicts: &[Conflict]) -> String {
    let names: Vec<String> = conflicts.iter().take(MAX_NAMED_CONFLICTS).map(|c| format!("{} ({})", c.path, c.kind.describe())).collect();
    let more = conflicts.len().saturating_sub(MAX_NAMED_CONFLICTS);
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("Nothing was changed: these files changed after the agent's turn, and going on would overwrite that: {}{tail}.", names.join(", "))
}

/// The records of every project, one bare repository each under `root`. Calls for one project
/// are serialised (a record has one index); different projects run in parallel. Every call
/// blocks: run it on a blocking thread.
pub struct ChangeTracker {
    root: PathBuf,
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl ChangeTracker {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), locks: Mutex::new(HashMap::new()) }
    }

    fn lock(&self, project_id: &str) -> Arc<Mutex<()>> {
        self.locks.lock().unwrap().entry(project_id.to_owned()).or_default().clone()
    }

    fn record_path(&self, project_id: &str) -> PathBuf {
        self.root.join(format!("{}.git", sanitize(project_id)))
    }

    fn open(&self, project_id: &str, folder: Option<&Path>) -> Result<Repository, ChangesError> {
        let path = self.record_path(project_id);
        let record_err = |source| ChangesError::Record { path: path.clone(), source };
        let repo = if path.join("HEAD").exists() {
            Repository::open_bare(&path).map_err(record_err)?
        } else {
            std::fs::create_dir_all(&self.root).map_err(|e| ChangesError::Write { path: self.root.clone(), source: e })?;
            let repo = Repository::init_bare(&path).map_err(record_err)?;
            let mut config = repo.config().map_err(record_err)?;
            // The record must keep bytes exactly and never act on the project's behalf.
            for (key, value) in [("core.autocrlf", "false"), ("core.filemode", "true"), ("core.symlinks", "true"), ("gc.auto", "0")] {
                config.set_str(key, value).map_err(record_err)?;
            }
            repo
        };
        // Highest precedence of all attribute files: whatever the project's `.gitattributes` say
        // (line-ending conversion, LFS filters), the record keeps and restores the bytes on disk.
        let attributes = path.join("info").join("attributes");
        if !attributes.exists() {
            let written = std::fs::create_dir_all(path.join("info")).and_then(|()| std::fs::write(&attributes, "* -text -filter -ident -eol -working-tree-encoding\n"));
            written.map_err(|e| ChangesError::Write { path: attributes.clone(), source: e })?;
        }
        if let Some(folder) = folder {
            repo.set_workdir(folder, false).map_err(record_err)?;
        }
        Ok(repo)
    }

    /// Record the project's files as they are now. Unchanged files are not read again (the
    /// record's index keeps their size and time).
    pub fn checkpoint(&self, project_id: &str, folder: &Path) -> Result<Checkpoint, ChangesError> {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let repo = self.open(project_id, Some(folder))?;
        let mut index = repo.index().map_err(ChangesError::Scan)?;
        // Files deleted or changed since the last checkpoint, then files new since.
        index.update_all(["*"], None).map_err(ChangesError::Scan)?;
        let mut keep = |path: &Path, _spec: &[u8]| -> i32 {
            let full = folder.join(path);
            match std::fs::symlink_metadata(&full) {
                Ok(meta) if meta.is_file() && meta.len() > MAX_TRACKED_FILE_BYTES => 1,
                // A folder holding its own repository is the user's, not a file of this one.
                Ok(meta) if meta.is_dir() && full.join(".git").exists() => 1,
                _ => 0,
            }
        };
        index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut keep)).map_err(ChangesError::Scan)?;
        index.write().map_err(ChangesError::Scan)?;
        let tree = index.write_tree().map_err(ChangesError::Scan)?;
        Ok(Checkpoint(tree.to_string()))
    }

    fn tree<'r>(repo: &'r Repository, checkpoint: &Checkpoint) -> Result<Tree<'r>, ChangesError> {
        repo.find_tree(checkpoint.oid()?).map_err(|_| ChangesError::UnknownCheckpoint(checkpoint.0.clone()))
    }

    /// The files that differ between two checkpoints, with their line counts.
    pub fn changes(&self, project_id: &str, before: &Checkpoint, after: &Checkpoint) -> Result<ChangeList, ChangesError> {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let repo = self.open(project_id, None)?;
        let (before, after) = (Self::tree(&repo, before)?, Self::tree(&repo, after)?);
        diff::change_list(&repo, &before, &after)
    }

    /// One file's difference between two checkpoints, one page of lines at a time.
    pub fn file_diff(&self, project_id: &str, before: &Checkpoint, after: &Checkpoint, path: &str, page: u32) -> Result<FileDiff, ChangesError> {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let repo = self.open(project_id, None)?;
        let (before, after) = (Self::tree(&repo, before)?, Self::tree(&repo, after)?);
        diff::file_diff(&repo, &before, &after, path, page)
    }

    /// The moves that take the files changed between each (before, after) pair back to the first
    /// before: each file from what the last turn that touched it left to what the first one found.
    /// `turns` is in the order they ran.
    pub fn undo_moves(&self, project_id: &str, turns: &[(Checkpoint, Checkpoint)]) -> Result<Vec<FileMove>, ChangesError> {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let repo = self.open(project_id, None)?;
        let mut moves: Vec<FileMove> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (before, after) in turns {
            let (before_tree, after_tree) = (Self::tree(&repo, before)?, Self::tree(&repo, after)?);
            for path in diff::changed_paths(&repo, &before_tree, &after_tree)? {
                let left = restore::version_in(&after_tree, &path);
                match index.get(&path) {
                    // Touched again by a later turn: it must now be what that turn left.
                    Some(&i) => moves[i].expect = left,
                    None => {
                        index.insert(path.clone(), moves.len());
                        moves.push(FileMove { target: restore::version_in(&before_tree, &path), expect: left, path });
                    }
                }
            }
        }
        moves.retain(|m| m.expect != m.target);
        Ok(moves)
    }

    /// Apply `moves` to the project folder: each file must be what its move expects (else nothing
    /// is changed and the conflicts are the error, unless `force`), then becomes its target
    /// (written, or deleted with the folders only it needed).
    pub fn apply(&self, project_id: &str, folder: &Path, moves: &[FileMove], force: bool) -> Result<(), ChangesError> {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let repo = self.open(project_id, Some(folder))?;
        restore::apply(&repo, folder, moves, force)
    }

    /// Forget a project's record (the project was removed from Hearth).
    pub fn forget(&self, project_id: &str) {
        let lock = self.lock(project_id);
        let _held = lock.lock().unwrap();
        let _ = std::fs::remove_dir_all(self.record_path(project_id));
    }
}

/// Project ids are Hearth's own uuids; anything else is made a safe file name.
fn sanitize(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
