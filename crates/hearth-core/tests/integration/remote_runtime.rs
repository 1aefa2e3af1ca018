//! A project on another host, against a real sshd on this machine logging in as a second user: the
//! runtime is staged and started there, reached through the link, and gone when the link closes.

use crate::support::{self, sshd};

use std::sync::Arc;
use std::time::Duration;

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
    let facade = runtimes.get_runtime(&selection, &space).await.unwrap();
    let finished = kit::run_to_end(&*facade, kit::run_request("c1", "Read marker.txt", &space), CancellationToken::new(), support::TURN_TIMEOUT).await.unwrap();
    assert!(matches!(&finished.end, TurnEnd::Done { text, .. } if text == "PROJECT_51"), "{:?}", finished.end);
    assert!(finished.tools().iter().any(|(t, out, _)| t == "read" && out.contains("PROJECT_51")), "{:?}", finished.tools());
    assert_eq!(sshd.remote_runtimes().len(), 1, "{:?}", sshd.remote_processes());
    assert_eq!(facade.status().host.as_deref(), Some(sshd::HOST));
    runtimes.dispose().await;
    remote.shutdown().await;
    let left = sshd.nothing_left(Duration::from_secs(15)).await;
    assert!(left.is_empty(), "left on the host: {left:?}");
}
