//! Writing recorded versions of files back into the project folder, only where each file is still
//! what it is expected to be.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use git2::{FileMode, ObjectType, Oid, Repository, Tree};

use super::ChangesError;

/// One recorded version of a file: its blob and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub blob: Oid,
    /// git's file mode ([`FileMode`]): a file, an executable file or a symbolic link.
    pub mode: i32,
}

/// One file to take from `expect` (what it must be now; `None`: absent) to `target` (`None`:
/// deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMove {
    pub path: String,
    pub expect: Option<Version>,
    pub target: Option<Version>,
}

impl FileMove {
    /// The same move the other way round (redo of an undo).
    pub fn reversed(&self) -> FileMove {
        FileMove { path: self.path.clone(), expect: self.target, target: self.expect }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum ConflictKind {
    /// Its content changed since.
    Edited,
    /// It was deleted since.
    Deleted,
    /// It did not exist then and exists now.
    Created,
}

impl ConflictKind {
    pub fn describe(self) -> &'static str {
        match self {
            ConflictKind::Edited => "edited since",
            ConflictKind::Deleted => "deleted since",
            ConflictKind::Created => "created since",
        }
    }
}

/// A file that is not what a move expects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub path: String,
    pub kind: ConflictKind,
}

/// Permission bits of a restored file, as git keeps only "executable or not".
const EXECUTABLE_PERMISSIONS: u32 = 0o755;
const FILE_PERMISSIONS: u32 = 0o644;
/// Any execute bit: git records such a file as executable.
const ANY_EXECUTE: u32 = 0o111;

fn is_link(mode: i32) -> bool {
    mode == i32::from(FileMode::Link)
}

pub(super) fn version_in(tree: &Tree, path: &str) -> Option<Version> {
    let entry = tree.get_path(Path::new(path)).ok()?;
    (entry.kind() == Some(ObjectType::Blob)).then(|| Version { blob: entry.id(), mode: entry.filemode() })
}

/// What the file at `full` is now, hashed as the record would keep it.
fn current(full: &Path) -> Result<Option<Version>, std::io::Error> {
    let meta = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(full)?;
        let blob = Oid::hash_object(ObjectType::Blob, target.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
        return Ok(Some(Version { blob, mode: FileMode::Link.into() }));
    }
    if !meta.is_file() {
        // A folder where a file was: not the file.
        return Ok(Some(Version { blob: Oid::ZERO_SHA1, mode: FileMode::Tree.into() }));
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = if meta.permissions().mode() & ANY_EXECUTE != 0 { FileMode::BlobExecutable } else { FileMode::Blob };
    let blob = Oid::hash_file(ObjectType::Blob, full).map_err(std::io::Error::other)?;
    Ok(Some(Version { blob, mode: mode.into() }))
}

/// The same file, whatever its mode bits: an edit of content is what a user notices.
fn same(a: Option<Version>, b: Option<Version>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.blob == b.blob && is_link(a.mode) == is_link(b.mode),
        _ => false,
    }
}

pub(super) fn conflicts(folder: &Path, moves: &[FileMove]) -> Result<Vec<Conflict>, ChangesError> {
    let mut found = Vec::new();
    for m in moves {
        let full = folder.join(&m.path);
        let now = current(&full).map_err(|source| ChangesError::Write { path: full.clone(), source })?;
        // Already where it is going (the user did the same by hand): nothing to overwrite.
        if same(now, m.expect) || same(now, m.target) {
            continue;
        }
        let kind = match (m.expect, now) {
            (Some(_), None) => ConflictKind::Deleted,
            (None, Some(_)) => ConflictKind::Created,
            _ => ConflictKind::Edited,
        };
        found.push(Conflict { path: m.path.clone(), kind });
    }
    Ok(found)
}

pub(super) fn apply(repo: &Repository, folder: &Path, moves: &[FileMove], force: bool) -> Result<(), ChangesError> {
    if !force {
        let found = conflicts(folder, moves)?;
        if !found.is_empty() {
            return Err(ChangesError::Conflicts(found));
        }
    }
    for m in moves {
        let full = folder.join(&m.path);
        let write_err = |source| ChangesError::Write { path: full.clone(), source };
        match m.target {
            Some(v) => {
                let blob = repo.find_blob(v.blob).map_err(|e| ChangesError::Write { path: full.clone(), source: std::io::Error::other(e) })?;
                write_version(&full, blob.content(), v.mode).map_err(write_err)?;
            }
            None => {
                match std::fs::remove_file(&full) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(write_err(e)),
                }
                remove_empty_parents(folder, &full);
            }
        }
    }
    Ok(())
}

/// Write through a temporary file in the same folder and rename it over, so a reader never sees
/// half a file and a failure leaves the old one.
fn write_version(full: &Path, bytes: &[u8], mode: i32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = full.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = temp_path(full);
    if is_link(mode) {
        let target = link_target(bytes);
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp)?;
    } else {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        let perms = if mode == i32::from(FileMode::BlobExecutable) { EXECUTABLE_PERMISSIONS } else { FILE_PERMISSIONS };
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(perms))?;
    }
    // A folder standing where the file goes (rare) is not removed: the rename fails and says so.
    std::fs::rename(&tmp, full).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn temp_path(full: &Path) -> PathBuf {
    let name = full.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    full.with_file_name(format!(".{name}.hearth-{}", uuid::Uuid::new_v4().simple()))
}

/// Remove the folders a deleted file leaves empty, up to (not including) the project folder.
fn remove_empty_parents(folder: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == folder || !d.starts_with(folder) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// A link target as the record keeps it (on Unix, any bytes).
fn link_target(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStringExt as _;
    PathBuf::from(std::ffi::OsString::from_vec(bytes.to_vec()))
}
