//! Diagnostics: self-checks that prove Hearth's promises against the real runtime and the built-in
//! scripted model server, in a throw-away sandbox. The same code runs behind the self-test button,
//! the `hearth selftest` CLI and CI; this module holds what every check shares: the report, live
//! progress, and the measurement helpers.

pub mod choice;
pub mod corpus;
pub mod isolation;
pub mod kit;
pub mod isolation_acp;
mod isolation_outline;
mod isolation_steps;
pub mod measure;
pub mod outline;
pub mod remote_sandbox;
pub mod reuse;
mod reuse_steps;
pub mod sandbox;
pub mod selftest;

use std::sync::Arc;
use std::time::Instant;

pub use isolation::{run_isolation_check, IsolationOptions, Sabotage};
pub use reuse::{run_reuse_check, ReuseOptions};
pub use outline::{conversation_outline, OutlineEntry, ToolCount};
pub use sandbox::Sandbox;
pub use selftest::{run_selftest, SelftestError, SelftestGuard, SelftestOptions, SelftestReport};

/// Longest assertion detail kept in a report (details quote runtime errors, which can be long).
pub const MAX_DETAIL_CHARS: usize = 2_000;

/// One checked promise: a readable name, whether it held, and why (measured values or the failure).
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Assertion {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// A measured figure. A single value has `samples == 1` and `min == median == max`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Figure {
    pub name: String,
    /// `ms`, `bytes`, `count`, …
    pub unit: String,
    pub samples: u32,
    pub min: f64,
    pub median: f64,
    /// The 95th percentile (nearest rank): the slow end a user meets once in twenty.
    pub p95: f64,
    pub max: f64,
}

impl Figure {
    pub fn value(name: impl Into<String>, unit: impl Into<String>, value: f64) -> Self {
        Self { name: name.into(), unit: unit.into(), samples: 1, min: value, median: value, p95: value, max: value }
    }

    /// min/median/p95/max of `values`; `None` when there are none. The median of an even count is
    /// the upper middle value.
    pub fn distribution(name: impl Into<String>, unit: impl Into<String>, values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self {
            name: name.into(),
            unit: unit.into(),
            samples: u32::try_from(sorted.len()).unwrap_or(u32::MAX),
            min: sorted[0],
            median: sorted[sorted.len() / 2],
            p95: sorted[(sorted.len() * 95).div_ceil(100).saturating_sub(1)],
            max: sorted[sorted.len() - 1],
        })
    }
}

/// The result of one check, for the results table, the JSON export and the CLI. Holds no secrets:
/// no passwords, keys or URLs with credentials.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub name: String,
    /// The runtime the check ran against ("OpenCode (server)", "OpenCode (ACP)", "Claude Code").
    pub runtime: String,
    /// The version it reported, once it started.
    pub runtime_version: Option<String>,
    /// Every assertion passed and the check ran to its end.
    pub passed: bool,
    pub cancelled: bool,
    /// Why the check stopped before its end, as a sentence.
    pub error: Option<String>,
    pub assertions: Vec<Assertion>,
    pub figures: Vec<Figure>,
    pub duration_ms: f64,
}

impl CheckReport {
    /// The first failing assertion, for one-line summaries.
    pub fn first_failure(&self) -> Option<&Assertion> {
        self.assertions.iter().find(|a| !a.passed)
    }

