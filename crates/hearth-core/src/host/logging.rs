//! Logging: `tracing` to stderr and to a daily-rotated file in the data folder's `logs/`.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation};
use tracing_subscriber::{fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};

/// File name prefix of the rotated logs (`hearth.log.YYYY-MM-DD`).
pub const LOG_FILE_PREFIX: &str = "hearth.log";
/// How many daily files are kept before the oldest is deleted.
pub const LOG_FILES_KEPT: usize = 7;
/// Default filter when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,hearth=debug,hearth_core=debug";
/// What a headless command prints to stderr when `RUST_LOG` is unset: its own output is the point,
/// so only warnings go beside it (the log file still gets everything).
pub const QUIET_CONSOLE_FILTER: &str = "warn";

/// The most detail rmcp may log, `RUST_LOG` included: below `info` it logs whole MCP messages, and a
/// gateway call's arguments carry its session stamp. A cap, never a raise: a `warn` filter keeps
/// rmcp at `warn`.
pub const RMCP_MOST_DETAIL: tracing::Level = tracing::Level::INFO;

/// Hex characters of a secret's hash shown in logs (see [`log_tag`]).
pub const LOG_TAG_CHARS: usize = 12;

/// A short, non-reversible name for a secret or an identifier that grants something (a capability
/// token, a native session id), safe for logs: the same value always gets the same tag.
pub fn log_tag(secret: &str) -> String {
    use sha2::Digest as _;
    let hex = format!("{:x}", sha2::Sha256::digest(secret.as_bytes()));
    hex[..LOG_TAG_CHARS].to_string()
}

/// How much of the log goes to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Console {
    /// What the file gets (the window: stderr is for whoever started it from a terminal).
    Full,
    /// Warnings only, unless `RUST_LOG` says otherwise (the `hearth` CLI subcommands).
    Quiet,
}

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("Hearth could not open its log folder {path}: {detail}")]
    Appender { path: String, detail: String },
    #[error("logging was already set up in this process")]
    AlreadySet,
}

/// The filter for `spec`, with rmcp capped at [`RMCP_MOST_DETAIL`].
pub fn filter(spec: &str) -> EnvFilter {
    let base = EnvFilter::new(spec);
    // `LevelFilter` orders OFF < ERROR < … < TRACE: the cap is the quieter of the two.
    let rmcp = base.max_level_hint().map_or(tracing::level_filters::LevelFilter::from_level(RMCP_MOST_DETAIL), |hint| {
        hint.min(tracing::level_filters::LevelFilter::from_level(RMCP_MOST_DETAIL))
    });
    base.add_directive(format!("rmcp={rmcp}").parse().expect("a valid directive"))
}

/// The filters of the file and of stderr, from `RUST_LOG` (which then rules both) or the defaults.
fn filters(rust_log: Option<&str>, console: Console) -> (EnvFilter, EnvFilter) {
    match rust_log {
        Some(spec) => (filter(spec), filter(spec)),
        None => {
            let console_spec = if console == Console::Quiet { QUIET_CONSOLE_FILTER } else { DEFAULT_FILTER };
            (filter(DEFAULT_FILTER), filter(console_spec))
        }
    }
}

/// Install the global subscriber. Keep the returned guard alive for the program's lifetime: dropping
/// it flushes and closes the file writer.
pub fn init(log_dir: &Path, console: Console) -> Result<WorkerGuard, LoggingError> {
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
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok().filter(|v| !v.trim().is_empty());
    let (file_filter, console_filter) = filters(rust_log.as_deref(), console);
    tracing_subscriber::registry()
        .with(fmt::layer().with_writer(std::io::stderr).with_filter(console_filter))
        .with(fmt::layer().with_ansi(false).with_writer(file_writer).with_filter(file_filter))
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
        let guard = init(tmp.path(), Console::Quiet).unwrap();
        tracing::warn!(target: "hearth_core", "log-line-marker-7731");
        drop(guard); // flush
        let mut found = false;
        for entry in std::fs::read_dir(tmp.path()).unwrap() {
            let entry = entry.unwrap();
            assert!(entry.file_name().to_string_lossy().starts_with(LOG_FILE_PREFIX));
            found |= std::fs::read_to_string(entry.path()).unwrap().contains("log-line-marker-7731");
        }
        assert!(found, "log line not written to the log file");
        assert!(matches!(init(tmp.path(), Console::Full), Err(LoggingError::AlreadySet)));
    }

    #[test]
    fn a_quiet_console_keeps_warnings_and_the_file_keeps_everything_unless_rust_log_rules() {
        let (file, console) = filters(None, Console::Quiet);
        assert_eq!(file.to_string(), filter(DEFAULT_FILTER).to_string());
        assert_eq!(console.to_string(), filter("warn").to_string());
        let (_, console) = filters(None, Console::Full);
        assert_eq!(console.to_string(), filter(DEFAULT_FILTER).to_string());
        let (file, console) = filters(Some("debug"), Console::Quiet);
        assert_eq!((file.to_string(), console.to_string()), (filter("debug").to_string(), filter("debug").to_string()));
    }

    #[test]
    fn mcp_messages_are_not_logged_whatever_rust_log_says() {
        use std::sync::{Arc, Mutex};
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::registry().with(
            fmt::layer().with_writer(move || Capture(writer.clone())).with_filter(filter("trace,rmcp=trace")),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "rmcp::service", "mcp-message-marker");
            tracing::info!(target: "rmcp::service", "rmcp-info-marker");
            tracing::trace!(target: "hearth_core::toolbox", "hearth-trace-marker");
        });
        let text = String::from_utf8_lossy(&buf.lock().unwrap()).to_string();
        assert!(!text.contains("mcp-message-marker"), "{text}");
        assert!(text.contains("rmcp-info-marker") && text.contains("hearth-trace-marker"), "{text}");
    }

    #[test]
    fn the_rmcp_cap_never_makes_a_quiet_filter_louder() {
        use std::sync::{Arc, Mutex};
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let writer = buf.clone();
        let subscriber =
            tracing_subscriber::registry().with(fmt::layer().with_writer(move || Capture(writer.clone())).with_filter(filter(QUIET_CONSOLE_FILTER)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "rmcp-info-marker");
            tracing::warn!(target: "rmcp::service", "rmcp-warn-marker");
        });
        let text = String::from_utf8_lossy(&buf.lock().unwrap()).to_string();
        assert!(!text.contains("rmcp-info-marker") && text.contains("rmcp-warn-marker"), "{text}");
    }

    #[test]
    fn log_tags_are_short_stable_and_not_the_value() {
        assert_eq!(log_tag("ses_abc"), log_tag("ses_abc"));
        assert_ne!(log_tag("ses_abc"), log_tag("ses_abd"));
        assert_eq!(log_tag("ses_abc").len(), LOG_TAG_CHARS);
        assert!(!log_tag("ses_abc").contains("abc"));
    }

    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
