//! Logging: `tracing` to stderr and to a daily-rotated file in the data folder's `logs/`.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation};
use tracing_subscriber::{fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter};

/// File name prefix of the rotated logs (`hearth.log.YYYY-MM-DD`).
pub const LOG_FILE_PREFIX: &str = "hearth.log";
/// How many daily files are kept before the oldest is deleted.
pub const LOG_FILES_KEPT: usize = 7;
/// Default filter when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,hearth=debug,hearth_core=debug";

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("Hearth could not open its log folder {path}: {detail}")]
    Appender { path: String, detail: String },
    #[error("logging was already set up in this process")]
    AlreadySet,
}

/// Install the global subscriber. Keep the returned guard alive for the program's lifetime: dropping
/// it flushes and closes the file writer.
pub fn init(log_dir: &Path) -> Result<WorkerGuard, LoggingError> {
    let appender = Builder::new()
        .rotation(Rotation::DAILY)
        .filename_prefix(LOG_FILE_PREFIX)
        .max_log_files(LOG_FILES_KEPT)
        .build(log_dir)
        .map_err(|e| LoggingError::Appender {
            path: log_dir.display().to_string(),
            detail: e.to_string(),
        })?;
    let (file_writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt::layer().with_writer(std::io::stderr))
        .with(fmt::layer().with_ansi(false).with_writer(file_writer))
        .try_init()
        .map_err(|_| LoggingError::AlreadySet)?;
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_a_file_in_the_log_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let guard = init(tmp.path()).unwrap();
        tracing::warn!(target: "hearth_core", "log-line-marker-7731");
        drop(guard); // flush
        let mut found = false;
        for entry in std::fs::read_dir(tmp.path()).unwrap() {
            let entry = entry.unwrap();
            assert!(entry.file_name().to_string_lossy().starts_with(LOG_FILE_PREFIX));
            found |= std::fs::read_to_string(entry.path()).unwrap().contains("log-line-marker-7731");
        }
        assert!(found, "log line not written to the log file");
        assert!(matches!(init(tmp.path()), Err(LoggingError::AlreadySet)));
    }
}
