//! The OpenCode runtime: one `opencode serve` for every project, each conversation on a native
//! session of its own. This file is the contract's face; the parts behind it are `server.rs` (the
//! process), `sessions.rs` (conversation → session, and the locks), `prompt.rs` (what a prompt
//! sends), `run.rs` (a run to its end, with `turn.rs` reading its events) and `compaction.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{ApiError, Client};
use super::config::RuntimeConfig;
use super::event_hub::Subscription;
use super::server::{Place, ServerInfo as ServerInfoView, ServerSlot};
use super::sessions::Sessions;
use super::turn::MAX_PROVIDER_RETRIES;
use super::{compaction, run, wire};
use crate::runtime::*;
use crate::space::ExecutionSpace;

/// The family name the registry and the manager know this runtime by.
pub const FAMILY: &str = "opencode";

impl From<ApiError> for RuntimeError {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Transport(_) => RuntimeError::Unreachable(Cause::new(e)),
            ApiError::Status { .. } | ApiError::Decode { .. } => RuntimeError::Refused(Cause::new(e)),
        }
    }
}

/// A client of the live process that keeps that process from being recycled while any clone of it
/// lives: the recycle replaces only a process nobody holds (see `ServerSlot::recycle`). A process
/// that dies is still started again; calls through an old client then fail as unreachable.
#[derive(Clone)]
pub struct HeldClient(Arc<super::server::Live>);

impl std::ops::Deref for HeldClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0.client
    }
}

/// What every part of one runtime shares.
pub(super) struct Shared {
    pub server: ServerSlot,
    pub sessions: Sessions,
    pub active_runs: Arc<AtomicU32>,
    pub max_retries: u32,
    /// Counter in the ids Hearth gives user messages (the runtime's own ids carry one too).
    message_counter: AtomicU16,
}

impl Shared {
    pub fn next_message_id(&self) -> String {
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        wire::new_message_id(now_ms, self.message_counter.fetch_add(1, Ordering::Relaxed))
    }
}

/// The process-owning OpenCode runtime. Cheap to clone: clones share one process.
#[derive(Clone)]
pub struct OpenCodeRuntime(Arc<Shared>);

impl std::fmt::Debug for OpenCodeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCodeRuntime").field("binary", &self.0.server.config().binary).finish_non_exhaustive()
    }
}

impl OpenCodeRuntime {
    /// `root` is the runtime's private folder (its HOME, database and config live there). Nothing
    /// starts until the first call that needs the process.
    pub fn new(config: RuntimeConfig, root: PathBuf, host: RuntimeHost) -> Self {
        Self::placed(config, root, host, Place::Local)
    }

    /// A runtime that runs where `place` says (on a host: see `remote/`).
    pub fn placed(config: RuntimeConfig, root: PathBuf, host: RuntimeHost, place: Place) -> Self {
        Self(Arc::new(Shared {
            server: ServerSlot::new(Arc::new(config), root, host, place),
            sessions: Sessions::default(),
            active_runs: Arc::new(AtomicU32::new(0)),
            max_retries: MAX_PROVIDER_RETRIES,
            message_counter: AtomicU16::new(0),
        }))
    }

    pub fn config(&self) -> &RuntimeConfig {
        self.0.server.config()
    }

    pub fn launches(&self) -> u32 {
        self.0.server.launches()
    }

    /// The native session serving a conversation, if it has one.
    pub fn native_session(&self, conversation_id: &str) -> Option<String> {
        self.0.sessions.native(conversation_id).map(|s| s.id)
    }

    async fn live(&self) -> Result<Arc<super::server::Live>, RuntimeError> {
        self.0.server.ensure_live(|| self.0.sessions.all_instances_closed()).await
    }

    /// An HTTP client for the running server (starting it if needed), for diagnostics and
    /// benchmarks that talk to the runtime directly. It holds the process while it lives, so a
    /// recycle never replaces the process under a caller's reads. Its Debug output hides the password.
    pub async fn client(&self) -> Result<HeldClient, RuntimeError> {
        Ok(HeldClient(self.live().await?))
    }

    /// Subscribe to one native session's events from the runtime's one event stream (starting it if
    /// needed). Diagnostics time event delivery with the `received` instants.
    pub async fn subscribe_session(&self, session_id: &str) -> Result<Subscription, RuntimeError> {
        Ok(self.live().await?.hub.subscribe(session_id))
    }

    /// The event stream's reconnects so far (0 when no process runs).
    pub async fn event_stream_reconnects(&self) -> u64 {
        self.0.server.current().await.map_or(0, |live| live.hub.reconnects())
    }
}

