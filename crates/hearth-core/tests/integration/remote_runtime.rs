//! A project on another host, against a real sshd on this machine logging in as a second user: the
//! runtime is staged and started there, reached through the link, measured there, and gone when
//! the link closes. It prints the figures the closing notes quote: a remote project's first prompt
//! cold (staging included) and warm, against a local project on the same fixture.

use crate::support::{self, sshd};

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::diagnostics::kit;
use hearth_core::remote::spec::RemoteRuntimeConfig;
use hearth_core::remote::Remote;
use hearth_core::runtime::{AgentRuntime as _, RegistryConfig, RuntimeSelection, TurnEnd};
use hearth_core::scripted_model::{Script, ScriptedModelServer};
use hearth_core::toolbox::gateway::{AllowedCallers, Gateway, GatewayOptions};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_project_runs_on_the_hosts_runtime_and_nothing_is_left_there() {
    let _turn = sshd::ONE_AT_A_TIME.lock().await;
    let Some(found) = support::require_runtime().await else { return };
    let Some(sshd) = sshd::require_sshd() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModelServer::start(Script::default_agent()).unwrap();
    let remote_slot: Arc<std::sync::OnceLock<Arc<Remote>>> = Arc::default();
    let slot = remote_slot.clone();
    let callers = AllowedCallers::pids(move || slot.get().map(|r| r.link_pids()).unwrap_or_default());
    let gateway = Arc::new(Gateway::start(GatewayOptions { callers, ..Default::default() }).await.unwrap());
    let remote = Remote::start(sshd.options(), gateway.clone()).await.unwrap();
    let _ = remote_slot.set(remote.clone());
    let runtimes = kit::runtimes(&tmp.path().join("runtime"), None, RegistryConfig::default(), 4);
    let dir = sshd.remote_project("alpha", &[("marker.txt", "PROJECT_51")]);
    let space = hearth_core::space::remote(sshd::HOST, dir.to_str().unwrap()).unwrap();
    let selection: RuntimeSelection = Arc::new(RemoteRuntimeConfig { host: sshd::HOST.into(), config: kit::scripted_config(&found, &model, false), remote: remote.clone() });
    // Cold: nothing staged on the host yet.
    let _ = std::fs::remove_dir_all(sshd.home.join(hearth_core::remote::stage::STAGE_DIR));
    let turn = |facade: Arc<hearth_core::runtime::WorkspaceRuntime>, conversation: &'static str, space: hearth_core::space::ExecutionSpace| async move {
        let started = Instant::now();
        let finished = kit::run_to_end(&*facade, kit::run_request(conversation, "Read marker.txt", &space), CancellationToken::new(), support::TURN_TIMEOUT).await.unwrap();
        (started.elapsed(), finished)
    };
    let started = Instant::now();
    let facade = runtimes.get_runtime(&selection, &space).await.unwrap();
    let (first, finished) = turn(facade.clone(), "c1", space.clone()).await;
    let cold = started.elapsed();
    assert!(matches!(&finished.end, TurnEnd::Done { text, .. } if text == "PROJECT_51"), "{:?}", finished.end);
    assert!(finished.tools().iter().any(|(t, out, _)| t == "read" && out.contains("PROJECT_51")), "{:?}", finished.tools());
    assert_eq!(sshd.remote_runtimes().len(), 1, "{:?}", sshd.remote_processes());
    let status = facade.status();
    assert_eq!(status.host.as_deref(), Some(sshd::HOST));
    // The Runtime view's memory on the host: what the keeper measured there, not a local pid's.
    let grown = |m: &Option<hearth_core::runtime::HostMemory>| m.is_some_and(|m| m.processes >= 1 && m.rss_bytes > 10 * 1024 * 1024);
    let within = hearth_core::remote::supervisor::STATS_EVERY * 3;
    assert!(support::wait_until(within, || async { grown(&facade.status().host_memory) }).await, "{:?}", facade.status().host_memory);
    let memory = facade.status().host_memory.unwrap();
    let mut remote_warm = vec![];
    for c in ["c2", "c3", "c4"] {
        let (took, finished) = turn(facade.clone(), c, space.clone()).await;
        assert!(matches!(&finished.end, TurnEnd::Done { text, .. } if text == "PROJECT_51"), "{:?}", finished.end);
        remote_warm.push(took);
    }

    // The same fixture here, on a local runtime of the same configuration.
    let local_dir = tmp.path().join("local");
    std::fs::create_dir(&local_dir).unwrap();
    std::fs::write(local_dir.join("marker.txt"), "PROJECT_51").unwrap();
    let local_space = hearth_core::space::resolve_local(&local_dir).unwrap();
    let local_selection: RuntimeSelection = Arc::new(kit::scripted_config(&found, &model, false));
    let started = Instant::now();
    let local = runtimes.get_runtime(&local_selection, &local_space).await.unwrap();
    let (_, finished) = turn(local.clone(), "l1", local_space.clone()).await;
    let local_cold = started.elapsed();
    assert!(matches!(&finished.end, TurnEnd::Done { text, .. } if text == "PROJECT_51"), "{:?}", finished.end);
    let mut local_warm = vec![];
    for c in ["l2", "l3", "l4"] {
        local_warm.push(turn(local.clone(), c, local_space.clone()).await.0);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (rw, lw) = (median(&mut remote_warm), median(&mut local_warm));
    println!(
        "remote first prompt cold (staging included): {cold:?} (its turn {first:?}); warm turn median {rw:?} remote, {lw:?} local ({:.2}x); local first prompt cold {local_cold:?}; remote runtime {} MiB in {} processes on the host",
        rw.as_secs_f64() / lw.as_secs_f64(),
        memory.rss_bytes / (1024 * 1024),
        memory.processes
    );
    runtimes.dispose().await;
    remote.shutdown().await;
    let left = sshd.nothing_left(Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
}
