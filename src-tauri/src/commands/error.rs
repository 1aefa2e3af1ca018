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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_error_crosses_as_its_code_and_its_sentence() {
        let e = CommandError::from(AppError::Busy);
        assert_eq!(e.code, ErrorCode::Busy);
        assert_eq!(e.message, AppError::Busy.to_string());
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["code"], "busy");
    }
}
