//! The contract's face of one ACP agent: the process (started on first use, noticed dead at once,
//! started again on the next use), its connection, its conversations' sessions, and the permission
//! requests waiting for the user.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connection::{AgentInfo, ConnectError, Connection, PendingPermission};
use super::process::{self, AgentProcess, SpawnError};
use super::sessions::Sessions;
use super::spec::{AcpSpec, SetupError};
use crate::runtime::*;
use crate::space::ExecutionSpace;

/// Why the agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum AcpStartError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("The agent exited at start ({status}). Its last output: {tail}")]
    Exited { status: String, tail: String },
    #[error("The agent does not speak the Agent Client Protocol as Hearth needs: {source}. Its last output: {tail}")]
    Protocol { source: ConnectError, tail: String },
}

impl From<AcpStartError> for RuntimeError {
    fn from(e: AcpStartError) -> Self {
        RuntimeError::Start(Cause::new(e))
    }
}

/// The running agent and the protocol with it.
pub(super) struct Live {
    pub process: AgentProcess,
    pub connection: Connection,
}

/// What the status shows of the running agent.
#[derive(Debug, Clone)]
struct LiveInfo {
    pid: u32,
    info: AgentInfo,
    started: Instant,
}

/// What every part of one ACP runtime shares.
pub(super) struct Shared {
    pub spec: AcpSpec,
    root: PathBuf,
    pub host: RuntimeHost,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    info: Mutex<Option<LiveInfo>>,
    /// What the agent said of itself the last time it started (kept after it stops).
    last_info: Mutex<Option<AgentInfo>>,
    launches: AtomicU32,
    last_exit: Mutex<Option<String>>,
    disposed: AtomicBool,
    pub sessions: Sessions,
    pub active_runs: AtomicU32,
    /// Permission requests shown to the user, by the id Hearth gave them.
    permissions: Mutex<HashMap<String, PendingPermission>>,
    next_permission: AtomicU64,
}

impl Shared {
    pub fn hooks(&self) -> Option<&dyn RunHooks> {
        self.host.hooks.as_deref()
    }

    /// The live agent, starting it if there is none or the last one died.
    pub async fn ensure_live(&self) -> Result<Arc<Live>, RuntimeError> {
        if self.disposed.load(Ordering::SeqCst) {
            return Err(RuntimeError::Disposed);
        }
        let mut guard = self.live.lock().await;
        if let Some(live) = guard.as_ref() {
            match live.process.exited() {
                None => return Ok(live.clone()),
                Some(status) => {
                    tracing::warn!(pid = live.process.pid, %status, tail = %live.process.tail.text(), "agent process died; starting it again");
                    *self.last_exit.lock().unwrap_or_else(|p| p.into_inner()) = Some(status);
                    *self.info.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    *guard = None;
                    self.sessions.forget_all(self.hooks());
                }
            }
        }
        let live = Arc::new(self.start().await?);
        if self.disposed.load(Ordering::SeqCst) {
            live.connection.close();
            live.process.stop().await;
            return Err(RuntimeError::Disposed);
        }
        let info = LiveInfo { pid: live.process.pid, info: live.connection.info.clone(), started: live.process.started };
        *self.last_info.lock().unwrap_or_else(|p| p.into_inner()) = Some(info.info.clone());
        *self.info.lock().unwrap_or_else(|p| p.into_inner()) = Some(info);
        *guard = Some(live.clone());
        Ok(live)
    }

