//! What the user reads when Hearth cannot open its own files at start-up: which file, what is wrong
//! with it, and what to do. The shell shows it in a native message (there is no window yet).

use super::AppError;
use crate::host::paths::AppPaths;
use crate::store::secrets::SecretError;
use crate::store::StoreError;

/// What to do about a file Hearth will not use as it is.
const MOVE_AWAY: &str = "Restore it from a backup, or move it out of the data folder and start Hearth again: Hearth will start fresh.";

/// The message for a failed [`Hearth::open`](super::Hearth::open).
pub fn open_failure_message(error: &AppError, paths: &AppPaths) -> String {
    let AppError::Store(store) = error else {
        return format!("Hearth could not start: {} Hearth's log in {} has the details.", sentence(error), paths.log_dir.display());
    };
    let store_text = sentence(store);
    match store {
        StoreError::Secret(SecretError::Corrupt { .. }) => format!(
            "{store_text} Hearth left the file as it is, because it may hold your API keys. Restore it from a backup, or move it out of the data folder and start Hearth again: Hearth will start without saved keys, and you can enter them again."
        ),
        StoreError::Secret(SecretError::Read { .. }) => format!("{store_text} Make sure your user can read it, then start Hearth again."),
        StoreError::NewerSchema { .. } => format!(
            "{store_text} Hearth left the file as it is. Open it with that newer Hearth, or move the file out of the data folder and start this Hearth again: it will start fresh."
        ),
        StoreError::Migration { .. } => format!("{store_text} {MOVE_AWAY}"),
        StoreError::Open { .. } => format!("{store_text} Hearth left the file as it is. {MOVE_AWAY}"),
        _ => format!("Hearth could not open its data: {store_text} Hearth's log in {} has the details.", paths.log_dir.display()),
    }
}

/// An error's text ending like a sentence (some end with a full stop, some with a library's words).
fn sentence(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    if text.ends_with(['.', '!', '?']) { text } else { format!("{text}.") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::secrets::{SecretsBackend, SECRETS_FILE_NAME};
    use crate::store::{Store, DATABASE_FILE_NAME, SCHEMA_VERSION};

    fn open_error(dir: &std::path::Path) -> AppError {
        AppError::Store(Store::open_in_data_dir(dir, SecretsBackend::FileOnly).unwrap_err())
    }

    #[test]
    fn a_damaged_secrets_file_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SECRETS_FILE_NAME);
        std::fs::write(&file, b"{ \"profile:a\": ").unwrap();
        let message = open_failure_message(&open_error(dir.path()), &AppPaths::under(dir.path()));
        assert!(message.starts_with(&format!("Hearth's secrets file {} is damaged", file.display())), "{message}");
        assert!(message.contains("Restore it from a backup, or move it out of the data folder"), "{message}");
        assert!(!dir.path().join(DATABASE_FILE_NAME).exists(), "nothing else was opened");
    }

    #[test]
    fn a_database_from_a_newer_hearth_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DATABASE_FILE_NAME);
        rusqlite::Connection::open(&db).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 7).unwrap();
        let message = open_failure_message(&open_error(dir.path()), &AppPaths::under(dir.path()));
        assert!(message.starts_with(&format!("Hearth's database {} was written by a newer version of Hearth", db.display())), "{message}");
        assert!(message.contains(&format!("database version {}", SCHEMA_VERSION + 7)) && !message.contains(MOVE_AWAY), "{message}");
        assert!(message.ends_with("it will start fresh."), "{message}");
    }

    #[test]
    fn a_failed_upgrade_and_a_file_that_is_no_database_are_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DATABASE_FILE_NAME);
        std::fs::write(&db, b"not a database, but long enough to have a header: ..................................................................................").unwrap();
        let message = open_failure_message(&open_error(dir.path()), &AppPaths::under(dir.path()));
        assert!(message.starts_with(&format!("Hearth could not open its database {}", db.display())), "{message}");
        assert!(message.ends_with(MOVE_AWAY), "{message}");
        let err = AppError::Store(StoreError::Migration { path: db.clone(), step: "create_settings_tables", source: rusqlite::Error::InvalidQuery });
        let message = open_failure_message(&err, &AppPaths::under(dir.path()));
        assert!(message.contains(&db.display().to_string()) && message.contains("left as it was") && message.ends_with(MOVE_AWAY), "{message}");
    }

    #[test]
    fn anything_else_points_at_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let paths = AppPaths::under(dir.path());
        let error = AppError::Knowledge(crate::knowledge::KnowledgeError::NewerSchema { found: 9, supported: 1 });
        let message = open_failure_message(&error, &paths);
        assert!(message.contains("written by a newer version of Hearth") && message.contains(&paths.log_dir.display().to_string()), "{message}");
    }
}
