//! The Diagnostics panel's self-test on a host the user names, through the app, against a real
//! sshd on this machine logging in as a second user: the reuse check (2 projects, images, MCP
//! through the reverse forward) and the isolation check (a 2 MiB corpus) run their projects on
//! the host, with the runtime the app runs there; then nothing of the check is left on the host.
//! A host that cannot be reached, and a runtime that runs only here, are each a sentence.

use crate::selftest::fixture_command;
use crate::support::{self, sshd};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::app::diagnostics::SelftestRequest;
use hearth_core::app::*;
use hearth_core::diagnostics::sandbox::SANDBOX_PREFIX;
use hearth_core::diagnostics::ProgressSink;
use hearth_core::runtime::RuntimeChoice;

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

/// The sandboxes the remote user has in the shared /tmp (local checks make theirs there too).
fn remote_sandboxes() -> Vec<String> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = String::from_utf8_lossy(&std::process::Command::new("id").args(["-u", sshd::REMOTE_USER]).output().unwrap().stdout).trim().parse::<u32>().unwrap();
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(SANDBOX_PREFIX) && e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| e.path().display().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_self_test_runs_on_a_named_host_and_leaves_nothing_there() {
    let _turn = sshd::ONE_AT_A_TIME.lock().await;
    if support::require_runtime().await.is_none() {
        return;
    }
    let Some(sshd) = sshd::require_sshd() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = support::app_options(&tmp.path().join("data"), support::app_locate_inputs());
    opts.ssh_config = Some(sshd.client_config.clone());
    let hearth = Hearth::open(opts, Arc::new(support::Recorder::default())).await.unwrap();
    let data = sshd.home.join(hearth_core::remote::launch::DATA_DIR);
    let data_before = entries(&data);
    let sandboxes_before = remote_sandboxes();

    let request = |host: &str, runtimes: Option<Vec<RuntimeChoice>>| SelftestRequest { projects: 2, corpus_mib: 2, runtimes, host: Some(host.into()) };
    let report = hearth.run_selftest(request(sshd::HOST, None), fixture_command(), ProgressSink::silent()).await.unwrap();
    println!("{}", report.to_text());
    assert!(report.passed, "{}", report.to_text());
    let names: Vec<(&str, &str)> = report.checks.iter().map(|c| (c.name.as_str(), c.runtime.as_str())).collect();
    let on_host = format!("OpenCode (server) on {}", sshd::HOST);
    assert_eq!(names, [("reuse", on_host.as_str()), ("isolation", on_host.as_str())], "by default only OpenCode's server, on the host");
    let reuse = &report.checks[0];
    for passed in ["Marker files intact", "Distinct native sessions", "One runtime launch"] {
        assert!(reuse.assertions.iter().any(|a| a.name == passed && a.passed), "{passed}: {}", reuse.to_text());
    }
    assert!(reuse.figures.iter().any(|f| f.name == "runtime processes on the host" && f.median >= 1.0), "measured on the host: {}", reuse.to_text());

    // Nothing of the check is left there: no process, no project folder, no runtime files.
    let left = sshd.nothing_left(Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
    assert_eq!(remote_sandboxes(), sandboxes_before, "the check's folder on the host is removed");
    assert_eq!(entries(&data), data_before, "the check's runtime files on the host are removed");

    // A host that cannot be reached: the report says so by name, and the app goes on.
    let report = hearth.run_selftest(request(sshd::HOST_DOWN, None), fixture_command(), ProgressSink::silent()).await.unwrap();
    assert!(!report.passed);
    let error = report.checks[0].error.clone().unwrap_or_default();
    assert!(error.contains(sshd::HOST_DOWN) && error.contains("could not be reached"), "{}", report.to_text());
    // An agent that runs here only is named as not checkable on a host.
    let acp = RuntimeChoice::Acp { agent: "opencode".into() };
    let report = hearth.run_selftest(request(sshd::HOST, Some(vec![acp])), fixture_command(), ProgressSink::silent()).await.unwrap();
    assert!(!report.passed && report.checks.is_empty(), "{}", report.to_text());
    assert!(report.skipped[0].reason.contains("runs on this machine only"), "{:?}", report.skipped);
    hearth.shutdown().await;
    assert!(sshd.nothing_left(Duration::from_secs(15)).await.is_empty());
}