    async fn start(&self) -> Result<Live, AcpStartError> {
        let mut launch = self.spec.setup.prepare(&self.root)?;
        if let Some(project) = &self.spec.project {
            launch.current_dir = project.clone();
        }
        self.launches.fetch_add(1, Ordering::SeqCst);
        let (process, pipes) = process::spawn(&launch, self.host.records_dir.clone()).await?;
        let opened = tokio::select! {
            c = Connection::open(pipes, process.tail.clone(), self.spec.bounds.initialize) => Ok(c),
            status = process.wait_exit() => Err(status),
        };
        match opened {
            Ok(Ok(connection)) => Ok(Live { process, connection }),
            Ok(Err(source)) => {
                process.stop().await;
                Err(AcpStartError::Protocol { source, tail: process.tail.text() })
            }
            Err(status) => {
                process.stop().await;
                Err(AcpStartError::Exited { status, tail: process.tail.text() })
            }
        }
    }

    /// Keep a permission request for the user's answer; the id the window answers it by.
    pub fn hold_permission(&self, pending: PendingPermission) -> String {
        let id = format!("acp-permission-{}", self.next_permission.fetch_add(1, Ordering::SeqCst));
        self.permissions.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), pending);
        id
    }

    /// A held request nobody answered before its run ended: dropping it cancels it in the agent.
    pub fn drop_permission(&self, id: &str) {
        self.permissions.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    fn take_permission(&self, id: &str) -> Option<PendingPermission> {
        self.permissions.lock().unwrap_or_else(|p| p.into_inner()).remove(id)
    }

    async fn current(&self) -> Option<Arc<Live>> {
        self.live.lock().await.clone()
    }
}

/// One ACP agent's runtime. Cheap to clone: clones share one process.
#[derive(Clone)]
pub struct AcpRuntime(Arc<Shared>);

impl std::fmt::Debug for AcpRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpRuntime").field("agent", &self.0.spec.agent_id).finish_non_exhaustive()
    }
}

impl AcpRuntime {
    /// `root` is the agent's private folder. Nothing starts until the first call that needs it.
    pub fn new(spec: AcpSpec, root: PathBuf, host: RuntimeHost) -> Self {
        Self(Arc::new(Shared {
            spec,
            root,
            host,
            live: tokio::sync::Mutex::new(None),
            info: Mutex::new(None),
            last_info: Mutex::new(None),
            launches: AtomicU32::new(0),
            last_exit: Mutex::new(None),
            disposed: AtomicBool::new(false),
            sessions: Sessions::default(),
            active_runs: AtomicU32::new(0),
            permissions: Mutex::new(HashMap::new()),
            next_permission: AtomicU64::new(1),
        }))
    }

    pub fn spec(&self) -> &AcpSpec {
        &self.0.spec
    }

    /// What the agent said of itself when it last started.
    pub fn agent_info(&self) -> Option<AgentInfo> {
        self.0.last_info.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The native session serving a conversation, if it has one in the running agent.
    pub fn native_session(&self, conversation_id: &str) -> Option<String> {
        self.0.sessions.native(conversation_id).map(|s| s.id)
    }

}

impl AcpRuntime {
    fn unsupported(&self, what: &'static str) -> RuntimeError {
        RuntimeError::Unsupported { runtime: self.0.spec.name.clone(), what }
    }
}

#[async_trait::async_trait]
impl AgentRuntime for AcpRuntime {
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let child = cancel.child_token();
        tokio::spawn(super::run::run(self.0.clone(), request, child.clone(), tx));
        crate::runtime::event_stream(rx, child.drop_guard())
    }

    async fn compact_conversation(&self, _request: CompactRequest, _cancel: CancellationToken) -> Result<CompactOutcome, RuntimeError> {
        Err(self.unsupported("compact a conversation on request"))
    }

    async fn reply_permission(&self, _space: &ExecutionSpace, permission_id: &str, reply: PermissionReply) -> Result<(), RuntimeError> {
        let pending = self.0.take_permission(permission_id).ok_or(RuntimeError::Refused(Cause::new(std::io::Error::other("this permission request is no longer waiting"))))?;
        let option = super::run::option_for(&pending.request, reply);
        pending.answer(option);
        Ok(())
    }