#[async_trait::async_trait]
impl AgentRuntime for OpenCodeRuntime {
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let child = cancel.child_token();
        tokio::spawn(run::run(self.0.clone(), request, child.clone(), tx));
        event_stream(rx, child.drop_guard())
    }

    async fn compact_conversation(&self, request: CompactRequest, cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError> {
        compaction::compact(&self.0, request, cancel).await
    }

    async fn reply_permission(&self, space: &ExecutionSpace, permission_id: &str, reply: PermissionReply) -> Result<(), RuntimeError> {
        let live = self.live().await?;
        Ok(live.client.reply_permission(space.root_str(), permission_id, reply).await?)
    }

    async fn warm(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        let live = self.live().await?;
        let profile = self.config().resolve_profile(None).ok();
        let provider = profile.map(|p| p.provider_id());
        let model = profile.zip(provider.as_deref()).map(|(p, provider)| (provider, p.model.as_str()));
        live.client.warm(space.root_str(), model).await?;
        self.0.sessions.instance_opened(space.root_str());
        Ok(())
    }

    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError> {
        let live = self.live().await?;
        let health = live.client.health().await.map_err(|e| RuntimeError::Unreachable(Cause::new(e)))?;
        Ok(ConnectionInfo { version: health.version, healthy: health.healthy })
    }

    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        self.0.sessions.release(conversation_id);
        Ok(())
    }

    async fn rewind_history(&self, space: &ExecutionSpace, native_session: &str, native_message_id: &str) -> Result<(), RuntimeError> {
        let live = self.live().await?;
        Ok(live.client.revert(space.root_str(), native_session, native_message_id).await?)
    }

    async fn restore_history(&self, space: &ExecutionSpace, native_session: &str) -> Result<(), RuntimeError> {
        let live = self.live().await?;
        Ok(live.client.unrevert(space.root_str(), native_session).await?)
    }

    async fn fork_session(&self, space: &ExecutionSpace, native_session: &str, before: Option<&str>) -> Result<String, RuntimeError> {
        let live = self.live().await?;
        Ok(live.client.fork(space.root_str(), native_session, before).await?)
    }

    async fn plan(&self, space: &ExecutionSpace, native_session: &str) -> Result<Vec<PlanStep>, RuntimeError> {
        let live = self.live().await?;
        let todos = live.client.todo(space.root_str(), native_session).await?;
        Ok(todos.into_iter().map(|t| PlanStep { status: plan_status(&t.status), content: t.content }).collect())
    }

    fn status(&self) -> RuntimeStatus {
        let rt = &self.0;
        let info = rt.server.info();
        RuntimeStatus {
            running: info.is_some(),
            pid: info.as_ref().map(|i| i.pid),
            url: info.as_ref().map(|i| i.url.clone()),
            version: info.as_ref().map(|i| i.version.clone()),
            launches: rt.server.launches(),
            recycles: rt.server.recycles(),
            last_exit: rt.server.last_exit(),
            active_runs: rt.active_runs.load(Ordering::SeqCst),
            open_instances: rt.sessions.open_instances(),
            uptime_ms: info.as_ref().map(|i| i.started.elapsed().as_millis() as u64),
            host: info.as_ref().and_then(|i| i.remote.as_ref()).map(|r| r.host.clone()),
            host_memory: info.as_ref().and_then(|i| i.remote.as_ref()).and_then(|r| *r.stats.lock().unwrap_or_else(|p| p.into_inner())).map(|(rss_bytes, processes)| HostMemory { rss_bytes, processes }),
        }
    }

    async fn dispose(&self) {
        self.0.server.dispose().await;
    }
}

#[async_trait::async_trait]
impl ProcessRuntime for OpenCodeRuntime {
    async fn start(&self) -> Result<(), RuntimeError> {
        self.client().await.map(|_| ())
    }

    /// Skipped while a run uses the directory: it will be idle again later.
    async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        let directory = space.root_str();
        let lock = self.0.sessions.directory_lock(directory);
        let Ok(_exclusive) = lock.try_write() else {
            tracing::debug!(directory, "instance busy; not disposed");
            return Ok(());
        };
        if let Some(live) = self.0.server.current().await {
            live.client.dispose_instance(directory).await?;
        }
        self.0.sessions.instance_closed(directory);
        Ok(())
    }

    /// A runtime on another host is not replaced: its memory is the host's, and its link costs a
    /// launch a few seconds more than here.
    async fn recycle(&self) -> Result<bool, RuntimeError> {
        if matches!(self.0.server.place(), Place::Remote(_)) {
            return Ok(false);
        }
        self.0.server.recycle(|| self.0.sessions.all_instances_closed()).await
    }

    /// On another host, what its keeper last reported of the runtime's group.
    fn memory_bytes(&self) -> Option<u64> {
        let info = self.0.server.info()?;
        match &info.remote {
            Some(remote) => remote.stats.lock().unwrap_or_else(|p| p.into_inner()).map(|(bytes, _)| bytes),
            None => crate::host::procinfo::tree_rss(info.pid).ok().map(|t| t.bytes),
        }
    }

    /// On another host, what its keeper last reported (it reports no peak, and is never replaced).
    fn peak_memory_bytes(&self) -> Option<u64> {
        let info = self.0.server.info()?;
        match &info.remote {
            Some(_) => self.memory_bytes(),
            None => crate::host::procinfo::tree_peak_rss(info.pid).ok(),
        }
    }

    /// On another host, the local ssh process that carries the runtime's connections.
    fn gateway_callers(&self) -> Vec<u32> {
        match self.0.server.info() {
            Some(ServerInfoView { remote: Some(remote), .. }) => vec![remote.link_pid],
            Some(info) => vec![info.pid],
            None => vec![],
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl RuntimeSpec for RuntimeConfig {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn key(&self) -> RuntimeKey {
        RuntimeConfig::key(self)
    }

    fn create(&self, host: &RuntimeHost) -> Result<Arc<dyn ProcessRuntime>, RuntimeError> {
        Ok(Arc::new(OpenCodeRuntime::new(self.clone(), host.root.join(FAMILY), host.clone())))
    }
}

fn plan_status(status: &str) -> PlanStatus {
    match status {
        "in_progress" => PlanStatus::InProgress,
        "completed" => PlanStatus::Completed,
        "cancelled" => PlanStatus::Cancelled,
        _ => PlanStatus::Pending,
    }
}