    /// One paragraph per assertion and figure, for the CLI and test logs.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{} check ({} {}): {} in {:.1} s\n",
            self.name,
            self.runtime,
            self.runtime_version.as_deref().unwrap_or("not started"),
            if self.cancelled {
                "CANCELLED"
            } else if self.passed {
                "PASSED"
            } else {
                "FAILED"
            },
            self.duration_ms / 1000.0
        );
        if let Some(error) = &self.error {
            out.push_str(&format!("  stopped: {error}\n"));
        }
        for a in &self.assertions {
            out.push_str(&format!("  [{}] {} — {}\n", if a.passed { "pass" } else { "FAIL" }, a.name, a.detail));
        }
        for f in &self.figures {
            if f.unit == "ratio" {
                out.push_str(&format!("  {}: {:.2}\n", f.name, f.median));
            } else if f.samples == 1 {
                out.push_str(&format!("  {}: {:.1} {}\n", f.name, f.median, f.unit));
            } else {
                out.push_str(&format!(
                    "  {}: min {:.1} / median {:.1} / p95 {:.1} / max {:.1} {} (n={})\n",
                    f.name, f.min, f.median, f.p95, f.max, f.unit, f.samples
                ));
            }
        }
        out
    }
}

/// One live progress step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// A stable step id (see each check's step list), for the UI's step list.
    pub step: String,
    /// What is happening, as a sentence.
    pub detail: String,
}

/// Where a check reports its progress: a callback (a Tauri channel, the CLI's printer, a test).
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    pub fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub fn silent() -> Self {
        Self::new(|_| {})
    }

    /// A sink feeding an unbounded channel (a check emits a few dozen steps).
    pub fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<Progress>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Self::new(move |p| drop(tx.send(p))), rx)
    }

    pub fn report(&self, step: &str, detail: impl Into<String>) {
        let progress = Progress { step: step.into(), detail: detail.into() };
        tracing::info!(step = %progress.step, detail = %progress.detail, "diagnostics progress");
        (self.0)(progress);
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink(..)")
    }
}

/// Collects a check's assertions and figures as it runs.
#[derive(Debug)]
pub(crate) struct ReportBuilder {
    name: String,
    runtime: String,
    pub(crate) runtime_version: Option<String>,
    started: Instant,
    assertions: Vec<Assertion>,
    figures: Vec<Figure>,
}

impl ReportBuilder {
    pub(crate) fn new(name: &str, runtime: &crate::runtime::RuntimeChoice) -> Self {
        Self { name: name.into(), runtime: choice::label(runtime), runtime_version: None, started: Instant::now(), assertions: Vec::new(), figures: Vec::new() }
    }

    /// A check run on another host: its rows say which ("OpenCode (server) on build-box").
    pub(crate) fn on_host(mut self, host: Option<&str>) -> Self {
        if let Some(host) = host {
            self.runtime = format!("{} on {host}", self.runtime);
        }
        self
    }

    /// Record an assertion; returns whether it passed.
    pub(crate) fn check(&mut self, name: &str, passed: bool, detail: impl Into<String>) -> bool {
        let mut detail = detail.into();
        if detail.chars().count() > MAX_DETAIL_CHARS {
            detail = detail.chars().take(MAX_DETAIL_CHARS).collect::<String>() + "…";
        }
        if !passed {
            tracing::warn!(check = %self.name, assertion = name, %detail, "diagnostics assertion failed");
        }
        self.assertions.push(Assertion { name: name.into(), passed, detail });
        passed
    }

    pub(crate) fn figure(&mut self, figure: Figure) {
        self.figures.push(figure);
    }

    pub(crate) fn figure_opt(&mut self, figure: Option<Figure>) {
        self.figures.extend(figure);
    }

    pub(crate) fn finish(self, outcome: Result<(), CheckError>) -> CheckReport {
        let cancelled = matches!(outcome, Err(CheckError::Cancelled));
        let error = outcome.err().map(|e| e.to_string());
        let passed = error.is_none() && !self.assertions.is_empty() && self.assertions.iter().all(|a| a.passed);
        CheckReport {
            name: self.name,
            runtime: self.runtime,
            runtime_version: self.runtime_version,
            passed,
            cancelled,
            error,
            assertions: self.assertions,
            figures: self.figures,
            duration_ms: ms(self.started.elapsed()),
        }
    }
}

