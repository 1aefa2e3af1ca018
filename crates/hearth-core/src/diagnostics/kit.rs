//! The kit every check against the real runtime uses — the self-test's checks, the integration
//! tests, the benchmarks and the examples — so they run the same wiring the app runs:
//! a runtime configuration of the scripted model, the runtimes (the app's one wiring, in a sandbox),
//! finding the runtime binary, running a turn to its end, and waiting for a condition.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::binaries::executable::ProbeEnv;
use crate::binaries::opencode::{self as locate, LocateInputs};
use crate::binaries::ripgrep::{self, RgInputs};
use crate::opencode::config::{Authentication, ModelProfile, Protocol, RuntimeConfig};
use crate::opencode::OpenCodeRuntime;
use crate::runtime::{
    AgentRuntime, ManagerConfig, OutsideProject, RegistryConfig, RunHooks, RunRequest, RuntimeEvent, RuntimeHost, SelectedRuntimeManager, TurnEnd,
    WorkMode, WorkspaceRuntime,
};
use crate::scripted_model::ScriptedModelServer;
use crate::space::ExecutionSpace;

/// The profile id the scripted model serves under.
pub const SCRIPTED_PROFILE_ID: &str = "scripted";
/// How often [`wait_until`] looks again.
pub const WAIT_POLL: Duration = Duration::from_millis(20);

/// Why the kit could not find the runtime or run a turn to its end.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    #[error("no temporary folder: {0}")]
    NoTempDir(std::io::Error),
    #[error(transparent)]
    Runtime(#[from] locate::LocateError),
    #[error(transparent)]
    Ripgrep(#[from] ripgrep::RgError),
    #[error("the run's stream ended without an end")]
    NoEnd,
    #[error("the run did not end within {} s", .0.as_secs())]
    TimedOut(Duration),
}

/// The runtime binary and the folder holding `rg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRuntime {
    pub binary: PathBuf,
    pub rg_dir: PathBuf,
}

/// The checkout this crate was built from (where `scripts/setup.sh` installs the runtime).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// The app's options for a data folder (created if needed), finding the runtime as `opencode`
/// says, with secrets in the data folder's private file (never the user's keyring).
pub fn app_options(data: &Path, opencode: LocateInputs) -> Result<crate::app::HearthOptions, crate::host::paths::PathsError> {
    let paths = crate::host::paths::AppPaths::under(data);
    paths.ensure()?;
    let binaries = crate::app::runtime_config::BinaryInputs { opencode, ripgrep: RgInputs::from_process(None, None), probe_home: paths.probe_dir.clone() };
    Ok(crate::app::HearthOptions { secrets: crate::store::secrets::SecretsBackend::FileOnly, ..crate::app::HearthOptions::new(paths, binaries) })
}

/// Where the app finds the runtime in a checkout: its `node_modules`.
pub fn checkout_locate_inputs() -> LocateInputs {
    LocateInputs { anchors: vec![workspace_root()], ..Default::default() }
}

/// Find the pinned runtime and `rg` as a developer machine has them: `HEARTH_OPENCODE_BIN` if set,
/// else the checkout's `node_modules`; `rg` from `HEARTH_RG_BIN` or `PATH`. A sentence when either
/// is missing.
pub async fn locate_runtime() -> Result<FoundRuntime, KitError> {
    let scratch = tempfile::tempdir().map_err(KitError::NoTempDir)?;
    let env = ProbeEnv { scratch_home: scratch.path().into() };
    let inputs = LocateInputs { env_path: std::env::var_os(crate::opencode::BIN_ENV).filter(|v| !v.is_empty()).map(PathBuf::from), anchors: vec![workspace_root()], ..Default::default() };
    let rg_inputs = RgInputs::from_process(None, None);
    let (oc, rg) = tokio::join!(locate::locate(&inputs, &env), ripgrep::locate(&rg_inputs, &env));
    let (oc, rg) = (oc?, rg?);
    // A located `rg` is an absolute file path, so it has a parent.
    let rg_dir = rg.path.parent().unwrap_or(Path::new("/")).to_path_buf();
    Ok(FoundRuntime { binary: oc.path, rg_dir })
}

