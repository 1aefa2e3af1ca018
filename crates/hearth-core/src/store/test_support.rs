//! Helpers for store tests: real files in temp folders.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Store;
use crate::store::secrets::{FileSecretStore, SecretStore, SecretsBackend};

pub fn secrets(dir: &Path) -> Arc<dyn SecretStore> {
    Arc::new(FileSecretStore::in_data_dir(dir).unwrap())
}

/// The store in `dir` as the app opens it, with secrets in the private file (unit tests never touch
/// a keyring the machine may have).
pub fn open_at(dir: &Path) -> Store {
    Store::open_in_data_dir(dir, SecretsBackend::FileOnly).unwrap()
}

/// A real, canonical project folder under `root`.
pub fn project_dir(root: &Path, name: &str) -> PathBuf {
    let path = root.join("projects").join(name);
    std::fs::create_dir_all(&path).unwrap();
    std::fs::canonicalize(path).unwrap()
}

/// A store with one project and one conversation; returns (store, conversation id, tempdir).
pub fn with_conversation() -> (Store, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_at(dir.path());
    let project = store.add_project(&project_dir(dir.path(), "demo")).unwrap();
    let conversation = store.create_conversation(&project.id, "First talk").unwrap();
    (store, conversation.id, dir)
}
