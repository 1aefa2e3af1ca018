//! Secrets in the desktop's Secret Service (gnome-keyring, KWallet), through the `keyring` crate.
//!
//! Each secret is one item in the default collection: service [`KEYRING_SERVICE`], the data folder
//! in [`DATA_FOLDER_ATTRIBUTE`] and the secret's name in [`NAME_ATTRIBUTE`]. The crate looks items
//! up by service and user name only, so the user name carries both (`<name>@<data folder>`): two
//! data folders (two test runs, two profiles of a user) never see each other's secrets.
//!
//! Every call runs on its own short-lived thread and is given up after a bound: a keyring that stops
//! answering becomes a sentence, not a frozen window. Values read are remembered for the process'
//! lifetime (Hearth is the only writer of its items: one Hearth runs per data folder).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use keyring::secret_service::SsCredential;
use keyring::Entry;

use super::{check_secret, FileSecretStore, KeyringOperation, SecretError, SecretStore, SecretsLocation, SecretsPlace, KEYRING_CALL_TIMEOUT};

/// The service every Hearth item is filed under.
pub const KEYRING_SERVICE: &str = "Hearth";
/// Attribute holding the data folder an item belongs to.
pub const DATA_FOLDER_ATTRIBUTE: &str = "hearth-data-folder";
/// Attribute holding the secret's name (e.g. `profile:<id>`).
pub const NAME_ATTRIBUTE: &str = "hearth-secret";
/// Name of the item written, read back and removed to prove the keyring works.
const PROBE_NAME: &str = "hearth:probe";

#[derive(Debug)]
pub struct KeyringSecretStore {
    /// The data folder, as recorded in every item.
    folder: String,
    /// Values (and absences) already asked for.
    known: Mutex<HashMap<String, Option<String>>>,
    /// Secrets still in the private file because moving them failed part-way: read from there (they
    /// did not reach the keyring), and moved at the next start.
    leftover: Option<FileSecretStore>,
}

impl KeyringSecretStore {
    /// The keyring for `data_dir`, if it takes, returns and removes a probe secret within `timeout`.
    pub fn probe(data_dir: &Path, timeout: Duration) -> Result<Self, SecretError> {
        let store = Self { folder: folder_of(data_dir), known: Mutex::default(), leftover: None };
        let probe = uuid::Uuid::new_v4().to_string();
        let entry = store.entry(PROBE_NAME)?;
        bounded(KeyringOperation::Probe, timeout, move || {
            let op = KeyringOperation::Probe;
            entry.set_password(&probe).map_err(|source| SecretError::Keyring { operation: op, source })?;
            let back = entry.get_password().map_err(|source| SecretError::Keyring { operation: op, source });
            entry.delete_credential().map_err(|source| SecretError::Keyring { operation: op, source })?;
            if back? != probe {
                return Err(SecretError::KeyringMismatch);
            }
            Ok(())
        })?;
        tracing::info!(folder = %store.folder, "the desktop keyring answered: secrets are kept there");
        Ok(store)
    }

    /// Move every secret of the private file into the keyring: each is saved and read back, then all
    /// that arrived are dropped from the file in one atomic rewrite. A failure part-way loses nothing:
    /// what did not move stays in the file, is still read from there, and is moved at the next start.
    pub fn taking_over(mut self, file: FileSecretStore) -> Self {
        let entries = file.snapshot();
        if entries.is_empty() {
            return self;
        }
        let mut moved = Vec::new();
        for (name, value) in &entries {
            let arrived = self.save(name, value).and_then(|()| self.fetch(name));
            match arrived {
                Ok(Some(back)) if &back == value => moved.push(name.clone()),
                Ok(_) => {
                    tracing::warn!(name, "the desktop keyring did not give back a moved secret; the rest stay in the private file");
                    break;
                }
                Err(e) => {
                    tracing::warn!(name, error = %e, "moving secrets into the desktop keyring stopped; the rest stay in the private file");
                    break;
                }
            }
        }
        match file.forget(&moved) {
            Ok(()) => tracing::info!(moved = moved.len(), left = file.len(), file = %file.path().display(), "moved secrets from the private file into the desktop keyring"),
            // Both places hold the same values; the keyring's are read first.
            Err(e) => tracing::warn!(error = %e, "secrets were copied into the desktop keyring but could not be removed from the private file"),
        }
        let known = self.known.get_mut().unwrap_or_else(|e| e.into_inner());
        for name in &moved {
            known.insert(name.clone(), entries.get(name).cloned());
        }
        if !file.is_empty() {
            self.leftover = Some(file);
        }
        self
    }

    fn entry(&self, name: &str) -> Result<Entry, SecretError> {
        let mut credential = SsCredential::new_with_target(None, KEYRING_SERVICE, &format!("{name}@{}", self.folder))
            .map_err(|source| SecretError::Keyring { operation: KeyringOperation::Save, source })?;
        credential.attributes.insert(DATA_FOLDER_ATTRIBUTE.into(), self.folder.clone());
        credential.attributes.insert(NAME_ATTRIBUTE.into(), name.into());
        credential.label = format!("Hearth: {name} ({})", self.folder);
        Ok(Entry::new_with_credential(Box::new(credential)))
    }

