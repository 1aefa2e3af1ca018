//! A package's files: listed within the bounds, links kept inside, and copied or hashed with each
//! read bounded by the length seen when listing (a file that changes in between is reported).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{PackageFile, SkillError, SkillPackage, MAX_FILE_BYTES, MAX_PACKAGE_BYTES, MAX_PACKAGE_DEPTH, MAX_PACKAGE_FILES, MAX_SKILL_FILE_BYTES, SKILL_FILE};

/// Bytes read at a time when copying or hashing.
const CHUNK_BYTES: usize = 64 * 1024;

/// SHA-256 of one file's content.
pub(super) type FileDigest = [u8; 32];

/// Every file under `root`, sorted, checked against the package bounds. Links are followed only
/// when they lead to somewhere inside the package; a FIFO or device is refused, never opened.
pub(super) fn inventory(root: &Path, folder: &str) -> Result<Vec<PackageFile>, SkillError> {
    let inside = root.canonicalize().map_err(|source| SkillError::Unreadable { folder: folder.into(), file: ".".into(), source })?;
    let relative = |p: &Path| p.strip_prefix(root).unwrap_or(p).to_path_buf();
    let (mut files, mut total) = (Vec::new(), 0u64);
    for entry in walkdir::WalkDir::new(root).follow_links(true).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| walk_problem(e, root, &inside, folder))?;
        let rel = relative(entry.path());
        // The link entry comes before its contents: an outside target is refused before any of it is read.
        if entry.path_is_symlink() {
            let target = entry.path().canonicalize().map_err(|_| SkillError::BrokenLink { folder: folder.into(), link: rel.clone() })?;
            if !target.starts_with(&inside) {
                return Err(SkillError::LinkOutside { folder: folder.into(), link: rel });
            }
        }
        let kind = entry.file_type();
        if kind.is_dir() {
            if entry.depth() > MAX_PACKAGE_DEPTH {
                return Err(SkillError::TooDeep { folder: folder.into(), dir: rel });
            }
            continue;
        }
        if !kind.is_file() {
            return Err(SkillError::SpecialFile { folder: folder.into(), file: rel });
        }
        if entry.depth() > 1 && entry.file_name() == SKILL_FILE {
            return Err(SkillError::NestedSkill { folder: folder.into(), file: rel });
        }
        let len = entry.metadata().map_err(|e| walk_problem(e, root, &inside, folder))?.len();
        if rel == Path::new(SKILL_FILE) && len > MAX_SKILL_FILE_BYTES {
            return Err(SkillError::SkillFileTooLarge { folder: folder.into() });
        }
        if len > MAX_FILE_BYTES {
            return Err(SkillError::FileTooLarge { folder: folder.into(), file: rel });
        }
        total += len;
        if total > MAX_PACKAGE_BYTES {
            return Err(SkillError::TooLarge { folder: folder.into() });
        }
        if files.len() == MAX_PACKAGE_FILES {
            return Err(SkillError::TooManyFiles { folder: folder.into() });
        }
        files.push(PackageFile { relative: rel, len });
    }
    Ok(files)
}

fn walk_problem(e: walkdir::Error, root: &Path, inside: &Path, folder: &str) -> SkillError {
    let path = e.path().map(|p| p.strip_prefix(root).unwrap_or(p).to_path_buf()).unwrap_or_default();
    let is_link = e.path().and_then(|p| p.symlink_metadata().ok()).is_some_and(|m| m.file_type().is_symlink());
    if is_link {
        // A link to a folder above the package is reported by the walk as a loop: it leads outside.
        return match e.path().and_then(|p| p.canonicalize().ok()) {
            None => SkillError::BrokenLink { folder: folder.into(), link: path },
            Some(target) if !target.starts_with(inside) => SkillError::LinkOutside { folder: folder.into(), link: path },
            Some(_) => SkillError::LinkLoop { folder: folder.into(), link: path },
        };
    }
    let source = e.into_io_error().unwrap_or_else(|| std::io::Error::other("the folder could not be walked"));
    SkillError::Unreadable { folder: folder.into(), file: path, source }
}

/// Open a file for reading only if it is a regular file (non-blocking, so a FIFO swapped in
/// since the listing cannot hang the caller).
fn open_regular(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a plain file"));
    }
    Ok(file)
}

