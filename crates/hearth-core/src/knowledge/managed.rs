//! The managed folder: Hearth's own copies of imported documents, one folder per library. Every path
//! into it goes through [`resolve_managed`], so no stored or derived name can reach outside it.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use super::error::KnowledgeError;
use super::types::{DocumentId, LibraryId};

/// Folder of one library's copies, relative to the managed root.
pub(crate) fn library_dir(library: LibraryId) -> PathBuf {
    PathBuf::from(format!("library-{}", library.0))
}

/// A document's copy: `library-<id>/<document id>-<file name>`; the id keeps same-named files apart
/// (one file per document, no folder: creating files is the slow part of a big import).
pub(crate) fn document_file(library: LibraryId, document: DocumentId, file_name: &str) -> PathBuf {
    library_dir(library).join(format!("{}-{file_name}", document.0))
}

/// `relative` under the canonical `root`, refused with [`KnowledgeError::OutsideRoot`] if it is
/// absolute, holds `..` (or any non-name part), or passes through a symbolic link that exists inside
/// the root (Hearth never makes links there, so one is a sign of tampering and could lead out).
pub fn resolve_managed(root: &Path, relative: &Path) -> Result<PathBuf, KnowledgeError> {
    let outside = || KnowledgeError::OutsideRoot { path: relative.to_path_buf() };
    if relative.as_os_str().is_empty() || !relative.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(outside());
    }
    let mut prefix = root.to_path_buf();
    for part in relative.components() {
        prefix.push(part);
        match std::fs::symlink_metadata(&prefix) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(outside()),
            Ok(_) => {}
            Err(_) => break, // the rest does not exist yet, so it holds no link
        }
    }
    Ok(root.join(relative))
}

/// Write `bytes` to `relative` under `root` atomically (temp file + rename), creating folders.
pub(crate) fn write(root: &Path, relative: &Path, bytes: &[u8]) -> Result<(), KnowledgeError> {
    let path = resolve_managed(root, relative)?;
    let parent = path.parent().expect("a managed path has a parent");
    std::fs::create_dir_all(parent).map_err(|e| KnowledgeError::io(parent, e))?;
    // Folders now exist: check again so a link swapped in for one of them is caught.
    let path = resolve_managed(root, relative)?;
    let tmp = parent.join(format!(".part-{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(KnowledgeError::io(&path, e));
    }
    Ok(())
}

/// Create the library's folder under `root` if needed and check that no link leads out of it; once
/// per import batch, so the documents written into it need no folder work of their own.
pub(crate) fn library_folder(root: &Path, library: LibraryId) -> Result<(), KnowledgeError> {
    let relative = library_dir(library);
    let path = resolve_managed(root, &relative)?;
    std::fs::create_dir_all(&path).map_err(|e| KnowledgeError::io(&path, e))?;
    // The folder exists now: check again so a link swapped in for it is caught.
    resolve_managed(root, &relative)?;
    Ok(())
}

/// Write a new document's copy in place, in a folder [`library_folder`] made. No temp file and rename
/// (they were a third of the file system work of an import): a new document's id is unused, so no
/// reader can see the file before the transaction naming it commits, and a copy left half-written by
/// a crash belongs to no document. `O_NOFOLLOW` refuses a link planted at the name after the check.
pub(crate) fn write_new(root: &Path, relative: &Path, bytes: &[u8]) -> Result<(), KnowledgeError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = resolve_managed(root, relative)?;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut file| file.write_all(bytes));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&path);
        return Err(KnowledgeError::io(&path, e));
    }
    Ok(())
}

/// Remove a file or folder (with everything in it) under `root`; a missing one is fine.
pub(crate) fn remove(root: &Path, relative: &Path) -> Result<(), KnowledgeError> {
    let path = resolve_managed(root, relative)?;
    let removed = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path),
        Ok(_) => std::fs::remove_file(&path),
        Err(e) => Err(e),
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(KnowledgeError::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_absolute_and_empty_paths_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for bad in ["../x", "library-1/../../x", "library-1/..", "/etc/passwd", "", "./x"] {
            let err = resolve_managed(&root, Path::new(bad)).unwrap_err();
            assert!(matches!(err, KnowledgeError::OutsideRoot { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("outside Hearth's knowledge folder"));
        }
        assert_eq!(resolve_managed(&root, Path::new("library-1/2/a.md")).unwrap(), root.join("library-1/2/a.md"));
    }

    #[test]
    fn a_symlink_inside_the_root_is_refused_and_nothing_is_written_through_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join("library-1")).unwrap();
        let err = write(&root, Path::new("library-1/3/a.md"), b"secret").unwrap_err();
        assert!(matches!(err, KnowledgeError::OutsideRoot { .. }), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // A link as the final name (pointing at a file outside) is refused too.
        std::fs::create_dir_all(root.join("library-2/3")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("f"), root.join("library-2/3/a.md")).unwrap();
        assert!(matches!(write(&root, Path::new("library-2/3/a.md"), b"x"), Err(KnowledgeError::OutsideRoot { .. })));
        assert!(!elsewhere.join("f").exists());
    }

    #[test]
    fn write_replaces_atomically_and_remove_tolerates_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, Path::new("library-1/1/a.md"), b"one").unwrap();
        write(root, Path::new("library-1/1/a.md"), b"two").unwrap();
        assert_eq!(std::fs::read(root.join("library-1/1/a.md")).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(root.join("library-1/1")).unwrap().count(), 1, "no temp file left");
        write(root, Path::new("library-1/2-b.md"), b"b").unwrap();
        remove(root, Path::new("library-1/2-b.md")).unwrap();
        assert!(!root.join("library-1/2-b.md").exists() && root.join("library-1/1/a.md").exists());
        remove(root, Path::new("library-1")).unwrap();
        assert!(!root.join("library-1").exists());
        remove(root, Path::new("library-1")).unwrap();
    }

    #[test]
    fn a_new_copy_is_written_in_place_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        library_folder(&root, LibraryId(1)).unwrap();
        write_new(&root, Path::new("library-1/7-a.md"), b"first").unwrap();
        write_new(&root, Path::new("library-1/7-a.md"), b"new").unwrap();
        assert_eq!(std::fs::read(root.join("library-1/7-a.md")).unwrap(), b"new", "a crash's leftover is replaced");
        assert_eq!(std::fs::read_dir(root.join("library-1")).unwrap().count(), 1, "no temp file");
        // A link at the name, or as the library folder, is refused and nothing is written through it.
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("library-1/8-b.md")).unwrap();
        assert!(write_new(&root, Path::new("library-1/8-b.md"), b"x").is_err());
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        std::os::unix::fs::symlink(tmp.path(), root.join("library-2")).unwrap();
        assert!(matches!(library_folder(&root, LibraryId(2)), Err(KnowledgeError::OutsideRoot { .. })));
    }
}
