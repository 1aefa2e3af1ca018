//! Secrets (model API keys, MCP server environment values) kept OUTSIDE the settings database, so a
//! copied or shared `hearth.sqlite3` never carries them and the UI never receives them.
//!
//! A platform keyring (macOS Keychain, Windows Credential Manager, the Secret Service on Linux desktops)
//! would be preferred where available; headless Linux (CI, servers, WSL) has no Secret Service, so the
//! implementation here is a private file: JSON, mode 0600, in Hearth's 0700 data folder. A keyring
//! implementation can be added behind the same [`SecretStore`] trait.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File name of the secrets file inside the data folder.
pub const SECRETS_FILE_NAME: &str = "secrets.json";
/// Longest secret accepted (an API key or an environment value).
pub const MAX_SECRET_BYTES: usize = 16 * 1024;
/// Longest secret name (e.g. `profile:<uuid>` or `mcp:<uuid>:GITHUB_TOKEN`).
pub const MAX_SECRET_NAME_BYTES: usize = 256;
/// Most secrets kept in one file; far above real use, it keeps a runaway caller from growing the file.
pub const MAX_SECRETS: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("Hearth could not read its secrets file {path}: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("Hearth could not save its secrets file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("This secret is {len} bytes long; Hearth accepts secrets up to {MAX_SECRET_BYTES} bytes.")]
    TooLong { len: usize },
    #[error("A secret cannot be empty; remove it instead.")]
    Empty,
    #[error("The secret name {name:?} is not valid.")]
    BadName { name: String },
    #[error("Hearth keeps at most {MAX_SECRETS} secrets.")]
    TooMany,
}

/// Where secrets live. Names are chosen by the caller (the store uses `profile:<id>` and
/// `mcp:<id>:<ENV_NAME>`); values never reach the UI.
pub trait SecretStore: Send + Sync + std::fmt::Debug {
    fn set(&self, name: &str, secret: &str) -> Result<(), SecretError>;
    fn get(&self, name: &str) -> Result<Option<String>, SecretError>;
    /// Removing a secret that is not there is not an error.
    fn delete(&self, name: &str) -> Result<(), SecretError>;
}

/// Secrets in a JSON file readable by the user only. Loaded once, written through atomically (temp
/// file created 0600, then renamed over), so a crash mid-write leaves the previous file intact.
#[derive(Debug)]
pub struct FileSecretStore {
    path: PathBuf,
    entries: Mutex<BTreeMap<String, String>>,
}

impl FileSecretStore {
    /// Open (or start) the secrets file at `path`. A missing file is an empty store.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SecretError> {
        let path = path.into();
        let entries = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| SecretError::Read { path: path.clone(), detail: format!("it is not valid JSON ({e})") })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(SecretError::Read { path, detail: e.to_string() }),
        };
        Ok(Self { path, entries: Mutex::new(entries) })
    }

    /// The secrets file in Hearth's data folder.
    pub fn in_data_dir(data_dir: &Path) -> Result<Self, SecretError> {
        Self::open(data_dir.join(SECRETS_FILE_NAME))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        // A panic while holding the lock cannot leave the map half-changed (each change is one insert
        // or remove), so a poisoned lock is still safe to use.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, entries: &BTreeMap<String, String>) -> Result<(), SecretError> {
        let err = |source| SecretError::Write { path: self.path.clone(), source };
        let bytes = serde_json::to_vec_pretty(entries).expect("a string map always serialises");
        let tmp = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp).map_err(err)?;
        file.write_all(&bytes).and_then(|_| file.sync_all()).map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)?;
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), SecretError> {
    if name.is_empty() || name.len() > MAX_SECRET_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(SecretError::BadName { name: name.chars().take(64).collect() });
    }
    Ok(())
}

impl SecretStore for FileSecretStore {
    fn set(&self, name: &str, secret: &str) -> Result<(), SecretError> {
        check_name(name)?;
        if secret.is_empty() {
            return Err(SecretError::Empty);
        }
        if secret.len() > MAX_SECRET_BYTES {
            return Err(SecretError::TooLong { len: secret.len() });
        }
        let mut entries = self.lock();
        if !entries.contains_key(name) && entries.len() >= MAX_SECRETS {
            return Err(SecretError::TooMany);
        }
        let previous = entries.insert(name.to_owned(), secret.to_owned());
        if let Err(e) = self.save(&entries) {
            // Keep memory and disk in agreement.
            match previous {
                Some(p) => entries.insert(name.to_owned(), p),
                None => entries.remove(name),
            };
            return Err(e);
        }
        tracing::debug!(name, "secret saved");
        Ok(())
    }

    fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        Ok(self.lock().get(name).cloned())
    }

    fn delete(&self, name: &str) -> Result<(), SecretError> {
        let mut entries = self.lock();
        if let Some(previous) = entries.remove(name) {
            if let Err(e) = self.save(&entries) {
                entries.insert(name.to_owned(), previous);
                return Err(e);
            }
            tracing::debug!(name, "secret deleted");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_survive_reopening_and_deletes_stick() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::in_data_dir(dir.path()).unwrap();
        assert_eq!(store.get("profile:a").unwrap(), None);
        store.set("profile:a", "sk-one").unwrap();
        store.set("profile:b", "sk-two").unwrap();
        store.set("profile:a", "sk-three").unwrap();
        store.delete("profile:b").unwrap();
        store.delete("profile:never").unwrap();

        let reopened = FileSecretStore::in_data_dir(dir.path()).unwrap();
        assert_eq!(reopened.get("profile:a").unwrap().as_deref(), Some("sk-three"));
        assert_eq!(reopened.get("profile:b").unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn secrets_file_is_readable_by_the_user_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::in_data_dir(dir.path()).unwrap();
        store.set("profile:a", "sk-secret").unwrap();
        let mode = std::fs::metadata(store.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "secrets file mode is {mode:o}");
    }

    #[test]
    fn bad_secrets_are_refused_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::in_data_dir(dir.path()).unwrap();
        let long = "x".repeat(MAX_SECRET_BYTES + 1);
        assert!(store.set("k", &long).unwrap_err().to_string().contains("accepts secrets up to"));
        assert!(matches!(store.set("k", ""), Err(SecretError::Empty)));
        assert!(matches!(store.set("", "v"), Err(SecretError::BadName { .. })));
    }

    #[test]
    fn a_corrupt_secrets_file_is_a_clear_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SECRETS_FILE_NAME), b"{not json").unwrap();
        let err = FileSecretStore::in_data_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
    }
}
