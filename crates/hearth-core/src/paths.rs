//! Where Hearth keeps its own files. One data folder per user (override: `HEARTH_DATA_DIR`, used by
//! tests and the e2e suite so they never touch a user's real data).

use std::path::{Path, PathBuf};

/// Environment variable that moves the whole data folder.
pub const DATA_DIR_ENV: &str = "HEARTH_DATA_DIR";
/// Folder name under the platform's data directory.
pub const APP_DIR_NAME: &str = "hearth";

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("Hearth could not find a data folder for this user: the platform reports no home or data directory. Set {DATA_DIR_ENV} to a writable folder.")]
    NoDataDir,
    #[error("Hearth could not create its data folder {path}: {source}")]
    Create { path: PathBuf, source: std::io::Error },
}

/// The folders Hearth writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPaths {
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
    /// Scratch home for short probes of child programs (e.g. `opencode --version`), so they never
    /// write into the user's own home.
    pub probe_dir: PathBuf,
}

impl AppPaths {
    pub fn under(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        Self {
            log_dir: data_dir.join("logs"),
            probe_dir: data_dir.join("probe"),
            data_dir,
        }
    }

    /// Resolve from the environment override, else the platform data directory.
    pub fn resolve() -> Result<Self, PathsError> {
        Self::resolve_with(std::env::var_os(DATA_DIR_ENV).map(PathBuf::from), dirs::data_dir())
    }

    fn resolve_with(
        env_override: Option<PathBuf>,
        platform: Option<PathBuf>,
    ) -> Result<Self, PathsError> {
        match env_override.filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => Ok(Self::under(dir)),
            None => platform
                .map(|d| Self::under(d.join(APP_DIR_NAME)))
                .ok_or(PathsError::NoDataDir),
        }
    }

    /// Create every folder, readable by the user only: conversations and logs are private.
    pub fn ensure(&self) -> Result<(), PathsError> {
        for dir in [&self.data_dir, &self.log_dir, &self.probe_dir] {
            create_private_dir(dir)?;
        }
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> Result<(), PathsError> {
    let err = |source| PathsError::Create { path: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_wins_over_platform_dir() {
        let p = AppPaths::resolve_with(Some("/x/custom".into()), Some("/home/u/.local/share".into()))
            .unwrap();
        assert_eq!(p.data_dir, PathBuf::from("/x/custom"));
        assert_eq!(p.log_dir, PathBuf::from("/x/custom/logs"));
    }

    #[test]
    fn empty_override_is_ignored() {
        let p = AppPaths::resolve_with(Some("".into()), Some("/d".into())).unwrap();
        assert_eq!(p.data_dir, PathBuf::from("/d/hearth"));
    }

    #[test]
    fn no_platform_dir_is_a_clear_error() {
        let e = AppPaths::resolve_with(None, None).unwrap_err();
        assert!(e.to_string().contains(DATA_DIR_ENV), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn ensure_creates_private_folders() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = AppPaths::under(tmp.path().join("data"));
        p.ensure().unwrap();
        p.ensure().unwrap(); // idempotent
        let mode = std::fs::metadata(&p.log_dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn unwritable_location_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let e = AppPaths::under(file.join("data")).ensure().unwrap_err();
        assert!(e.to_string().contains("could not create its data folder"), "{e}");
    }
}