/// The whole file, refused past `limit` bytes.
pub(super) fn read_whole(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(std::io::ErrorKind::FileTooLarge, format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// Why copying or hashing a package stopped.
pub(super) enum CopyFailure {
    /// The package is at fault (it changed, or cannot be read): it is left out.
    Package(SkillError),
    /// Writing the copy failed: nothing is staged.
    Write(PathBuf, std::io::Error),
}

/// Feed `file`'s bytes to `sink`, exactly `expected` of them, and return their digest.
fn pump(package: &SkillPackage, file: &PackageFile, mut sink: impl FnMut(&[u8]) -> std::io::Result<()>) -> Result<FileDigest, CopyFailure> {
    let unreadable = |source| CopyFailure::Package(SkillError::Unreadable { folder: package.name.clone(), file: file.relative.clone(), source });
    let changed = || CopyFailure::Package(SkillError::Changed { folder: package.name.clone(), file: file.relative.clone() });
    let mut reader = open_regular(&package.dir.join(&file.relative)).map_err(unreadable)?.take(file.len + 1);
    let (mut hasher, mut seen, mut buf) = (Sha256::new(), 0u64, vec![0u8; CHUNK_BYTES]);
    loop {
        let n = reader.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            break;
        }
        seen += n as u64;
        if seen > file.len {
            return Err(changed());
        }
        hasher.update(&buf[..n]);
        sink(&buf[..n]).map_err(|e| CopyFailure::Write(PathBuf::new(), e))?;
    }
    if seen != file.len {
        return Err(changed());
    }
    Ok(hasher.finalize().into())
}

pub(super) fn digest(package: &SkillPackage, file: &PackageFile) -> Result<FileDigest, CopyFailure> {
    pump(package, file, |_| Ok(()))
}

/// Copy the package's listed files into `dest` (created), plain files only, keeping the
/// executable bit; returns each file's digest in listing order.
pub(super) fn copy_package(package: &SkillPackage, dest: &Path) -> Result<Vec<FileDigest>, CopyFailure> {
    let mut digests = Vec::with_capacity(package.files.len());
    for file in &package.files {
        let target = dest.join(&file.relative);
        let write_err = |e| CopyFailure::Write(target.clone(), e);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(write_err)?;
        }
        let mut out = OpenOptions::new().write(true).create_new(true).mode(0o644).open(&target).map_err(write_err)?;
        let digest = pump(package, file, |chunk| out.write_all(chunk)).map_err(|e| match e {
            CopyFailure::Write(_, e) => CopyFailure::Write(target.clone(), e),
            other => other,
        })?;
        let source_mode = std::fs::metadata(package.dir.join(&file.relative)).map(|m| m.permissions().mode()).unwrap_or(0o644);
        if source_mode & 0o111 != 0 {
            out.set_permissions(std::fs::Permissions::from_mode(0o755)).map_err(write_err)?;
        }
        digests.push(digest);
    }
    Ok(digests)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{package, skill_md};
    use super::super::{load, SkillError, MAX_PACKAGE_DEPTH, MAX_PACKAGE_FILES};
    use super::*;

    fn problem(dir: &Path) -> SkillError {
        load(dir).unwrap_err()
    }

    #[test]
    fn files_are_listed_sorted_with_their_lengths() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = package(tmp.path(), "alpha", &skill_md("alpha"));
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "echo hi\n").unwrap();
        std::os::unix::fs::symlink("scripts/run.sh", dir.join("run-link.sh")).unwrap();
        let p = load(&dir).unwrap();
        let listed: Vec<_> = p.files.iter().map(|f| (f.relative.to_str().unwrap(), f.len)).collect();
        assert_eq!(listed, [("SKILL.md", skill_md("alpha").len() as u64), ("run-link.sh", 8), ("scripts/run.sh", 8)], "a link inside the package is a file of it");
    }

    #[test]
    fn each_bound_refuses_the_package_with_its_own_sentence() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();

        let many = package(r, "many", &skill_md("many"));
        for i in 0..MAX_PACKAGE_FILES {
            std::fs::write(many.join(format!("f{i}")), "x").unwrap();
        }
        assert!(matches!(problem(&many), SkillError::TooManyFiles { .. }));
        assert_eq!(problem(&many).to_string(), format!("The skill folder `many` holds more than {MAX_PACKAGE_FILES} files."));

        let big = package(r, "big", &skill_md("big"));
        std::fs::File::create(big.join("blob.bin")).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
        assert_eq!(problem(&big).to_string(), "blob.bin in the skill folder `big` is larger than 4 MiB.");

        let heavy = package(r, "heavy", &skill_md("heavy"));
        for i in 0..3 {
            std::fs::File::create(heavy.join(format!("part{i}"))).unwrap().set_len(MAX_FILE_BYTES).unwrap();
        }
        assert_eq!(problem(&heavy).to_string(), "The skill folder `heavy` holds more than 8 MiB.");

        let wordy = package(r, "wordy", &format!("{}{}", skill_md("wordy"), "x".repeat(MAX_SKILL_FILE_BYTES as usize)));
        assert!(matches!(problem(&wordy), SkillError::SkillFileTooLarge { .. }));

        let deep = package(r, "deep", &skill_md("deep"));
        let mut path = deep.clone();
        for i in 0..=MAX_PACKAGE_DEPTH {
            path = path.join(format!("d{i}"));
        }
        std::fs::create_dir_all(&path).unwrap();
        assert!(matches!(problem(&deep), SkillError::TooDeep { .. }), "{}", problem(&deep));
    }

    #[test]
    fn links_must_stay_inside_and_special_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        std::fs::write(r.join("secret.txt"), "outside").unwrap();

        let out = package(r, "out", &skill_md("out"));
        std::os::unix::fs::symlink(r.join("secret.txt"), out.join("secret.txt")).unwrap();
        assert_eq!(problem(&out).to_string(), "The symbolic link secret.txt in the skill folder `out` leads outside the package.");

        let outdir = package(r, "outdir", &skill_md("outdir"));
        std::os::unix::fs::symlink("/", outdir.join("root")).unwrap();
        assert!(matches!(problem(&outdir), SkillError::LinkOutside { .. }));

        let up = package(r, "up", &skill_md("up"));
        std::os::unix::fs::symlink("../out", up.join("sibling")).unwrap();
        assert!(matches!(problem(&up), SkillError::LinkOutside { .. }), "a relative link climbing out is outside too");

        let dangling = package(r, "dangling", &skill_md("dangling"));
        std::os::unix::fs::symlink("nothing-here", dangling.join("gone")).unwrap();
        assert!(matches!(problem(&dangling), SkillError::BrokenLink { .. }), "{}", problem(&dangling));

        let looped = package(r, "looped", &skill_md("looped"));
        std::os::unix::fs::symlink(".", looped.join("again")).unwrap();
        assert!(matches!(problem(&looped), SkillError::LinkLoop { .. }), "{}", problem(&looped));

        let fifo = package(r, "fifo", &skill_md("fifo"));
        let c = std::ffi::CString::new(fifo.join("pipe").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(problem(&fifo), SkillError::SpecialFile { .. }));

        let nested = package(r, "nested", &skill_md("nested"));
        package(&nested, "inner", &skill_md("inner"));
        assert_eq!(problem(&nested).to_string(), "The skill folder `nested` holds a second SKILL.md (inner/SKILL.md); a package holds one skill.");
    }

    #[test]
    fn copies_keep_content_and_the_executable_bit_and_notice_a_change() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = package(tmp.path(), "alpha", &skill_md("alpha"));
        std::fs::write(dir.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(dir.join("run.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let p = load(&dir).unwrap();
        let dest = tmp.path().join("copy");
        let digests = copy_package(&p, &dest).ok().unwrap();
        assert_eq!(digests[0], <[u8; 32]>::from(Sha256::digest(skill_md("alpha").as_bytes())));
        assert_eq!(std::fs::read_to_string(dest.join("run.sh")).unwrap(), "#!/bin/sh\n");
        assert_eq!(std::fs::metadata(dest.join("run.sh")).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::metadata(dest.join("SKILL.md")).unwrap().permissions().mode() & 0o777, 0o644);

        // The file grew after it was listed: the copy stops and names it.
        std::fs::write(dir.join("run.sh"), "#!/bin/sh\necho more\n").unwrap();
        match copy_package(&p, &tmp.path().join("copy2")) {
            Err(CopyFailure::Package(SkillError::Changed { file, .. })) => assert_eq!(file, Path::new("run.sh")),
            _ => panic!("a changed file is reported"),
        }
    }
}
