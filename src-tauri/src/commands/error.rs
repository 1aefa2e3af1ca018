//! The one place where typed errors cross to the window: a stable code the UI branches on, and the
//! user's sentence (the error's Display), never compared as text.

use hearth_core::app::{AppError, ErrorCode};

use super::dialogs::DialogError;

/// What the UI receives when a command fails.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
pub struct CommandError {
    pub code: ErrorCode,
    /// One sentence, safe to show as is.
    pub message: String,
}

impl From<AppError> for CommandError {
    fn from(e: AppError) -> Self {
        let code = e.code();
        if code == ErrorCode::Internal {
            tracing::error!(error = %e, "command failed");
        } else {
            tracing::warn!(error = %e, ?code, "command failed");
        }
        Self { code, message: e.to_string() }
    }
}

impl From<DialogError> for CommandError {
    fn from(e: DialogError) -> Self {
        let code = match e {
            DialogError::NotUnicode(_) => ErrorCode::InvalidInput,
            DialogError::Closed => ErrorCode::NotRunning,
        };
        Self { code, message: e.to_string() }
    }
}
