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
    #[error("Hearth could not create its data folder {path}: {source}. Make sure the folder can be created, or start Hearth with {DATA_DIR_ENV} set to a writable folder.")]
    Create { path: PathBuf, source: std::io::Error },
    #[error("Hearth cannot write to its data folder {path} ({source}). Your conversations and settings live there: make it writable, or start Hearth with {DATA_DIR_ENV} set to a writable folder.")]
    NotWritable { path: PathBuf, source: std::io::Error },
}

/// File created and removed to prove the data folder takes writes (permission bits do not stop
/// root, a read-only mount does: only a real write tells). Named per process, so two Hearths
/// starting at once never remove each other's probe.
const WRITE_PROBE_PREFIX: &str = ".hearth-write-probe-";

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

    /// Create every folder, readable by the user only (conversations and logs are private), and
    /// prove the data folder takes writes, so a read-only one is named at start-up, not mid-turn.
    pub fn ensure(&self) -> Result<(), PathsError> {
        for dir in [&self.data_dir, &self.log_dir, &self.probe_dir] {
            create_private_dir(dir)?;
        }
        let probe = self.data_dir.join(format!("{WRITE_PROBE_PREFIX}{}", std::process::id()));
        std::fs::write(&probe, b"ok")
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|source| PathsError::NotWritable { path: self.data_dir.clone(), source })
    }
}

fn create_private_dir(dir: &Path) -> Result<(), PathsError> {
    let not_writable = |source| PathsError::NotWritable { path: dir.to_path_buf(), source };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|source| match source.kind() {
            std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => not_writable(source),
            _ => PathsError::Create { path: dir.to_path_buf(), source },
        })?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let private = std::fs::Permissions::from_mode(0o700);
        let mode = std::fs::metadata(dir).map_err(not_writable)?.permissions().mode() & 0o777;
        if mode != 0o700 {
            std::fs::set_permissions(dir, private).map_err(not_writable)?;
        }
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

    /// A read-only mount (which stops root too): needs root to mount, as CI and this machine have.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_only_data_folder_is_named_with_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let ro = tmp.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        let mounted = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"]).arg(&ro).status();
        assert!(matches!(mounted, Ok(s) if s.success()), "mounting a read-only tmpfs needs root (CI runs as root)");
        let result = AppPaths::under(ro.join("hearth")).ensure();
        let existing = AppPaths::under(&ro).ensure();
        let _ = std::process::Command::new("umount").arg(&ro).status();
        let msg = result.unwrap_err().to_string();
        assert!(msg.starts_with("Hearth cannot write to its data folder"), "{msg}");
        assert!(msg.contains(DATA_DIR_ENV) && msg.contains("ro/hearth"), "{msg}");
        // An existing folder that is read-only is caught too (by the write probe or the chmod).
        assert!(existing.unwrap_err().to_string().starts_with("Hearth cannot write to its data folder"));
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
