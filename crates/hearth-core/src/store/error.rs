//! What can go wrong in the store, each as a sentence the UI can show as is.

use std::path::PathBuf;

use super::bounds::*;
use super::messages::MessageStatus;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("Hearth could not open its database {path}: {source}")]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("Hearth's database {path} was written by a newer version of Hearth (database version {found}; this version understands up to {supported}).")]
    NewerSchema { path: PathBuf, found: i64, supported: i64 },
    #[error("Hearth could not upgrade its database {path} (step \"{step}\" failed: {source}). The file was left as it was.")]
    Migration { path: PathBuf, step: &'static str, source: rusqlite::Error },
    #[error("Hearth's database failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Secret(#[from] crate::store::secrets::SecretError),
    #[error(transparent)]
    Space(#[from] crate::space::SpaceError),

    #[error("This {what} no longer exists (it may have been deleted).")]
    NotFound { what: &'static str, id: String },
    #[error("The {what} cannot be empty.")]
    Empty { what: &'static str },
    #[error("The {what} is too long ({chars} characters); the limit is {max}.")]
    TooLong { what: &'static str, chars: usize, max: usize },
    #[error("This message is {}; Hearth accepts messages up to {}. Shorten it, or save the text in a file in the project and ask the agent to read it.", human_bytes(*bytes), human_bytes(MAX_MESSAGE_TEXT_BYTES))]
    MessageTooLong { bytes: usize },
    #[error("This reply passed {} and was stopped there.", human_bytes(MAX_REPLY_TEXT_BYTES))]
    ReplyTooLong,
    #[error("A message can carry at most {MAX_ATTACHMENTS_PER_MESSAGE} attachments; this one has {count}.")]
    TooManyAttachments { count: usize },
    #[error("The thumbnail of {name} is {}; thumbnails are limited to {}.", human_bytes(*bytes), human_bytes(MAX_THUMBNAIL_BYTES))]
    ThumbnailTooLarge { name: String, bytes: usize },
    #[error("Hearth keeps at most {max} {what}; remove one first.")]
    TooMany { what: &'static str, max: usize },
    #[error("\"{url}\" is not a usable base URL: {reason}. It should look like https://api.example.com/v1.")]
    InvalidBaseUrl { url: String, reason: String },
    #[error("\"{name}\" is not a valid environment variable name (letters, digits and _; not starting with a digit).")]
    InvalidEnvName { name: String },
    #[error("The built-in scripted model cannot be changed or deleted.")]
    BuiltinProfile,
    #[error("This message is already {from} and cannot become {to}.")]
    StatusChange { from: MessageStatus, to: MessageStatus },
    #[error("Only a reply being written can receive text; this message is {status}.")]
    NotStreaming { status: MessageStatus },
    #[error("This conversation already has messages, so it keeps its runtime; start a new conversation to use another.")]
    RuntimeFixed,
    #[error("The setting {key} is too large ({}; the limit is {}).", human_bytes(*bytes), human_bytes(MAX_SETTING_VALUE_BYTES))]
    SettingTooLarge { key: String, bytes: usize },
}

pub type StoreResult<T> = Result<T, StoreError>;

/// "512 bytes", "12.3 KB", "5.0 MB": sizes in sentences.
pub fn human_bytes(bytes: usize) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} bytes")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}

/// Length of a name in characters, checked against its bound; trims nothing (callers trim first).
pub(crate) fn check_name(what: &'static str, value: &str, max: usize) -> StoreResult<()> {
    if value.trim().is_empty() {
        return Err(StoreError::Empty { what });
    }
    let chars = value.chars().count();
    if chars > max {
        return Err(StoreError::TooLong { what, chars, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_a_person_wrote_them() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MB");
        let err = StoreError::MessageTooLong { bytes: 5 * 1024 * 1024 };
        assert!(err.to_string().starts_with("This message is 5.0 MB; Hearth accepts messages up to 1.0 MB."), "{err}");
    }
}
