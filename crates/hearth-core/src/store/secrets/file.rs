//! Secrets in a private file: JSON, mode 0600, in Hearth's 0700 data folder. Used where no desktop
//! keyring answers (headless Linux: CI, servers, WSL), and the place older Hearths kept every key.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{check_secret, SecretError, SecretStore, SecretsLocation, SecretsPlace, MAX_SECRETS};

/// File name of the secrets file inside the data folder.
pub const SECRETS_FILE_NAME: &str = "secrets.json";

/// Secrets in a JSON file readable by the user only. Loaded once, written through atomically (temp
/// file created 0600, then renamed over), so a crash mid-write leaves the previous file intact.
#[derive(Debug)]
pub struct FileSecretStore {
    path: PathBuf,
    entries: Mutex<BTreeMap<String, String>>,
    /// Kept here because no desktop keyring answered at start-up (said so in the Runtime view).
    no_keyring: bool,
}

impl FileSecretStore {
    /// Open (or start) the secrets file at `path`. A missing file is an empty store; a damaged one
    /// is an error and is left as it is.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SecretError> {
        let path = path.into();
        let entries = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| SecretError::Corrupt { path: path.clone(), line: e.line(), column: e.column() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(SecretError::Read { path, source }),
        };
        Ok(Self { path, entries: Mutex::new(entries), no_keyring: false })
    }

    /// The secrets file in Hearth's data folder.
    pub fn in_data_dir(data_dir: &Path) -> Result<Self, SecretError> {
        Self::open(data_dir.join(SECRETS_FILE_NAME))
    }

    /// The same store, noting that it is used because no desktop keyring answered.
    pub fn because_no_keyring(mut self) -> Self {
        self.no_keyring = true;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many secrets the file holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every secret in the file (to move them into the keyring).
    pub(super) fn snapshot(&self) -> BTreeMap<String, String> {
        self.lock().clone()
    }

    /// Drop `names` from the file in one step: one atomic rewrite, or removing the file when nothing
    /// is left in it. On failure the file and memory keep every secret.
    pub(super) fn forget(&self, names: &[String]) -> Result<(), SecretError> {
        let mut entries = self.lock();
        let mut rest = entries.clone();
        for name in names {
            rest.remove(name);
        }
        if rest.len() == entries.len() {
            return Ok(());
        }
        if rest.is_empty() {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(SecretError::Write { path: self.path.clone(), source }),
            }
        } else {
            self.save(&rest)?;
        }
        *entries = rest;
        Ok(())
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

impl SecretStore for FileSecretStore {
    fn set(&self, name: &str, secret: &str) -> Result<(), SecretError> {
        check_secret(name, secret)?;
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

    fn location(&self) -> SecretsLocation {
        let why = if self.no_keyring { ", because no desktop keyring answered" } else { "" };
        SecretsLocation {
            place: SecretsPlace::PrivateFile,
            file: Some(self.path.display().to_string()),
            summary: format!("Secrets are kept in a private file {}{why}.", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_SECRET_BYTES;
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
        std::fs::write(dir.path().join(SECRETS_FILE_NAME), b"{\n  \"profile:a\": \"sk-x\",\n  oops").unwrap();
        let err = FileSecretStore::in_data_dir(dir.path()).unwrap_err();
        assert!(matches!(err, SecretError::Corrupt { line: 3, .. }), "{err:?}");
        assert!(err.to_string().contains("is damaged: it is not a valid list of secrets (line 3"), "{err}");
    }

    #[test]
    fn forgetting_moved_secrets_is_one_rewrite_and_the_last_one_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::in_data_dir(dir.path()).unwrap();
        for (name, value) in [("a", "1"), ("b", "2"), ("c", "3")] {
            store.set(name, value).unwrap();
        }
        store.forget(&["a".into(), "b".into(), "never".into()]).unwrap();
        let reopened = FileSecretStore::in_data_dir(dir.path()).unwrap();
        assert_eq!(reopened.snapshot(), BTreeMap::from([("c".to_string(), "3".to_string())]));
        store.forget(&["c".into()]).unwrap();
        assert!(!store.path().exists(), "an empty secrets file is removed, not kept");
        assert!(store.is_empty());
    }

    #[test]
    fn a_failed_forget_keeps_every_secret() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileSecretStore::in_data_dir(dir.path()).unwrap();
        store.set("a", "1").unwrap();
        store.set("b", "2").unwrap();
        // A non-empty folder where the temp file goes: the rewrite cannot start (mode bits would
        // not stop root, and tests run as root in CI).
        let tmp = store.path().with_extension("json.tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("x"), b"").unwrap();
        assert!(matches!(store.forget(&["a".into()]), Err(SecretError::Write { .. })));
        assert_eq!(store.len(), 2);
        assert_eq!(FileSecretStore::in_data_dir(dir.path()).unwrap().len(), 2);
    }
}
