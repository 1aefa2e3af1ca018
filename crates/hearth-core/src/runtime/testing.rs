//! A fake process-owning runtime for tests of its callers (registry, manager). It records every
//! call, streams `Session`/`TextDelta`/`Done`, and can hold a run open until the test releases it.
//! The real OpenCode runtime is tested against the real binary elsewhere.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::contract::*;
use super::facade::WorkspaceRuntime;
use super::process::{ProcessRuntime, RuntimeHost, RuntimeKey, RuntimeSlot, RuntimeSpec};
use super::registry::LocalRuntimeRegistry;
use crate::space::{ExecutionSpace, SpaceKind};

/// The family tests register fakes under.
pub const FAKE_FAMILY: &str = "fake";

#[derive(Debug, Default, Clone)]
pub struct Calls {
    /// (request id, space identity) of every run started.
    pub runs: Vec<(String, String)>,
    pub disposed: usize,
    pub disposed_instances: Vec<String>,
    pub released: Vec<String>,
    pub connection_tests: usize,
    pub compactions: Vec<String>,
    pub recycles: usize,
}

pub struct FakeRuntime {
    pub serial: usize,
    calls: Mutex<Calls>,
    holds: Mutex<HashMap<String, oneshot::Receiver<()>>>,
    /// What `memory_bytes` reports; a recycle sets it back to `fresh_memory`.
    memory: Mutex<Option<u64>>,
    /// What `peak_memory_bytes` reports: the most `memory` was since the last recycle.
    peak_memory: Mutex<Option<u64>>,
    fresh_memory: Mutex<Option<u64>>,
}

static SERIAL: AtomicUsize = AtomicUsize::new(0);

impl FakeRuntime {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            serial: SERIAL.fetch_add(1, Ordering::SeqCst),
            calls: Mutex::new(Calls::default()),
            holds: Mutex::new(HashMap::new()),
            memory: Mutex::new(None),
            peak_memory: Mutex::new(None),
            fresh_memory: Mutex::new(None),
        })
    }

    pub fn calls(&self) -> Calls {
        self.calls.lock().unwrap().clone()
    }

    /// Report `bytes` of memory until a recycle, then `fresh`.
    pub fn set_memory(&self, bytes: u64, fresh: u64) {
        *self.memory.lock().unwrap() = Some(bytes);
        let mut peak = self.peak_memory.lock().unwrap();
        *peak = Some(peak.map_or(bytes, |p| p.max(bytes)));
        *self.fresh_memory.lock().unwrap() = Some(fresh);
    }

    /// Hold the run with `request_id` before its `Done` until the returned sender is used or dropped.
    pub fn hold(&self, request_id: &str) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel();
        self.holds.lock().unwrap().insert(request_id.to_owned(), rx);
        tx
    }
}

#[async_trait::async_trait]
impl AgentRuntime for FakeRuntime {
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream {
        self.calls
            .lock()
            .unwrap()
            .runs
            .push((request.request_id.clone(), request.space.cache_identity.clone()));
        let held = self.holds.lock().unwrap().remove(&request.request_id);
        let session = format!("ses_{}_{}", self.serial, request.conversation_id);
        let text = format!("answer to {}", request.prompt);
        let first = futures::stream::iter([
            RuntimeEvent::Session {
                native_session_id: session.clone(),
                native_message_id: format!("msg_{}", request.request_id),
            },
            RuntimeEvent::TextDelta { text: text.clone() },
        ]);
        let last = futures::stream::once(async move {
            if let Some(rx) = held {
                tokio::select! {
                    _ = rx => {}
                    _ = cancel.cancelled() => return RuntimeEvent::ended(TurnEnd::Cancelled),
                }
            }
            RuntimeEvent::ended(TurnEnd::Done { native_session_id: session, text })
        });
        first.chain(last).boxed()
    }

    async fn compact_conversation(
        &self,
        request: CompactRequest,
        _cancel: CancellationToken,
    ) -> Result<CompactOutcome, RuntimeError> {
        self.calls
            .lock()
            .unwrap()
            .compactions
            .push(request.conversation_id.clone());
        Ok(CompactOutcome {
            compacted: true,
            native_session_id: format!("ses_{}_{}", self.serial, request.conversation_id),
        })
    }

