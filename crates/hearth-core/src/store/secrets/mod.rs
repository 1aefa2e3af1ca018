//! Secrets (model API keys, MCP server environment values) kept OUTSIDE the settings database, so a
//! copied or shared `hearth.sqlite3` never carries them and the UI never receives them.
//!
//! Where they live is decided once, at start-up ([`open_in_data_dir`]): in the desktop's Secret
//! Service (gnome-keyring, KWallet) when a real probe — write, read back, delete, bounded by
//! [`KEYRING_PROBE_TIMEOUT`] — succeeds; otherwise (headless machines, CI, no keyring daemon) in a
//! private file: JSON, mode 0600, in Hearth's 0700 data folder. Secrets a user kept in the file are
//! moved into the keyring the first time one answers. Both sit behind the one [`SecretStore`] trait.

mod file;
#[cfg(target_os = "linux")]
mod keyring;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use file::{FileSecretStore, SECRETS_FILE_NAME};
#[cfg(target_os = "linux")]
pub use keyring::{KeyringSecretStore, DATA_FOLDER_ATTRIBUTE, KEYRING_SERVICE, NAME_ATTRIBUTE};

/// Longest secret accepted (an API key or an environment value).
pub const MAX_SECRET_BYTES: usize = 16 * 1024;
/// Longest secret name (e.g. `profile:<uuid>` or `mcp:<uuid>:GITHUB_TOKEN`).
pub const MAX_SECRET_NAME_BYTES: usize = 256;
/// Most secrets kept in one file; far above real use, it keeps a runaway caller from growing the file.
pub const MAX_SECRETS: usize = 4096;
/// How long start-up waits for the desktop keyring to take, return and remove a probe secret before
/// keeping secrets in the private file instead (a bus that accepts connections but never answers
/// must not hold the window back).
pub const KEYRING_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one keyring call may take once the keyring answered the probe (long enough for the
/// desktop to ask the user to unlock a locked keyring).
pub const KEYRING_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// What Hearth asked the keyring to do, for sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringOperation {
    Probe,
    Save,
    Read,
    Remove,
}

impl std::fmt::Display for KeyringOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Probe => "test",
            Self::Save => "save",
            Self::Read => "read",
            Self::Remove => "remove",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("Hearth could not read its secrets file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// Only the position is kept: the parser's own message can quote the file's text, i.e. a key.
    #[error("Hearth's secrets file {path} is damaged: it is not a valid list of secrets (line {line}, column {column}).")]
    Corrupt { path: PathBuf, line: usize, column: usize },
    #[error("Hearth could not save its secrets file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("The desktop keyring could not {operation} a secret: {source}")]
    Keyring { operation: KeyringOperation, source: ::keyring::Error },
    #[error("The desktop keyring did not answer within {} s when Hearth tried to {operation} a secret.", .waited.as_secs())]
    KeyringTimeout { operation: KeyringOperation, waited: Duration },
    #[error("The connection to the desktop keyring ended while Hearth tried to {operation} a secret.")]
    KeyringGone { operation: KeyringOperation },
    #[error("Hearth could not start a thread to talk to the desktop keyring: {0}")]
    KeyringThread(std::io::Error),
    #[error("The desktop keyring gave back something other than what Hearth stored in it.")]
    KeyringMismatch,
    #[error("The desktop keyring holds a secret for {name} that is not text; remove it with the keyring's own tool (e.g. Seahorse) and enter it again.")]
    KeyringNotText { name: String },
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
    /// Where the secrets are kept, for the Runtime view.
    fn location(&self) -> SecretsLocation;
}

/// Which store start-up may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretsBackend {
    /// The desktop keyring when it answers the probe, else the private file (the app).
    DesktopKeyring,
    /// The private file only, never asking a keyring (tests and tools that must not touch the
    /// user's keyring).
    FileOnly,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum SecretsPlace {
    DesktopKeyring,
    PrivateFile,
}

/// Where secrets are kept, as the Runtime view shows it. Carries paths, never a secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SecretsLocation {
    pub place: SecretsPlace,
    /// The private file secrets are kept in; with the keyring, the file some still wait in to be
    /// moved (none once all were moved).
    pub file: Option<String>,
    /// One sentence for the user.
    pub summary: String,
}

/// Open the secrets of the data folder: the desktop keyring when `backend` allows it and one
/// answers (moving secrets from the private file into it), else the private file. A damaged secrets
/// file is an error either way: it may hold keys, so it is neither ignored nor replaced.
pub fn open_in_data_dir(data_dir: &Path, backend: SecretsBackend) -> Result<Arc<dyn SecretStore>, SecretError> {
    let file = FileSecretStore::in_data_dir(data_dir)?;
    if backend == SecretsBackend::FileOnly {
        return Ok(Arc::new(file));
    }
    Ok(keyring_or_file(data_dir, file))
}

#[cfg(target_os = "linux")]
fn keyring_or_file(data_dir: &Path, file: FileSecretStore) -> Arc<dyn SecretStore> {
    match KeyringSecretStore::probe(data_dir, KEYRING_PROBE_TIMEOUT) {
        Ok(keyring) => Arc::new(keyring.taking_over(file)),
        Err(e) => {
            tracing::info!(error = %e, file = %file.path().display(), "no desktop keyring answered: secrets are kept in the private file");
            Arc::new(file.because_no_keyring())
        }
    }
}

/// Hearth speaks to the freedesktop Secret Service only.
#[cfg(not(target_os = "linux"))]
fn keyring_or_file(_: &Path, file: FileSecretStore) -> Arc<dyn SecretStore> {
    Arc::new(file.because_no_keyring())
}

fn check_name(name: &str) -> Result<(), SecretError> {
    if name.is_empty() || name.len() > MAX_SECRET_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(SecretError::BadName { name: name.chars().take(64).collect() });
    }
    Ok(())
}

/// The checks every store makes before keeping a secret.
fn check_secret(name: &str, secret: &str) -> Result<(), SecretError> {
    check_name(name)?;
    if secret.is_empty() {
        return Err(SecretError::Empty);
    }
    if secret.len() > MAX_SECRET_BYTES {
        return Err(SecretError::TooLong { len: secret.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_only_never_asks_a_keyring_and_says_where_secrets_are() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_in_data_dir(dir.path(), SecretsBackend::FileOnly).unwrap();
        store.set("profile:a", "sk-one").unwrap();
        let location = store.location();
        let file = dir.path().join(SECRETS_FILE_NAME);
        assert_eq!(location.place, SecretsPlace::PrivateFile);
        assert_eq!(location.file.as_deref(), Some(file.to_str().unwrap()));
        assert_eq!(location.summary, format!("Secrets are kept in a private file {}.", file.display()));
        assert!(!serde_json::to_string(&location).unwrap().contains("sk-one"));
    }

    #[test]
    fn a_damaged_file_stops_both_backends_and_names_the_file_without_quoting_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SECRETS_FILE_NAME);
        // Valid JSON of the wrong shape: serde's own message would quote the string.
        std::fs::write(&file, b"\"sk-leaked-9c1e\"").unwrap();
        for backend in [SecretsBackend::FileOnly, SecretsBackend::DesktopKeyring] {
            let err = open_in_data_dir(dir.path(), backend).unwrap_err();
            assert!(matches!(&err, SecretError::Corrupt { path, line: 1, .. } if path == &file), "{err:?}");
            let text = format!("{err} {err:?}");
            assert!(text.contains(&file.display().to_string()) && !text.contains("sk-leaked"), "{text}");
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"\"sk-leaked-9c1e\"", "the file is left as it was");
    }
}
