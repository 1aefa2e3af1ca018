//! The app: one object that owns the store, the runtime registry and manager, the built-in model and
//! the running turns, with one method per thing a user does. The Tauri commands and the CLI are thin
//! adapters over it; nothing here knows about windows.

mod agents;
mod attachments;
mod catalog;
mod changes;
mod conversations;
pub mod diagnostics;
mod error;
mod permissions;
mod profiles;
mod remote;
mod runtime_binary;
pub mod runtime_config;
pub mod startup;
pub mod tools;
mod turns;
pub mod updates;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use agents::choice_of;
pub use remote::space_of;
pub use attachments::StagedAttachment;
pub use conversations::DEFAULT_CONVERSATION_TITLE;
pub use profiles::{generation_check, ProfileSave, ProfileTestOutcome};
pub use updates::{ConversationSnapshot, ConversationUpdate, ConversationUpdateKind, NoUpdates, UpdateSink};
pub use error::{AppError, AppResult, ErrorCode};
use runtime_config::{BinaryInputs, Binaries, BuiltinModel};
use turns::RunningTurn;
pub use turns::FINISHING_TURN_WAIT;

use crate::host::paths::AppPaths;
use crate::images::PreparedImage;
use crate::runtime::*;
use crate::space::ExecutionSpace;
use crate::store::secrets::SecretsBackend;
use crate::store::{Store, StoreError};
use crate::toolbox::gateway::AllowedCallers;

/// Logged when a project's instance in the runtime is warm after the project was opened.
pub const PREWARMED_LOG: &str = "project pre-warmed";
/// How long closing the app waits for a cancelled self-test to clean up.
pub const SHUTDOWN_SELFTEST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Everything injected into the app.
pub struct HearthOptions {
    pub paths: AppPaths,
    pub binaries: BinaryInputs,
    /// Bounds of the runtime registry (tests shorten them).
    pub registry: RegistryConfig,
    /// Where the runtime's client connects instead of the address the process printed (a test's
    /// severable proxy); `None` in the app.
    pub connect_via: Option<Arc<dyn Fn(std::net::SocketAddr) -> std::net::SocketAddr + Send + Sync>>,
    /// Whether secrets may go to the desktop keyring (the app) or stay in the private file (tests).
    pub secrets: SecretsBackend,
    /// Time bounds of the ACP agents (tests shorten them).
    pub acp_bounds: crate::acp::AcpBounds,
    /// The command of Hearth's stdio bridge to the gateway (the app: `[its binary, "mcp-bridge"]`),
    /// for agents that take MCP servers over stdio only; `None`: they get no Hearth tools.
    pub bridge_command: Option<Vec<String>>,
    /// An ssh configuration file used instead of the user's own (`HEARTH_SSH_CONFIG`; tests).
    pub ssh_config: Option<PathBuf>,
}

impl HearthOptions {
    /// The app's options: production bounds, secrets in the keyring where one answers.
    pub fn new(paths: AppPaths, binaries: BinaryInputs) -> Self {
        Self { paths, binaries, registry: RegistryConfig::default(), connect_via: None, secrets: SecretsBackend::DesktopKeyring, acp_bounds: Default::default(), bridge_command: None, ssh_config: None }
    }
}

pub struct Hearth {
    paths: AppPaths,
    store: Store,
    updates: updates::Updates,
    binary_inputs: BinaryInputs,
    binaries: tokio::sync::Mutex<Option<Binaries>>,
    builtin: BuiltinModel,
    runtimes: Arc<SelectedRuntimeManager>,
    turns: Mutex<HashMap<String, RunningTurn>>,
    /// What each turn changed in its project's files (see `changes.rs`).
    changes: Arc<crate::changes::ChangeTracker>,
    /// Projects whose files an undo or redo is writing: no turn starts there meanwhile.
    rewinding: Mutex<HashSet<String>>,
    staged: Mutex<HashMap<String, PreparedImage>>,
    permissions: permissions::Permissions,
    tools: tools::Tools,
    selftest: diagnostics::SelftestSlot,
    acp_bounds: crate::acp::AcpBounds,
    agent_failures: agents::AgentFailures,
    bridge_command: Option<Vec<String>>,
    /// The hosts of projects on other machines, one ssh link each.
    remote: Arc<crate::remote::Remote>,
}

