//! The app: one object that owns the store, the runtime registry and manager, the built-in model and
//! the running turns, with one method per thing a user does. The Tauri commands and the CLI are thin
//! adapters over it; nothing here knows about windows.

mod attachments;
mod catalog;
mod profiles;
pub mod tools;
mod conversations;
pub mod diagnostics;
pub mod runtime_config;
pub mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

pub use attachments::StagedAttachment;
pub use conversations::DEFAULT_CONVERSATION_TITLE;
pub use profiles::{generation_check, ProfileSave, ProfileTestOutcome};
pub use updates::{UpdateSink, ConversationUpdate, ConversationUpdateKind, NoUpdates};
use runtime_config::{BinaryInputs, Binaries, BuiltinModel, SetupError};

use crate::images::PreparedImage;
use crate::opencode::runtime::{OpenCodeRuntime, RuntimeOptions, SharedOpenCode};
use crate::host::paths::AppPaths;
use crate::runtime::*;
use crate::space::{self, ExecutionSpace};
use crate::store::{Store, StoreError};
use crate::toolbox::gateway::AllowedCallers;

/// How long closing the app waits for a cancelled self-test to clean up.
pub const SHUTDOWN_SELFTEST_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Facades kept warm by the manager (projects switched between without re-acquiring).
pub const FACADE_CAPACITY: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Space(#[from] space::SpaceError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
    #[error("A reply is still running in this conversation; wait for it or stop it first.")]
    Busy,
    #[error("Nothing is running in this conversation.")]
    NotRunning,
    #[error("That attachment is no longer prepared; attach the image again.")]
    UnknownAttachment,
    #[error("The model profile “{0}” does not accept images; choose a profile with image input or remove the images.")]
    NoImageInput(String),
    #[error("Hearth could not save the attachment: {0}")]
    AttachmentIo(String),
    #[error("Hearth stopped a task unexpectedly: {0}")]
    Task(String),
    #[error(transparent)]
    Grant(#[from] crate::toolbox::gateway::GrantError),
    #[error("{0}")]
    Tools(String),
}

pub type AppResult<T> = Result<T, AppError>;

/// Everything injected into the app.
pub struct HearthOptions {
    pub paths: AppPaths,
    pub binaries: BinaryInputs,
    pub registry: RegistryConfig,
    pub runtime: RuntimeOptions,
}

/// A turn running in one conversation: what stops it.
struct RunningTurn {
    cancel: CancellationToken,
}

pub struct Hearth {
    paths: AppPaths,
    store: Store,
    updates: Arc<dyn UpdateSink>,
    binary_inputs: BinaryInputs,
    binaries: tokio::sync::Mutex<Option<Binaries>>,
    builtin: BuiltinModel,
    registry: Arc<LocalRuntimeRegistry>,
    manager: SelectedRuntimeManager,
    configs: Arc<Mutex<HashMap<RuntimeKey, crate::opencode::config::RuntimeConfig>>>,
    owners: Arc<Mutex<HashMap<RuntimeKey, Arc<OpenCodeRuntime>>>>,
    turns: Mutex<HashMap<String, RunningTurn>>,
    staged: Mutex<HashMap<String, PreparedImage>>,
    tools: tools::Tools,
    selftest: diagnostics::SelftestSlot,
}

/// Run a store call off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(store: &Store, f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static) -> AppResult<T> {
    let s = store.clone();
    tokio::task::spawn_blocking(move || f(&s)).await.map_err(|e| AppError::Task(e.to_string()))?.map_err(AppError::from)
}

