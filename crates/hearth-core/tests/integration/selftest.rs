//! The self-test against the real runtime: the reuse check passes with 2 projects, the whole
//! self-test passes, a second one started meanwhile is refused, and cancelling mid-run returns
//! promptly with the sandbox removed and no runtime left.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hearth_core::diagnostics::reuse::{run_reuse_check, ReuseOptions};
use hearth_core::diagnostics::{run_selftest, ProgressSink, SelftestError, SelftestOptions};
use hearth_core::runtime::RuntimeChoice;
use tokio_util::sync::CancellationToken;

/// A cancelled self-test must be back within this (runtime stop grace included).
const CANCEL_RETURN_LIMIT: Duration = Duration::from_secs(15);
/// Upper bound on one whole self-test here (the checks have their own bounds).
const SELFTEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The self-test allows one run per process: tests that start one take turns.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(crate) fn fixture_command() -> Vec<String> {
    vec![env!("CARGO_BIN_EXE_hearth-mcp-fixture").into()]
}

fn options(binary: PathBuf, rg_dir: PathBuf, parent: &Path) -> SelftestOptions {
    SelftestOptions {
        projects: 2,
        corpus_mib: 0,
        runtime_binary: binary,
        rg_dir: Some(rg_dir),
        fixture_command: fixture_command(),
        bridge_command: Some(support::bridge_command()),
        sandbox_parent: Some(parent.to_path_buf()),
        runtimes: vec![RuntimeChoice::OpenCode],
        agents: Default::default(),
        remote: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reuse_check_with_2_projects_passes_every_assertion() {
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let parent = tempfile::tempdir().unwrap();
    let opts = ReuseOptions {
        runtime_binary: binary,
        rg_dir: Some(rg_dir),
        projects: 2,
        sandbox_parent: Some(parent.path().to_path_buf()),
        fixture_command: fixture_command(),
        runtime: RuntimeChoice::OpenCode,
        agents: Default::default(),
        bridge_command: None,
        transport: Default::default(),

        remote: None,
    };
    let report = run_reuse_check(opts, ProgressSink::silent(), CancellationToken::new()).await;
    println!("{}", report.to_text());
    assert!(report.passed, "{}", report.to_text());
    for name in [
        "One runtime launch",
        "One process-owning runtime behind every facade",
        "Distinct native sessions",
        "Wave 2 continued each conversation's native session",
        "The model saw wave 1 when continuing in wave 2",
        "Each request's image reached only its own model calls",
        "Wave 1: the skill loaded in every run",
        "8 MCP calls through the gateway, each under its own request's grant",
        "Only the runtime's process may call the gateway",
        "Every project's first conversation compacted",
        "A cancelled turn ends at once and its model request is dropped",
        "The conversation answers again after the cancel",
        "Marker files intact",
        "No runtime process left and the sandbox removed",
    ] {
        assert!(report.assertions.iter().any(|a| a.name == name && a.passed), "missing or failed: {name:?}");
    }
    for figure in ["runtime launch", "wave 1 run latency", "wave 2 run latency", "runtime RSS (process tree)"] {
        assert!(report.figures.iter().any(|f| f.name == figure), "missing figure {figure:?}");
    }
    support::assert_sandbox_gone(parent.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_self_test_passes_with_2_projects_and_no_corpus() {
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let _turn = ONE_AT_A_TIME.lock().await;
    let parent = tempfile::tempdir().unwrap();
    let (sink, mut rx) = ProgressSink::channel();
    let report = tokio::time::timeout(SELFTEST_TIMEOUT, run_selftest(options(binary, rg_dir, parent.path()), sink, CancellationToken::new()))
        .await
        .expect("the self-test has its own bounds")
        .unwrap();
    println!("{}", report.to_text());
    assert!(report.passed, "{}", report.to_text());
    assert_eq!(report.checks.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["reuse", "isolation"]);
    assert_eq!(report.runtime_version.as_deref(), Some("1.18.33"));
    let mut steps = Vec::new();
    while let Ok(p) = rx.try_recv() {
        steps.push(p.step);
    }
    assert!(steps.iter().any(|s| s == "reuse.wave-2") && steps.iter().any(|s| s == "isolation.held"), "{steps:?}");
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["checks"][0]["assertions"].as_array().is_some_and(|a| !a.is_empty()));
    support::assert_sandbox_gone(parent.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_self_test_is_refused_and_cancel_returns_promptly_leaving_nothing() {
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let _turn = ONE_AT_A_TIME.lock().await;
    let parent = tempfile::tempdir().unwrap();
    let (sink, mut rx) = ProgressSink::channel();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(run_selftest(options(binary.clone(), rg_dir.clone(), parent.path()), sink, cancel.clone()));
    // Mid-run: the first wave is in flight against the launched runtime.
    while let Some(p) = rx.recv().await {
        if p.step == "reuse.wave-1" {
            break;
        }
    }
    let second = run_selftest(options(binary, rg_dir, parent.path()), ProgressSink::silent(), CancellationToken::new()).await;
    assert_eq!(second.unwrap_err(), SelftestError::AlreadyRunning);
    let cancelled_at = Instant::now();
    cancel.cancel();
    let report = running.await.unwrap().unwrap();
    let took = cancelled_at.elapsed();
    println!("{}", report.to_text());
    assert!(took < CANCEL_RETURN_LIMIT, "cancel took {took:?}");
    assert!(report.cancelled && !report.passed);
    assert_eq!(report.checks.len(), 1, "the isolation check does not start after a cancel");
    assert_eq!(report.checks[0].error.as_deref(), Some("The check was cancelled."));
    support::assert_sandbox_gone(parent.path());
}