/// The scripted model as a model profile.
pub fn scripted_profile(model: &ScriptedModelServer, id: &str, image_input: bool) -> ModelProfile {
    ModelProfile {
        id: id.into(),
        name: "Built-in scripted model".into(),
        protocol: Protocol::OpenAiChatCompletions,
        base_url: model.base_url(),
        model: model.model_id().into(),
        authentication: Authentication::ApiKey(model.api_key().into()),
        image_input,
    }
}

/// A runtime configuration whose one profile is the scripted model.
pub fn scripted_config(found: &FoundRuntime, model: &ScriptedModelServer, image_input: bool) -> RuntimeConfig {
    RuntimeConfig::single(found.binary.clone(), Some(found.rg_dir.clone()), scripted_profile(model, SCRIPTED_PROFILE_ID, image_input))
}

/// The app's one wiring of runtimes (manager → registry → runtime), rooted in `root` (a sandbox).
pub fn runtimes(root: &Path, hooks: Option<Arc<dyn RunHooks>>, registry: RegistryConfig, facade_capacity: usize) -> SelectedRuntimeManager {
    SelectedRuntimeManager::start(ManagerConfig {
        host: RuntimeHost { root: root.to_path_buf(), records_dir: Some(root.join("records")), hooks, connect_via: None },
        registry,
        facade_capacity,
    })
}

/// The OpenCode runtime behind a facade, for checks that measure its HTTP API directly.
pub fn opencode_of(facade: &WorkspaceRuntime) -> Option<OpenCodeRuntime> {
    facade.process()?.as_any().downcast_ref::<OpenCodeRuntime>().cloned()
}

/// A plain prompt of `conversation` in `space`.
pub fn run_request(conversation: &str, prompt: &str, space: &ExecutionSpace) -> RunRequest {
    RunRequest {
        request_id: uuid::Uuid::new_v4().to_string(),
        conversation_id: conversation.into(),
        prompt: prompt.into(),
        work_mode: WorkMode::Execute,
        outside_project: OutsideProject::Deny,
        images: vec![],
        profile_id: None,
        space: space.clone(),
        native_session: None,
    }
}

/// A run that reached its end: every event in order, how it ended, how long it took.
#[derive(Debug, Clone)]
pub struct Finished {
    pub events: Vec<RuntimeEvent>,
    pub end: TurnEnd,
    pub took: Duration,
}

impl Finished {
    /// All streamed text, in order.
    pub fn streamed(&self) -> String {
        self.events.iter().filter_map(|e| match e { RuntimeEvent::TextDelta { text } => Some(text.as_str()), _ => None }).collect()
    }

    /// The final text of a finished turn; `None` when it did not finish.
    pub fn done_text(&self) -> Option<&str> {
        match &self.end {
            TurnEnd::Done { text, .. } => Some(text),
            _ => None,
        }
    }

    /// (tool, output, error) of every finished tool call.
    pub fn tools(&self) -> Vec<(String, String, Option<String>)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                RuntimeEvent::ToolFinished { tool, output, error, .. } => Some((tool.clone(), output.clone(), error.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Run `request` to its end, or give up after `timeout` (dropping the stream cancels the run).
pub async fn run_to_end(runtime: &dyn AgentRuntime, request: RunRequest, cancel: CancellationToken, timeout: Duration) -> Result<Finished, KitError> {
    let started = Instant::now();
    let mut stream = runtime.run(request, cancel);
    let mut events = Vec::new();
    let collected = tokio::time::timeout(timeout, async {
        while let Some(event) = stream.next().await {
            if let RuntimeEvent::Ended { end } = &event {
                let end = end.clone();
                events.push(event);
                return Ok(end);
            }
            events.push(event);
        }
        Err(KitError::NoEnd)
    })
    .await;
    match collected {
        Ok(Ok(end)) => Ok(Finished { events, end, took: started.elapsed() }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(KitError::TimedOut(timeout)),
    }
}

/// Wait until `condition` holds, looking every [`WAIT_POLL`]; `false` if `timeout` passed first.
pub async fn wait_until<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// Wait up to `timeout` for process `pid` to be gone.
pub async fn gone_within(pid: u32, timeout: Duration) -> bool {
    wait_until(timeout, || async move { !crate::host::procinfo::is_running(pid) }).await
}