/// Why one prompt of a check did not answer.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error(transparent)]
    Kit(#[from] kit::KitError),
    #[error("the run was cancelled")]
    Cancelled,
    #[error("the runtime failed the turn: {0}")]
    Failed(String),
    #[error("the task running it failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Why a check stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("The check was cancelled.")]
    Cancelled,
    #[error("The options are invalid: {0}")]
    Options(String),
    #[error("The sandbox could not be prepared: {0}")]
    Sandbox(String),
    #[error("The scripted model server could not start: {0}")]
    ModelServer(String),
    #[error("The runtime failed: {0}")]
    Runtime(String),
    #[error("Timed out after {secs} s waiting for {what}.")]
    Timeout { what: String, secs: u64 },
    /// A step failed while the sandbox's disk was full: the likely reason, said plainly.
    #[error("{step} The disk holding the sandbox is full ({free_kib} KiB free at {path}); free some space and run the self-test again.")]
    DiskFull { step: String, free_kib: u64, path: String },
    #[error("{what} failed: {detail}")]
    Prompt { what: String, detail: String },
    #[error("{what}: answered {answered:?} instead of {expected}")]
    WrongAnswer { what: String, answered: String, expected: &'static str },
    /// Something a step produced (a session, a record, a tool call) is not there.
    #[error("The check found no {0}.")]
    Missing(String),
    #[error("{what} failed: {detail}")]
    Store { what: String, detail: String },
    #[error("A's compaction ended without reaching the model server: {0}")]
    CompactionNotSent(String),
    #[error("The gateway could not start: {0}")]
    GatewayStart(String),
    #[error("The gateway refused a grant: {0}")]
    GrantRefused(#[from] crate::toolbox::gateway::GrantError),
    #[error("The fixture MCP server did not start in the gateway.")]
    FixtureNotStarted,
}

/// Milliseconds as a float, for figures.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_and_values() {
        let f = Figure::distribution("x", "ms", &[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((f.samples, f.min, f.median, f.p95, f.max), (4, 1.0, 3.0, 10.0, 10.0));
        // Nearest rank: of 20 samples 1..=20, the 19th.
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(Figure::distribution("x", "ms", &twenty).unwrap().p95, 19.0);
        assert_eq!(Figure::distribution("x", "ms", &[]), None);
        let v = Figure::value("y", "bytes", 5.0);
        assert_eq!((v.samples, v.min, v.max), (1, 5.0, 5.0));
    }

    #[test]
    fn a_report_passes_only_when_every_assertion_passed_and_it_ran_to_the_end() {
        let mut b = ReportBuilder::new("t", &Default::default());
        b.check("one", true, "fine");
        let ok = b.finish(Ok(()));
        assert!(ok.passed && !ok.cancelled && ok.error.is_none());

        let mut b = ReportBuilder::new("t", &Default::default());
        b.check("one", true, "fine");
        b.check("two", false, "x".repeat(MAX_DETAIL_CHARS + 10));
        let failed = b.finish(Ok(()));
        assert!(!failed.passed);
        assert_eq!(failed.first_failure().unwrap().name, "two");
        assert!(failed.first_failure().unwrap().detail.chars().count() <= MAX_DETAIL_CHARS + 1);
        assert!(failed.to_text().contains("[FAIL] two"));

        let mut b = ReportBuilder::new("t", &Default::default());
        b.check("one", true, "fine");
        let cancelled = b.finish(Err(CheckError::Cancelled));
        assert!(!cancelled.passed && cancelled.cancelled);
        assert_eq!(cancelled.error.as_deref(), Some("The check was cancelled."));
        assert!(!ReportBuilder::new("empty", &Default::default()).finish(Ok(())).passed, "no assertion is no proof");
    }

    #[test]
    fn reports_serialise_in_camel_case() {
        let mut b = ReportBuilder::new("isolation", &Default::default());
        b.figure(Figure::value("held time", "ms", 1.0));
        let json = serde_json::to_value(b.finish(Ok(()))).unwrap();
        assert!(json.get("durationMs").is_some());
        assert_eq!(json["figures"][0]["samples"], 1);
    }
}
