//! The one place where typed domain errors become sentences for the user.

/// What the UI receives when a command fails: one sentence, safe to show as is.
#[derive(Debug, Clone, serde::Serialize, specta::Type)]
pub struct CommandError {
    pub message: String,
}

impl<E: std::error::Error> From<E> for CommandError {
    fn from(e: E) -> Self {
        tracing::warn!(error = %e, "command failed");
        Self { message: e.to_string() }
    }
}
