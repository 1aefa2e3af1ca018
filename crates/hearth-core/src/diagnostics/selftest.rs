//! The self-test: for each runtime asked for (OpenCode's server, its ACP agent, Claude Code…), the
//! reuse check, then the isolation check, as one report. The same function runs behind the
//! panel's button, `hearth selftest` and CI. Only one runs at a time in a process: two
//! would compete for the same cores and make each other's figures meaningless.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use super::isolation::{run_isolation_check, IsolationOptions};
use crate::acp::agents::AgentSearch;
use crate::runtime::RuntimeChoice;
use super::remote_sandbox::RemoteTarget;
use super::reuse::{run_reuse_check, ReuseOptions};
use super::{ms, CheckReport, Progress, ProgressSink};

/// Hearth's version, as the report shows it.
pub const HEARTH_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone)]
pub struct SelftestOptions {
    /// 2 or 10.
    pub projects: usize,
    /// Context corpus of the isolation check: 0, 2, 8 or 32 MiB.
    pub corpus_mib: u32,
    pub runtime_binary: PathBuf,
    pub rg_dir: Option<PathBuf>,
    /// Command line of the fixture MCP server (the app: `[current_exe, "mcp-fixture"]`).
    pub fixture_command: Vec<String>,
    /// Command line of Hearth's stdio bridge to the gateway (the app: `[current_exe,
    /// "mcp-bridge"]`), for agents that take MCP servers over stdio only.
    pub bridge_command: Option<Vec<String>>,
    /// Where the sandboxes are created (the system temporary folder when `None`).
    pub sandbox_parent: Option<PathBuf>,
    /// The runtimes to check, in order (see [`super::choice::checkable`]).
    pub runtimes: Vec<RuntimeChoice>,
    /// Where agents other than OpenCode are found.
    pub agents: AgentSearch,
    /// Run the checks' projects on this host (OpenCode's server only), instead of here.
    pub remote: Option<RemoteTarget>,
}

/// The whole self-test, for the results table, the JSON export and the CLI. Holds no secrets.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SelftestReport {
    /// Every check ran to its end and passed.
    pub passed: bool,
    pub cancelled: bool,
    /// Per runtime, in order: reuse, then isolation (absent when cancelled before it).
    pub checks: Vec<CheckReport>,
    /// Runtimes asked for that could not be checked here, each with why.
    pub skipped: Vec<SkippedRuntime>,
    /// UTC, RFC 3339 (`2025-05-01T12:00:00Z`).
    pub started_at: String,
    pub duration_ms: f64,
    pub hearth_version: String,
    /// What the runtime reported; `None` when it never started.
    pub runtime_version: Option<String>,
}

/// A runtime the self-test was asked to check but could not, and why: it counts as not passed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRuntime {
    pub runtime: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelftestError {
    #[error("A self-test is already running; wait for it to finish or cancel it first.")]
    AlreadyRunning,
}

static RUNNING: AtomicBool = AtomicBool::new(false);

/// Held while a self-test runs; dropping it (end, failure, cancellation) lets the next one start.
#[derive(Debug)]
pub struct SelftestGuard(());

impl SelftestGuard {
    pub fn acquire() -> Result<Self, SelftestError> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Self(()))
            .map_err(|_| SelftestError::AlreadyRunning)
    }

    pub fn is_running() -> bool {
        RUNNING.load(Ordering::Acquire)
    }
}