    async fn warm(&self, _space: &ExecutionSpace) -> Result<(), RuntimeError> {
        self.0.ensure_live().await.map(|_| ())
    }

    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError> {
        let live = self.0.ensure_live().await?;
        Ok(ConnectionInfo { version: live.connection.info.version.clone(), healthy: live.process.exited().is_none() })
    }

    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        self.0.sessions.release(conversation_id, self.0.hooks());
        Ok(())
    }

    async fn rewind_history(&self, _space: &ExecutionSpace, _native_session: &str, _native_message_id: &str) -> Result<(), RuntimeError> {
        Err(self.unsupported("forget turns of a conversation (the files were not touched)"))
    }

    async fn restore_history(&self, _space: &ExecutionSpace, _native_session: &str) -> Result<(), RuntimeError> {
        Err(self.unsupported("bring back forgotten turns"))
    }

    async fn fork_session(&self, _space: &ExecutionSpace, _native_session: &str, _before: Option<&str>) -> Result<String, RuntimeError> {
        Err(self.unsupported("fork a conversation"))
    }

    async fn plan(&self, _space: &ExecutionSpace, native_session: &str) -> Result<Vec<PlanStep>, RuntimeError> {
        Ok(self.0.sessions.plan(native_session))
    }

    fn status(&self) -> RuntimeStatus {
        let rt = &self.0;
        let info = if rt.disposed.load(Ordering::SeqCst) { None } else { rt.info.lock().unwrap_or_else(|p| p.into_inner()).clone() };
        RuntimeStatus {
            running: info.is_some(),
            pid: info.as_ref().map(|i| i.pid),
            url: None,
            version: info.as_ref().map(|i| i.info.version.clone()),
            launches: rt.launches.load(Ordering::SeqCst),
            recycles: 0,
            last_exit: rt.last_exit.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            active_runs: rt.active_runs.load(Ordering::SeqCst),
            open_instances: rt.sessions.open_folders(),
            uptime_ms: info.map(|i| i.started.elapsed().as_millis() as u64),
            host: None,
            host_memory: None,
        }
    }

    async fn dispose(&self) {
        self.0.disposed.store(true, Ordering::SeqCst);
        let live = self.0.live.lock().await.take();
        self.0.sessions.forget_all(self.0.hooks());
        self.0.permissions.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some(live) = live {
            live.connection.close();
            live.process.stop().await;
            tracing::info!(pid = live.process.pid, agent = %self.0.spec.agent_id, "agent stopped");
        }
        *self.0.info.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[async_trait::async_trait]
impl ProcessRuntime for AcpRuntime {
    async fn start(&self) -> Result<(), RuntimeError> {
        self.0.ensure_live().await.map(|_| ())
    }

    /// An ACP agent has no per-folder instance; what it holds per folder is its sessions there,
    /// which are closed (the next turn continues them with `session/load`).
    async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        if let Some(live) = self.0.current().await {
            self.0.sessions.close_folder(&live.connection, &self.0.spec, self.0.hooks(), &space.root).await;
        }
        Ok(())
    }

    /// An agent's memory is its sessions', which `dispose_instance` gives back: never replaced.
    async fn recycle(&self) -> Result<bool, RuntimeError> {
        Ok(false)
    }

    fn gateway_callers(&self) -> Vec<u32> {
        let Some(pid) = self.0.info.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|i| i.pid) else { return vec![] };
        let mut pids = vec![pid];
        if self.0.spec.callers == super::GatewayCallers::AgentChildren {
            pids.extend(crate::host::procinfo::children(pid));
        }
        // Hearth's stdio bridges the agent started for its sessions, wherever in its tree (each
        // credential is held by the first process that presents it, so a look-alike started by
        // the agent's shell with a credential it read gets nothing).
        if let Some(bridge) = &self.0.spec.bridge {
            let tree = crate::host::procinfo::descendants(pid).unwrap_or_default();
            pids.extend(tree.into_iter().filter(|p| crate::host::procinfo::runs_command(*p, bridge)));
        }
        pids
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
