//! The self-test's sandbox on a full disk: the check fails with a readable reason, removes the
//! sandbox and leaves nothing running — within seconds, not at a step's timeout (the runtime stalls on a
//! full disk rather than failing). Needs root to mount a small tmpfs (CI runs as root).

use crate::support;

use std::time::Duration;

use hearth_core::diagnostics::isolation::{run_isolation_check, IsolationOptions};
use hearth_core::diagnostics::ProgressSink;
use tokio_util::sync::CancellationToken;

/// Small enough that an 8 MiB corpus cannot fit.
const TMPFS_SIZE: &str = "size=4m";
const CHECK_TIMEOUT: Duration = Duration::from_secs(240);

struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_in_the_sandbox_fails_the_check_with_a_reason_and_cleans_up() {
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", TMPFS_SIZE, "tmpfs"]).arg(dir.path()).status();
    if !matches!(mounted, Ok(s) if s.success()) {
        if std::env::var(support::SKIP_ROOT_TESTS_ENV).as_deref() == Ok("1") {
            eprintln!("NOT RUN ({}=1): cannot mount a tmpfs here", support::SKIP_ROOT_TESTS_ENV);
            return;
        }
        panic!("mounting a small tmpfs needs root (scripts/test.sh runs as root); set {}=1 to skip this test", support::SKIP_ROOT_TESTS_ENV);
    }
    let _tmpfs = Tmpfs(dir.path().to_path_buf());
    let mut options = IsolationOptions::new(binary, Some(rg_dir), 8);
    options.sandbox_parent = Some(dir.path().to_path_buf());
    let report = tokio::time::timeout(CHECK_TIMEOUT, run_isolation_check(options, ProgressSink::silent(), CancellationToken::new())).await.expect("the check ends on a full disk");
    assert!(!report.passed, "a full disk cannot pass: {}", report.to_text());
    let text = report.to_text();
    assert!(text.to_lowercase().contains("disk") || text.to_lowercase().contains("space"), "the reason names the disk: {text}");
    let cleaned = report.assertions.iter().find(|a| a.name.starts_with("Sandbox removed")).expect("clean-up is reported");
    assert!(cleaned.passed, "{}", cleaned.detail);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the sandbox was removed");
}