    async fn reply_permission(&self, _: &ExecutionSpace, _: &str, _: PermissionReply) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn warm(&self, _: &ExecutionSpace) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError> {
        self.calls.lock().unwrap().connection_tests += 1;
        Ok(ConnectionInfo {
            version: "fake".into(),
            healthy: true,
        })
    }

    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        self.calls.lock().unwrap().released.push(conversation_id.to_owned());
        Ok(())
    }

    async fn rewind_history(&self, _: &ExecutionSpace, _: &str, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn restore_history(&self, _: &ExecutionSpace, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn fork_session(&self, _: &ExecutionSpace, native_session: &str, _: Option<&str>) -> Result<String, RuntimeError> {
        Ok(format!("{native_session}_fork"))
    }

    async fn plan(&self, _: &ExecutionSpace, _: &str) -> Result<Vec<PlanStep>, RuntimeError> {
        Ok(Vec::new())
    }

    fn status(&self) -> RuntimeStatus {
        RuntimeStatus { running: self.calls.lock().unwrap().disposed == 0, version: Some("fake".into()), launches: 1, ..RuntimeStatus::default() }
    }

    async fn dispose(&self) {
        self.calls.lock().unwrap().disposed += 1;
    }
}

#[async_trait::async_trait]
impl ProcessRuntime for FakeRuntime {
    async fn start(&self) -> Result<(), RuntimeError> {
        Ok(())
    }

    async fn dispose_instance(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        self.calls
            .lock()
            .unwrap()
            .disposed_instances
            .push(space.cache_identity.clone());
        Ok(())
    }

    async fn recycle(&self) -> Result<bool, RuntimeError> {
        self.calls.lock().unwrap().recycles += 1;
        let fresh = *self.fresh_memory.lock().unwrap();
        *self.memory.lock().unwrap() = fresh;
        *self.peak_memory.lock().unwrap() = fresh;
        Ok(true)
    }

    fn memory_bytes(&self) -> Option<u64> {
        *self.memory.lock().unwrap()
    }

    fn peak_memory_bytes(&self) -> Option<u64> {
        *self.peak_memory.lock().unwrap()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A spec that hands out one fake runtime, counting how often the manager asked for a runtime;
/// `fail_first` makes its first creation fail.
#[derive(Debug)]
pub struct FakeSpec {
    pub key: String,
    pub fake: Arc<FakeRuntime>,
    pub created: Arc<AtomicUsize>,
    pub fail_first: bool,
}

impl FakeSpec {
    pub fn new(key: &str, fake: &Arc<FakeRuntime>) -> Arc<Self> {
        Arc::new(Self { key: key.into(), fake: fake.clone(), created: Arc::default(), fail_first: false })
    }
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FakeRuntime({})", self.serial)
    }
}

impl RuntimeSpec for FakeSpec {
    fn family(&self) -> &'static str {
        FAKE_FAMILY
    }

    fn key(&self) -> RuntimeKey {
        RuntimeKey::new(&self.key)
    }

    fn create(&self, _: &RuntimeHost) -> Result<Arc<dyn ProcessRuntime>, RuntimeError> {
        if self.created.fetch_add(1, Ordering::SeqCst) == 0 && self.fail_first {
            return Err(RuntimeError::Start(Cause::new(std::io::Error::other("the runtime binary is missing"))));
        }
        Ok(self.fake.clone())
    }
}

/// A space for tests; registry and manager only compare identities, so no folder is needed.
pub fn space(name: &str) -> ExecutionSpace {
    let root = PathBuf::from(format!("/projects/{name}"));
    ExecutionSpace {
        kind: SpaceKind::Local,
        cache_identity: format!("local:{}", root.display()),
        root,
    }
}

pub fn request(request_id: &str, space: &ExecutionSpace) -> RunRequest {
    RunRequest {
        request_id: request_id.into(),
        conversation_id: format!("conv-{request_id}"),
        prompt: format!("prompt {request_id}"),
        work_mode: WorkMode::Execute,
        outside_project: OutsideProject::Deny,
        images: Vec::new(),
        profile_id: None,
        space: space.clone(),
        native_session: None,
    }
}

/// Acquire `key` for `space`, creating `fake` if the registry needs a new runtime.
pub async fn acquire(
    registry: &LocalRuntimeRegistry,
    key: &str,
    space: &ExecutionSpace,
    fake: &Arc<FakeRuntime>,
) -> WorkspaceRuntime {
    let fake = fake.clone();
    registry
        .acquire(
            RuntimeSlot::of(FAKE_FAMILY),
            RuntimeKey::new(key),
            space.clone(),
            move || Ok(fake as Arc<dyn ProcessRuntime>),
        )
        .await
        .unwrap()
}

/// Let spawned tasks (closes, instance disposals) run without moving the paused clock.
pub async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Run to the end and return the events.
pub async fn collect(runtime: &dyn AgentRuntime, request: RunRequest) -> Vec<RuntimeEvent> {
    runtime.run(request, CancellationToken::new()).collect().await
}