impl Hearth {
    /// Open the store (recovering turns a crash interrupted) and sweep runtimes an earlier Hearth
    /// left behind. The runtime itself starts on first use.
    pub async fn open(options: HearthOptions, updates: Arc<dyn UpdateSink>) -> AppResult<Arc<Self>> {
        let data = options.paths.data_dir.clone();
        let store = tokio::task::spawn_blocking(move || Store::open_in_data_dir(&data))
            .await
            .map_err(|e| AppError::Task(e.to_string()))??;
        let recovered = blocking(&store, |s| s.recover_interrupted()).await?;
        if recovered > 0 {
            tracing::warn!(recovered, "marked replies interrupted by an earlier exit");
        }
        let records = options.paths.data_dir.join("runtime").join("records");
        let swept = crate::host::records::sweep(&records).await;
        if !swept.stopped.is_empty() {
            tracing::warn!(stopped = ?swept.stopped, "stopped runtimes left behind by an earlier Hearth");
        }
        let owners: Arc<Mutex<HashMap<RuntimeKey, Arc<OpenCodeRuntime>>>> = Arc::default();
        // The gateway serves the processes of the runtimes Hearth runs, and nothing else.
        let callers = {
            let owners = owners.clone();
            AllowedCallers::pids(move || owners.lock().unwrap().values().filter_map(|rt| SharedOpenCode(rt.clone()).status().pid).collect())
        };
        let tools = tools::Tools::start(&options.paths.data_dir, callers).await?;
        let registry = Arc::new(LocalRuntimeRegistry::with_config(options.registry));
        let configs: Arc<Mutex<HashMap<RuntimeKey, _>>> = Arc::default();
        let mut runtime_options = options.runtime;
        runtime_options.records_dir.get_or_insert(records);
        runtime_options.hooks = Some(tools.hooks.clone() as Arc<dyn RunHooks>);
        let manager = {
            let (registry, configs, owners) = (registry.clone(), configs.clone(), owners.clone());
            let release_registry = registry.clone();
            let root = options.paths.data_dir.join("runtime").join("opencode");
            SelectedRuntimeManager::new(
                FACADE_CAPACITY,
                move |selection: RuntimeSelection, space: ExecutionSpace| {
                    let (registry, configs, owners, root, opts) = (registry.clone(), configs.clone(), owners.clone(), root.clone(), runtime_options.clone());
                    async move {
                        let key = selection.key.clone();
                        let config = configs.lock().unwrap().get(&key).cloned().ok_or(RuntimeError::Launch("The runtime configuration changed; try again.".into()))?;
                        registry
                            .acquire(OPENCODE_FAMILY, selection.key, space, move || {
                                let rt = OpenCodeRuntime::with_options(config, root, opts);
                                owners.lock().unwrap().insert(key, rt.clone());
                                Ok(Arc::new(SharedOpenCode(rt)) as Arc<dyn ProcessRuntime>)
                            })
                            .await
                    }
                },
                move |id: String| {
                    let registry = release_registry.clone();
                    async move { registry.release_conversation(&id).await }
                },
            )
        };
        let hearth = Arc::new(Self {
            paths: options.paths,
            store,
            updates,
            binary_inputs: options.binaries,
            binaries: tokio::sync::Mutex::new(None),
            builtin: BuiltinModel::default(),
            registry,
            manager,
            configs,
            owners,
            turns: Mutex::new(HashMap::new()),
            staged: Mutex::new(HashMap::new()),
            tools,
            selftest: Default::default(),
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
        let found = runtime_config::locate_binaries(&self.binary_inputs).await?;
        *guard = Some(found.clone());
        Ok(found)
    }

    /// Look for the binaries again on next use (after the user fixed an install).
    pub async fn forget_binaries(&self) {
        *self.binaries.lock().await = None;
    }

    /// The facade for `space` under the current configuration, and the process owner behind it.
    pub(crate) async fn runtime_for(&self, space: &ExecutionSpace) -> AppResult<(Arc<WorkspaceRuntime>, Arc<OpenCodeRuntime>)> {
        let binaries = self.binaries().await?;
        let mut config = runtime_config::runtime_config(&self.store, &binaries, &self.builtin).await?;
        self.tools.configure(&mut config);
        let key = config.key();
        self.configs.lock().unwrap().insert(key.clone(), config);
        let selection = RuntimeSelection { provider: OPENCODE_FAMILY.into(), key: key.clone() };
        let facade = self.manager.get_runtime(&selection, space).await?;
        let owner = self.owners.lock().unwrap().get(&key).cloned().ok_or(RuntimeError::Disposed)?;
        Ok((facade, owner))
    }

    /// The process-owning runtimes alive now (diagnostics).
    pub fn runtime_statuses(&self) -> Vec<RegisteredRuntimeStatus> {
        self.registry.status()
    }

    /// Mark a project opened and pre-warm its instance in the runtime (in the background).
    pub async fn open_project(self: &Arc<Self>, project_id: &str) -> AppResult<()> {
        let id = project_id.to_string();
        let project = blocking(&self.store, move |s| {
            s.touch_project_opened(&id)?;
            s.get_project(&id)
        })
        .await?;
        let space = space::resolve_local(&project.path)?;
        let me = self.clone();
        tokio::spawn(async move {
            match me.runtime_for(&space).await {
                Ok((_, owner)) => {
                    if let Err(e) = owner.warm(&space).await {
                        tracing::warn!(error = %e, "pre-warming the project failed");
                    }
                }
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
        self.manager.dispose().await;
        self.registry.dispose().await;
        self.tools.hooks.gateway().dispose().await;
        if let Some(model) = self.builtin.started() {
            model.shutdown().await;
        }
    }

    pub(crate) fn attachments_dir(&self) -> PathBuf {
        self.paths.data_dir.join("attachments")
    }
}