    /// Store in the keyring itself.
    fn save(&self, name: &str, secret: &str) -> Result<(), SecretError> {
        let (entry, secret) = (self.entry(name)?, secret.to_owned());
        let op = KeyringOperation::Save;
        bounded(op, KEYRING_CALL_TIMEOUT, move || entry.set_password(&secret).map_err(|source| SecretError::Keyring { operation: op, source }))
    }

    /// Ask the keyring itself (not what is remembered).
    fn fetch(&self, name: &str) -> Result<Option<String>, SecretError> {
        let entry = self.entry(name)?;
        let owned = name.to_owned();
        let op = KeyringOperation::Read;
        bounded(op, KEYRING_CALL_TIMEOUT, move || match entry.get_password() {
            Ok(secret) => Ok(Some(secret)),
            Err(keyring::Error::NoEntry) => Ok(None),
            // The bytes are dropped here: they may be a secret and must not reach a log.
            Err(keyring::Error::BadEncoding(_)) => Err(SecretError::KeyringNotText { name: owned }),
            Err(source) => Err(SecretError::Keyring { operation: op, source }),
        })
    }

    fn remember(&self, name: &str, value: Option<String>) {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned(), value);
    }
}

/// The data folder as recorded in items: its canonical path, so two spellings of one folder agree.
fn folder_of(data_dir: &Path) -> String {
    std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf()).display().to_string()
}

/// Run `call` on its own thread and wait at most `timeout`. A call that overstays is left to finish
/// on its thread (D-Bus gives no way to cancel it); its answer is dropped.
fn bounded<T: Send + 'static>(
    operation: KeyringOperation,
    timeout: Duration,
    call: impl FnOnce() -> Result<T, SecretError> + Send + 'static,
) -> Result<T, SecretError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("hearth-keyring".into())
        .spawn(move || {
            let _ = tx.send(call());
        })
        .map_err(SecretError::KeyringThread)?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(SecretError::KeyringTimeout { operation, waited: timeout }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(SecretError::KeyringGone { operation }),
    }
}

impl SecretStore for KeyringSecretStore {
    fn set(&self, name: &str, secret: &str) -> Result<(), SecretError> {
        check_secret(name, secret)?;
        self.save(name, secret)?;
        self.remember(name, Some(secret.to_owned()));
        // An older copy in the file would be moved over this one at the next start.
        if let Some(file) = &self.leftover {
            file.delete(name)?;
        }
        tracing::debug!(name, "secret saved in the desktop keyring");
        Ok(())
    }

    fn get(&self, name: &str) -> Result<Option<String>, SecretError> {
        if let Some(known) = self.known.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(known.clone());
        }
        let waiting = match &self.leftover {
            Some(file) => file.get(name)?,
            None => None,
        };
        let value = match waiting {
            Some(value) => Some(value),
            None => self.fetch(name)?,
        };
        self.remember(name, value.clone());
        Ok(value)
    }

    fn delete(&self, name: &str) -> Result<(), SecretError> {
        let entry = self.entry(name)?;
        let op = KeyringOperation::Remove;
        bounded(op, KEYRING_CALL_TIMEOUT, move || match entry.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(source) => Err(SecretError::Keyring { operation: op, source }),
        })?;
        self.remember(name, None);
        if let Some(file) = &self.leftover {
            file.delete(name)?;
        }
        tracing::debug!(name, "secret removed from the desktop keyring");
        Ok(())
    }

    fn location(&self) -> SecretsLocation {
        let waiting = self.leftover.as_ref().filter(|f| !f.is_empty());
        let summary = match waiting {
            None => "Secrets are kept in the desktop keyring (Secret Service).".to_string(),
            Some(file) => format!(
                "Secrets are kept in the desktop keyring (Secret Service); {} could not be moved there yet and stay in the private file {} until the next start.",
                file.len(),
                file.path().display()
            ),
        };
        SecretsLocation { place: SecretsPlace::DesktopKeyring, file: waiting.map(|f| f.path().display().to_string()), summary }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_overstays_its_bound_is_a_timeout_sentence() {
        // A call that never ends on its own: it waits for a message the test sends only afterwards.
        let (release, hang) = std::sync::mpsc::channel::<()>();
        let err = bounded(KeyringOperation::Read, Duration::from_secs(1), move || {
            let _ = hang.recv();
            Ok(())
        })
        .unwrap_err();
        drop(release);
        assert!(matches!(err, SecretError::KeyringTimeout { operation: KeyringOperation::Read, .. }), "{err:?}");
        assert_eq!(err.to_string(), "The desktop keyring did not answer within 1 s when Hearth tried to read a secret.");
    }

    #[test]
    fn items_of_two_data_folders_have_different_user_names() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = |d: &Path| KeyringSecretStore { folder: folder_of(d), known: Mutex::default(), leftover: None };
        let (sa, sb) = (store(a.path()), store(b.path()));
        let user = |s: &KeyringSecretStore| {
            let e = s.entry("profile:x").unwrap();
            let c = e.get_credential().downcast_ref::<SsCredential>().unwrap().clone();
            (c.attributes["username"].clone(), c.attributes[DATA_FOLDER_ATTRIBUTE].clone(), c.attributes[NAME_ATTRIBUTE].clone())
        };
        let (ua, ub) = (user(&sa), user(&sb));
        assert_ne!(ua.0, ub.0);
        assert_eq!(ua.1, std::fs::canonicalize(a.path()).unwrap().display().to_string());
        assert_eq!(ua.2, "profile:x");
    }
}
