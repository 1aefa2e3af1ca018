//! Execution spaces: where a conversation's agent works — a folder on this machine, or a folder on
//! another host reached over SSH (`remote/`).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpaceError {
    #[error("The project folder {path} does not exist (was it moved or deleted?).")]
    Missing { path: PathBuf },
    #[error("{path} is not a folder; a project must be a folder.")]
    NotAFolder { path: PathBuf },
    #[error("The project folder {path} cannot be opened: {detail}")]
    Unreadable { path: PathBuf, detail: String },
    #[error("A project path must be absolute, got {path}.")]
    Relative { path: PathBuf },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SpaceKind {
    Local,
    /// A folder on `host` (anything `ssh` takes), resolved there.
    Ssh { host: String },
}

/// A resolved place to run in. Two spellings of one folder (symlink, trailing slash, `..`) resolve to
/// one `root` and one `cache_identity`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExecutionSpace {
    pub kind: SpaceKind,
    /// Canonical real path.
    pub root: PathBuf,
    /// Stable key for caches: kind + canonical root.
    pub cache_identity: String,
}

impl ExecutionSpace {
    pub fn root_str(&self) -> &str {
        self.root.to_str().unwrap_or_default()
    }

    /// The host the folder is on, when it is not this machine.
    pub fn host(&self) -> Option<&str> {
        match &self.kind {
            SpaceKind::Local => None,
            SpaceKind::Ssh { host } => Some(host),
        }
    }

    pub fn is_local(&self) -> bool {
        self.kind == SpaceKind::Local
    }
}

/// A folder on `host`, as the host resolved it (`pwd -P` there): it must be absolute.
pub fn remote(host: &str, root: &str) -> Result<ExecutionSpace, SpaceError> {
    let path = PathBuf::from(root);
    if !path.is_absolute() {
        return Err(SpaceError::Relative { path });
    }
    let cache_identity = format!("ssh:{host}:{}", path.display());
    Ok(ExecutionSpace { kind: SpaceKind::Ssh { host: host.to_string() }, root: path, cache_identity })
}

/// Resolve a local folder to its execution space.
pub fn resolve_local(path: impl AsRef<Path>) -> Result<ExecutionSpace, SpaceError> {
    let path = path.as_ref();
    if !path.is_absolute() {
        return Err(SpaceError::Relative { path: path.into() });
    }
    let root = std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpaceError::Missing { path: path.into() },
        _ => SpaceError::Unreadable { path: path.into(), detail: e.to_string() },
    })?;
    if !root.is_dir() {
        return Err(SpaceError::NotAFolder { path: path.into() });
    }
    let cache_identity = format!("local:{}", root.display());
    Ok(ExecutionSpace { kind: SpaceKind::Local, root, cache_identity })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_folder_share_an_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("proj");
        std::fs::create_dir_all(real.join("sub")).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let a = resolve_local(&real).unwrap();
        let spellings = [
            link.clone(),
            PathBuf::from(format!("{}/", real.display())),
            real.join("sub/.."),
            link.join("sub/../"),
        ];
        for s in spellings {
            let b = resolve_local(&s).unwrap();
            assert_eq!(a.cache_identity, b.cache_identity, "{}", s.display());
            assert_eq!(a.root, b.root);
        }
        assert_eq!(a.root, std::fs::canonicalize(&real).unwrap());
        assert_ne!(resolve_local(real.join("sub")).unwrap().cache_identity, a.cache_identity);
    }

    #[test]
    fn bad_paths_are_clear_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("gone");
        assert_eq!(resolve_local(&missing), Err(SpaceError::Missing { path: missing.clone() }));
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(resolve_local(&file), Err(SpaceError::NotAFolder { .. })));
        assert!(matches!(resolve_local("rel/dir"), Err(SpaceError::Relative { .. })));
        assert!(resolve_local(&missing).unwrap_err().to_string().contains("does not exist"));
    }
}