impl Drop for SelftestGuard {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// Run the self-test. Refused while another runs in this process. Progress steps are prefixed
/// with the check's name (`reuse.launch`, `isolation.held`, …) since both checks share step ids.
pub async fn run_selftest(
    opts: SelftestOptions,
    progress: ProgressSink,
    cancel: CancellationToken,
) -> Result<SelftestReport, SelftestError> {
    let _guard = SelftestGuard::acquire()?;
    let started_at = rfc3339_utc(SystemTime::now());
    let started = Instant::now();
    let mut checks = Vec::new();
    let mut skipped = Vec::new();
    let mut runtime_version = None;
    for runtime in &opts.runtimes {
        if cancel.is_cancelled() {
            break;
        }
        let on_host = opts.remote.as_ref().and_then(|r| super::choice::unavailable_on(runtime, &r.host));
        if let Some(reason) = on_host.or_else(|| super::choice::unavailable(runtime, &opts.agents)) {
            skipped.push(SkippedRuntime { runtime: super::choice::label(runtime), reason });
            continue;
        }
        let reuse_opts = ReuseOptions {
            runtime_binary: opts.runtime_binary.clone(),
            rg_dir: opts.rg_dir.clone(),
            projects: opts.projects,
            sandbox_parent: opts.sandbox_parent.clone(),
            fixture_command: opts.fixture_command.clone(),
            runtime: runtime.clone(),
            agents: opts.agents.clone(),
            bridge_command: opts.bridge_command.clone(),
            transport: Default::default(),
            remote: opts.remote.clone(),
        };
        let reuse = run_reuse_check(reuse_opts, prefixed(&progress, runtime, "reuse"), cancel.clone()).await;
        // The header names OpenCode's version (the server and `opencode acp` are one binary).
        if runtime_version.is_none() && super::choice::is_opencode(runtime) {
            runtime_version = reuse.runtime_version.clone();
        }
        checks.push(reuse);
        if cancel.is_cancelled() {
            break;
        }
        let mut iso = IsolationOptions::new(opts.runtime_binary.clone(), opts.rg_dir.clone(), opts.corpus_mib);
        iso.sandbox_parent = opts.sandbox_parent.clone();
        iso.runtime = runtime.clone();
        iso.agents = opts.agents.clone();
        iso.remote = opts.remote.clone();
        checks.push(run_isolation_check(iso, prefixed(&progress, runtime, "isolation"), cancel.clone()).await);
    }
    let cancelled = cancel.is_cancelled() || checks.iter().any(|c| c.cancelled);
    let ran_all = checks.len() == 2 * (opts.runtimes.len() - skipped.len()) && !checks.is_empty();
    Ok(SelftestReport {
        passed: !cancelled && ran_all && skipped.is_empty() && checks.iter().all(|c| c.passed),
        cancelled,
        checks,
        skipped,
        started_at,
        duration_ms: ms(started.elapsed()),
        hearth_version: HEARTH_VERSION.into(),
        runtime_version,
    })
}

impl SelftestReport {
    /// A header line, then every check's paragraph: for the CLI and support requests.
    pub fn to_text(&self) -> String {
        let verdict = if self.cancelled {
            "CANCELLED"
        } else if self.passed {
            "PASSED"
        } else {
            "FAILED"
        };
        let mut out = format!(
            "Hearth self-test: {verdict} in {:.1} s (Hearth {}, runtime {}, started {})\n",
            self.duration_ms / 1000.0,
            self.hearth_version,
            self.runtime_version.as_deref().unwrap_or("not started"),
            self.started_at
        );
        for check in &self.checks {
            out.push_str(&check.to_text());
        }
        for s in &self.skipped {
            out.push_str(&format!("{}: NOT CHECKED — {}\n", s.runtime, s.reason));
        }
        out
    }
}

/// Steps are `reuse.launch`, `isolation.held`… for OpenCode's server (the first runtime checked),
/// and prefixed by the runtime for the others (`acp:opencode/reuse.launch`).
fn prefixed(progress: &ProgressSink, runtime: &RuntimeChoice, check: &'static str) -> ProgressSink {
    let inner = progress.clone();
    let prefix = match runtime {
        RuntimeChoice::OpenCode => check.to_string(),
        other => format!("{}/{check}", other.as_stored()),
    };
    ProgressSink::new(move |p: Progress| inner.report(&format!("{prefix}.{}", p.step), p.detail))
}

/// `time` as UTC RFC 3339 to the second (no date crate for one line of the report).
fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661)), "2000-02-29T01:01:01Z");
        assert_eq!(rfc3339_utc(UNIX_EPOCH + Duration::from_secs(1_735_689_599)), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn only_one_self_test_at_a_time() {
        let first = SelftestGuard::acquire().unwrap();
        let refused = SelftestGuard::acquire().unwrap_err();
        assert_eq!(refused.to_string(), "A self-test is already running; wait for it to finish or cancel it first.");
        drop(first);
        assert!(!SelftestGuard::is_running());
        drop(SelftestGuard::acquire().unwrap());
    }

    #[test]
    fn reports_read_as_text_and_camel_case_json() {
        let r = SelftestReport {
            passed: false,
            cancelled: true,
            checks: vec![],
            skipped: vec![],
            started_at: "1970-01-01T00:00:00Z".into(),
            duration_ms: 1500.0,
            hearth_version: HEARTH_VERSION.into(),
            runtime_version: None,
        };
        assert!(r.to_text().starts_with("Hearth self-test: CANCELLED in 1.5 s"));
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("startedAt").is_some() && json.get("runtimeVersion").is_some());
    }
}
