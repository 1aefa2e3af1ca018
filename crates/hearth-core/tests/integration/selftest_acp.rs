//! The self-test's checks on ACP agents: `opencode acp` (the bundled runtime binary) with 2 and 10
//! projects, and Claude Code, an agent that is not OpenCode, with 2 — each against the built-in
//! scripted model, offline, through the same checks the Diagnostics panel and CI run.

use crate::support;

use std::path::Path;

use hearth_core::acp::{AgentSearch, GatewayTransport};
use hearth_core::diagnostics::isolation::{run_isolation_check, IsolationOptions};
use hearth_core::diagnostics::reuse::{run_reuse_check, ReuseOptions};
use hearth_core::diagnostics::{CheckReport, ProgressSink};
use hearth_core::runtime::RuntimeChoice;
use tokio_util::sync::CancellationToken;

use crate::selftest::fixture_command;

fn agents() -> AgentSearch {
    AgentSearch { anchors: vec![support::workspace_root()], ..AgentSearch::from_process(vec![]) }
}

fn acp(agent: &str) -> RuntimeChoice {
    RuntimeChoice::Acp { agent: agent.into() }
}

async fn reuse(runtime: RuntimeChoice, projects: usize, parent: &Path) -> Option<CheckReport> {
    reuse_over(runtime, projects, parent, GatewayTransport::Auto).await
}

async fn reuse_over(runtime: RuntimeChoice, projects: usize, parent: &Path, transport: GatewayTransport) -> Option<CheckReport> {
    let support::FoundRuntime { binary, rg_dir } = support::require_runtime().await?;
    let opts = ReuseOptions {
        runtime_binary: binary,
        rg_dir: Some(rg_dir),
        projects,
        sandbox_parent: Some(parent.to_path_buf()),
        fixture_command: fixture_command(),
        runtime,
        agents: agents(),
        bridge_command: Some(support::bridge_command()),
        transport,

        remote: None,
    };
    let report = run_reuse_check(opts, ProgressSink::silent(), CancellationToken::new()).await;
    println!("{}", report.to_text());
    Some(report)
}

fn assert_passed_with(report: &CheckReport, names: &[&str]) {
    assert!(report.passed, "{}", report.to_text());
    for name in names {
        assert!(report.assertions.iter().any(|a| a.name == *name && a.passed), "missing or failed: {name:?}\n{}", report.to_text());
    }
}

/// What every reuse check proves, whatever the runtime.
const REUSE_PROMISES: &[&str] = &[
    "One runtime launch",
    "One process-owning runtime behind every facade",
    "Distinct native sessions",
    "Wave 1: each run read its own marker with the runtime's read tool",
    "Wave 2 continued each conversation's native session",
    "The model saw wave 1 when continuing in wave 2",
    "A cancelled turn ends at once and its model request is dropped",
    "The conversation answers again after the cancel",
    "Marker files intact",
    "No runtime process left and the sandbox removed",
];

/// The full seed (2 projects): images, MCP calls under each request's own grant, the caller check.
const FULL_SEED_PROMISES: &[&str] = &[
    "Each request's image reached only its own model calls",
    "8 MCP calls through the gateway, each under its own request's grant",
    "Only the runtime's process may call the gateway",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_acp_passes_the_reuse_check_with_2_and_10_projects() {
    let parent = tempfile::tempdir().unwrap();
    let Some(two) = reuse(acp("opencode"), 2, parent.path()).await else { return };
    assert_eq!(two.runtime, "OpenCode (ACP)");
    assert_passed_with(&two, REUSE_PROMISES);
    assert_passed_with(&two, FULL_SEED_PROMISES);
    assert_passed_with(&two, &["Wave 1: the skill loaded in every run"]);
    assert!(!two.assertions.iter().any(|a| a.name.contains("compacted")), "ACP has no compaction request");
    let ten = reuse(acp("opencode"), 10, parent.path()).await.unwrap();
    assert_passed_with(&ten, REUSE_PROMISES);
    support::assert_sandbox_gone(parent.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_acp_passes_the_isolation_check_with_an_8_mib_corpus() {
    let Some(support::FoundRuntime { binary, rg_dir }) = support::require_runtime().await else { return };
    let parent = tempfile::tempdir().unwrap();
    let mut opts = IsolationOptions::new(binary, Some(rg_dir), 8);
    opts.runtime = acp("opencode");
    opts.agents = agents();
    opts.sandbox_parent = Some(parent.path().to_path_buf());
    let report = run_isolation_check(opts, ProgressSink::silent(), CancellationToken::new()).await;
    println!("{}", report.to_text());
    assert_passed_with(
        &report,
        &[
            "B answered while A's huge request was held",
            "Every corpus canary and fill byte reached the model server",
            "A's cancel ended its turn and dropped its model request",
            "A continues its own session after the cancel",
            "Sandbox removed and agent stopped",
        ],
    );
    for figure in ["B prompt, A idle", "B prompt, A held", "B prompt held/idle", "cancel of A"] {
        assert!(report.figures.iter().any(|f| f.name == figure), "missing figure {figure:?}");
    }
    support::assert_sandbox_gone(parent.path());
}

/// Claude Code, through its ACP adapter, against the scripted model's Anthropic endpoint: the same
/// reuse promises and the isolation check, with 2 projects.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_passes_the_reuse_and_isolation_checks() {
    if support::require_claude_agent().is_none() {
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let Some(report) = reuse(acp("claude-code"), 2, parent.path()).await else { return };
    assert_eq!(report.runtime, "Claude Code");
    assert_passed_with(&report, REUSE_PROMISES);
    assert_passed_with(&report, FULL_SEED_PROMISES);

    let support::FoundRuntime { binary, rg_dir } = support::require_runtime().await.unwrap();
    let mut opts = IsolationOptions::new(binary, Some(rg_dir), 2);
    opts.runtime = acp("claude-code");
    opts.agents = agents();
    opts.sandbox_parent = Some(parent.path().to_path_buf());
    let report = run_isolation_check(opts, ProgressSink::silent(), CancellationToken::new()).await;
    println!("{}", report.to_text());
    assert_passed_with(&report, &["B answered while A's huge request was held", "A's cancel ended its turn and dropped its model request", "Sandbox removed and agent stopped"]);
    support::assert_sandbox_gone(parent.path());
}

/// An agent that takes MCP servers over stdio only gets the gateway through Hearth's stdio bridge,
/// one per session: Claude Code made to use it keeps every promise, the MCP calls each under its
/// own request's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_through_the_stdio_bridge_keeps_each_call_under_its_own_grant() {
    if support::require_claude_agent().is_none() {
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    // Count the bridges alive while the check runs: one per session, or the calls went elsewhere.
    let bridge = std::fs::canonicalize(&support::bridge_command()[0]).unwrap();
    let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watch = {
        let most = most.clone();
        tokio::spawn(async move {
            loop {
                let n = std::fs::read_dir("/proc").unwrap().flatten().filter(|e| std::fs::read_link(e.path().join("exe")).is_ok_and(|exe| exe == bridge)).count();
                most.fetch_max(n, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    let Some(report) = reuse_over(acp("claude-code"), 2, parent.path(), GatewayTransport::Stdio).await else { return };
    watch.abort();
    assert_passed_with(&report, REUSE_PROMISES);
    assert_passed_with(&report, FULL_SEED_PROMISES);
    assert!(most.load(std::sync::atomic::Ordering::SeqCst) >= 4, "a bridge per session of the 4 conversations: at most {} seen", most.load(std::sync::atomic::Ordering::SeqCst));
    support::assert_sandbox_gone(parent.path());
}
