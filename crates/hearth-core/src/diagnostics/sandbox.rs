//! A throw-away sandbox for a self-check: a temporary folder holding the check's project folders and
//! its runtime's private root (HOME, XDG folders, database). Nothing outside it is touched, so the
//! user's projects, settings and sessions stay as they were. It is removed when the check ends, on
//! failure and cancellation too (explicitly with [`Sandbox::remove`], else when dropped).

use std::path::{Path, PathBuf};

/// Name prefix of every sandbox folder, so a leftover (after a power cut) is recognisable.
pub const SANDBOX_PREFIX: &str = "hearth-selftest-";

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("Could not create the self-test sandbox in {parent}: {source}")]
    Create { parent: PathBuf, source: std::io::Error },
    #[error("Could not create the sandbox folder {path}: {source}")]
    Folder { path: PathBuf, source: std::io::Error },
    #[error("Could not remove the self-test sandbox {path}: {source}")]
    Remove { path: PathBuf, source: std::io::Error },
}

#[derive(Debug)]
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// Canonical path of `dir` (the runtime reports canonical project paths).
    root: PathBuf,
}

/// Below this much free space the sandbox's disk counts as full.
pub const DISK_FULL_BYTES: u64 = 1024 * 1024;
/// How often a running check looks at the sandbox's free space.
pub const DISK_WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(250);
/// A disk full this long stops the check: the runtime does not fail its writes on a full disk, it
/// stalls, so waiting for a step's own timeout would cost minutes.
pub const DISK_FULL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

impl Sandbox {
    /// A fresh sandbox under `parent` (the system temporary folder when `None`).
    pub fn create(parent: Option<&Path>) -> Result<Self, SandboxError> {
        let parent = parent.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        let create = |source| SandboxError::Create { parent: parent.clone(), source };
        let dir = tempfile::Builder::new().prefix(SANDBOX_PREFIX).tempdir_in(&parent).map_err(create)?;
        let root = dir.path().canonicalize().map_err(create)?;
        Ok(Self { dir, root })
    }

    /// Bytes free on the sandbox's file system, if the system says.
    pub fn free_bytes(&self) -> Option<u64> {
        let st = nix::sys::statvfs::statvfs(self.path()).ok()?;
        Some(st.blocks_available() * st.fragment_size())
    }

    /// Resolves (with the free bytes) once the disk has stayed full for [`DISK_FULL_GRACE`]; never
    /// otherwise.
    pub async fn until_full_for_grace(&self) -> u64 {
        let mut full_since: Option<tokio::time::Instant> = None;
        loop {
            match self.disk_full() {
                Some(free) if full_since.is_some_and(|since| since.elapsed() >= DISK_FULL_GRACE) => return free,
                Some(_) => {
                    full_since.get_or_insert_with(tokio::time::Instant::now);
                }
                None => full_since = None,
            }
            tokio::time::sleep(DISK_WATCH_POLL).await;
        }
    }

    /// Is the disk under the sandbox full (a step's failure is then most likely that)?
    pub fn disk_full(&self) -> Option<u64> {
        self.free_bytes().filter(|&free| free < DISK_FULL_BYTES)
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// A project folder inside the sandbox, created with the given files.
    pub fn project(&self, name: &str, files: &[(&str, &str)]) -> Result<PathBuf, SandboxError> {
        let path = self.root.join("projects").join(name);
        let folder = |source| SandboxError::Folder { path: path.clone(), source };
        std::fs::create_dir_all(&path).map_err(folder)?;
        for (file, content) in files {
            std::fs::write(path.join(file), content).map_err(folder)?;
        }
        Ok(path)
    }

    /// The runtime's private root (created by the launcher).
    pub fn runtime_root(&self) -> PathBuf {
        self.root.join("runtime")
    }

    /// Remove the sandbox now, reporting a failure (dropping it removes it silently).
    pub fn remove(self) -> Result<(), SandboxError> {
        let path = self.root.clone();
        self.dir.close().map_err(|source| SandboxError::Remove { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lives_under_its_parent_and_is_removed_entirely() {
        let parent = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::create(Some(parent.path())).unwrap();
        let project = sandbox.project("a", &[("marker.txt", "PROJECT_1")]).unwrap();
        assert!(project.starts_with(parent.path().canonicalize().unwrap()));
        assert_eq!(std::fs::read_to_string(project.join("marker.txt")).unwrap(), "PROJECT_1");
        std::fs::create_dir_all(sandbox.runtime_root().join("data")).unwrap();
        let path = sandbox.path().to_path_buf();
        assert!(path.file_name().unwrap().to_str().unwrap().starts_with(SANDBOX_PREFIX));
        sandbox.remove().unwrap();
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn dropping_removes_it_too() {
        let parent = tempfile::tempdir().unwrap();
        let path = {
            let sandbox = Sandbox::create(Some(parent.path())).unwrap();
            sandbox.project("b", &[]).unwrap();
            sandbox.path().to_path_buf()
        };
        assert!(!path.exists());
    }

    #[test]
    fn a_missing_parent_is_a_clear_error() {
        let err = Sandbox::create(Some(Path::new("/nonexistent/hearth"))).unwrap_err();
        assert!(err.to_string().starts_with("Could not create the self-test sandbox in /nonexistent/hearth"), "{err}");
    }
}