/// Run a store call off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(store: &Store, f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static) -> AppResult<T> {
    let s = store.clone();
    tokio::task::spawn_blocking(move || f(&s)).await?.map_err(AppError::from)
}

impl Hearth {
    /// Open the store (recovering turns a crash interrupted) and sweep runtimes an earlier Hearth
    /// left behind. The runtime itself starts on first use.
    pub async fn open(options: HearthOptions, updates: Arc<dyn UpdateSink>) -> AppResult<Arc<Self>> {
        let (data, secrets) = (options.paths.data_dir.clone(), options.secrets);
        let store = tokio::task::spawn_blocking(move || Store::open_in_data_dir(&data, secrets)).await??;
        let recovered = blocking(&store, |s| s.recover_interrupted()).await?;
        if recovered > 0 {
            tracing::warn!(recovered, "marked replies interrupted by an earlier exit");
        }
        let records = options.paths.data_dir.join("runtime").join("records");
        let swept = crate::host::records::sweep(&records).await;
        if !swept.stopped.is_empty() {
            tracing::warn!(stopped = ?swept.stopped, "stopped runtimes left behind by an earlier Hearth");
        }
        // The gateway serves the processes of the runtimes Hearth runs, and nothing else. The
        // manager that knows them is made after the gateway (its runtimes report to the gateway's
        // hooks), so the gateway asks it through a slot.
        let manager_slot: Arc<std::sync::OnceLock<std::sync::Weak<SelectedRuntimeManager>>> = Arc::default();
        let callers = {
            let slot = manager_slot.clone();
            AllowedCallers::pids(move || slot.get().and_then(std::sync::Weak::upgrade).map(|m| m.pids()).unwrap_or_default())
        };
        let tools = tools::Tools::start(&options.paths.data_dir, callers).await?;
        let ssh = crate::remote::ssh::SshOptions::for_data_dir(&options.paths.data_dir, options.ssh_config.clone());
        let remote = crate::remote::Remote::start(ssh, tools.hooks.gateway().clone()).await?;
        // The one wiring of manager → registry → runtime; the self-test builds the same one.
        let mut config = ManagerConfig::new(RuntimeHost {
            root: options.paths.data_dir.join("runtime"),
            records_dir: Some(records),
            hooks: Some(tools.hooks.clone() as Arc<dyn RunHooks>),
            connect_via: options.connect_via,
        });
        config.registry = options.registry;
        let runtimes = Arc::new(SelectedRuntimeManager::start(config));
        let _ = manager_slot.set(Arc::downgrade(&runtimes));
        let changes_root = options.paths.data_dir.join("changes");
        let hearth = Arc::new(Self {
            paths: options.paths,
            store,
            updates: updates::Updates::new(updates),
            binary_inputs: options.binaries,
            binaries: tokio::sync::Mutex::new(None),
            builtin: BuiltinModel::default(),
            runtimes,
            turns: Mutex::new(HashMap::new()),
            changes: Arc::new(crate::changes::ChangeTracker::new(changes_root)),
            rewinding: Mutex::new(HashSet::new()),
            staged: Mutex::new(HashMap::new()),
            permissions: Default::default(),
            tools,
            selftest: Default::default(),
            acp_bounds: options.acp_bounds,
            agent_failures: Default::default(),
            bridge_command: options.bridge_command,
            remote,
        });
        // The user's MCP servers start in the background; their status shows in the Tools view.
        let me = hearth.clone();
        tokio::spawn(async move {
            if let Err(e) = me.refresh_mcp_servers().await {
                tracing::warn!(error = %e, "could not start the configured MCP servers");
            }
        });
        Ok(hearth)
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn paths(&self) -> &AppPaths {
        &self.paths
    }

    /// The built-in scripted model server, if it was started.
    pub fn builtin_model(&self) -> Option<Arc<crate::scripted_model::ScriptedModelServer>> {
        self.builtin.started()
    }

    async fn binaries(&self) -> AppResult<Binaries> {
        let mut guard = self.binaries.lock().await;
        if let Some(b) = guard.as_ref() {
            return Ok(b.clone());
        }
        let mut inputs = self.binary_inputs.clone();
        inputs.opencode.settings_path = self.chosen_runtime_binary().await?;
        let found = runtime_config::locate_binaries(&inputs).await?;
        *guard = Some(found.clone());
        Ok(found)
    }

    /// Look for the binaries again on next use (after the user fixed an install or chose another).
    pub async fn forget_binaries(&self) {
        *self.binaries.lock().await = None;
    }

    /// The facade of the runtime `choice` names, for `space`, under the current configuration.
    pub(crate) async fn runtime_for(&self, choice: &RuntimeChoice, space: &ExecutionSpace) -> AppResult<Arc<WorkspaceRuntime>> {
        let selection = match space.host() {
            Some(host) => self.remote_selection(choice, host).await?,
            None => self.selection_for(choice, space).await?,
        };
        Ok(self.runtimes.get_runtime(&selection, space).await?)
    }

    /// The process-owning runtimes alive now (diagnostics).
    pub fn runtime_statuses(&self) -> Vec<RegisteredRuntimeStatus> {
        self.runtimes.runtimes()
    }

    /// Mark a project opened and pre-warm its instance in the runtime (in the background).
    pub async fn open_project(self: &Arc<Self>, project_id: &str) -> AppResult<()> {
        let id = project_id.to_string();
        let project = blocking(&self.store, move |s| {
            s.touch_project_opened(&id)?;
            s.get_project(&id)
        })
        .await?;
        let space = space_of(&project)?;
        let choice = project.runtime.clone();
        let project_tag = crate::host::logging::log_tag(&project.id);
        // The project's first record reads every file once; later ones only what changed. A
        // folder on another host has no record here.
        if space.is_local() {
            let (me, record_space) = (self.clone(), space.clone());
            tokio::spawn(async move { me.checkpoint(&project.id, &record_space).await });
        }
        let me = self.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let warmed = match me.runtime_for(&choice, &space).await {
                Ok(facade) => facade.warm(&space).await.map_err(AppError::from),
                Err(e) => Err(e),
            };
            match warmed {
                // The render benchmark waits for this line to tell the list's own cost from the
                // runtime's start, which shares the machine with the window.
                Ok(()) => tracing::info!(project = %project_tag, after_ms = started.elapsed().as_millis() as u64, "{PREWARMED_LOG}"),
                Err(e) => tracing::warn!(error = %e, "pre-warming the project failed"),
            }
        });
        Ok(())
    }

    /// Stop every turn and runtime: the app is closing. Leaves no process behind.
    pub async fn shutdown(&self) {
        for turn in self.turns.lock().unwrap().values() {
            turn.cancel.cancel();
        }
        // A self-test in flight is cancelled and given a moment to remove its sandbox and stop
        // what it started (its runtime also dies with Hearth through the parent-death signal).
        if self.cancel_selftest() {
            let deadline = tokio::time::Instant::now() + SHUTDOWN_SELFTEST_WAIT;
            while self.selftest_running() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        let _ = self.store.flush_pending();
        self.runtimes.dispose().await;
        // Each host's keeper stops its runtime when its link closes.
        self.remote.shutdown().await;
        self.tools.hooks.gateway().dispose().await;
        if let Some(model) = self.builtin.started() {
            model.shutdown().await;
        }
    }

    pub(crate) fn attachments_dir(&self) -> PathBuf {
        self.paths.data_dir.join("attachments")
    }
}
