//! The workspace facade: the `AgentRuntime` a project's conversations use. It is bound to one
//! execution space and leases the shared process-owning runtime from the registry; it never owns
//! the process, so dropping or disposing it only gives its lease back.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use tokio_util::sync::CancellationToken;

use super::contract::{
    AgentRuntime, CompactOutcome, CompactRequest, ConnectionInfo, EventStream, PermissionReply, PlanStep, RunRequest,
    RuntimeError, RuntimeEvent, RuntimeStatus,
};
use super::process::{ProcessRuntime, RuntimeSlot};
use super::registry::{ActivityGuard, Inner};
use crate::space::ExecutionSpace;

pub struct WorkspaceRuntime {
    registry: Arc<Inner>,
    slot: RuntimeSlot,
    space: ExecutionSpace,
    /// `None` once disposed. The owner changes only when a configuration change retires it.
    binding: Mutex<Option<Binding>>,
    /// Runs and compactions in flight through this facade (the manager never evicts a busy one).
    active_runs: Arc<AtomicUsize>,
}

struct Binding {
    owner_id: usize,
    runtime: Arc<dyn ProcessRuntime>,
}

impl WorkspaceRuntime {
    pub(crate) fn new(
        registry: Arc<Inner>,
        slot: RuntimeSlot,
        space: ExecutionSpace,
        owner_id: usize,
        runtime: Arc<dyn ProcessRuntime>,
    ) -> Self {
        Self {
            registry,
            slot,
            space,
            binding: Mutex::new(Some(Binding { owner_id, runtime })),
            active_runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn space(&self) -> &ExecutionSpace {
        &self.space
    }

    /// The process-owning runtime this facade drives (registry-unique while it lives): facades of
    /// one configuration report the same id. `None` after `dispose`.
    pub fn owner_id(&self) -> Option<usize> {
        self.lock().as_ref().map(|b| b.owner_id)
    }

    /// The process-owning runtime this facade drives now; `None` after `dispose`.
    pub fn process(&self) -> Option<Arc<dyn ProcessRuntime>> {
        self.lock().as_ref().map(|b| b.runtime.clone())
    }

    /// Runs and compactions in flight through this facade.
    pub fn active_runs(&self) -> usize {
        self.active_runs.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Binding>> {
        self.binding.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The runtime to call now; moves this facade to the family's current configuration if its
    /// runtime was retired, so new work never goes to a retiring process.
    fn runtime(&self) -> Result<(usize, Arc<dyn ProcessRuntime>), RuntimeError> {
        let mut binding = self.lock();
        let b = binding.as_mut().ok_or(RuntimeError::Disposed)?;
        let (id, runtime) = self.registry.rebind(&self.slot, b.owner_id)?;
        if id != b.owner_id {
            *b = Binding {
                owner_id: id,
                runtime: runtime.clone(),
            };
        }
        Ok((id, runtime))
    }

    fn check_space(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        if space.cache_identity == self.space.cache_identity {
            return Ok(());
        }
        Err(RuntimeError::WrongSpace { requested: space.root.clone(), bound: self.space.root.clone() })
    }

    fn begin(&self, space: &ExecutionSpace) -> Result<(Arc<dyn ProcessRuntime>, ActivityGuard), RuntimeError> {
        self.check_space(space)?;
        let (id, runtime) = self.runtime()?;
        let guard = self.registry.begin_activity(id, space, &self.active_runs)?;
        Ok((runtime, guard))
    }
}

#[async_trait::async_trait]
impl AgentRuntime for WorkspaceRuntime {
    fn run(&self, request: RunRequest, cancel: CancellationToken) -> EventStream {
        match self.begin(&request.space) {
            Ok((runtime, guard)) => {
                let inner = runtime.run(request, cancel);
                Box::pin(GuardedStream {
                    inner,
                    guard: Some(guard),
                })
            }
            Err(e) => Box::pin(futures::stream::once(async move { RuntimeEvent::ended(e.turn_end()) })),
        }
    }

    async fn compact_conversation(
        &self,
        request: CompactRequest,
        cancel: CancellationToken,
    ) -> Result<CompactOutcome, RuntimeError> {
        // A compaction is a model turn: it counts as a run so its instance is not freed under it.
        let (runtime, _guard) = self.begin(&request.space)?;
        runtime.compact_conversation(request, cancel).await
    }

    async fn reply_permission(
        &self,
        space: &ExecutionSpace,
        permission_id: &str,
        reply: PermissionReply,
    ) -> Result<(), RuntimeError> {
        self.check_space(space)?;
        let (id, runtime) = self.runtime()?;
        self.registry.touch(id, space);
        runtime.reply_permission(space, permission_id, reply).await
    }

    async fn warm(&self, space: &ExecutionSpace) -> Result<(), RuntimeError> {
        self.check_space(space)?;
        let (id, runtime) = self.runtime()?;
        self.registry.touch(id, space);
        runtime.warm(space).await
    }

    async fn test_connection(&self) -> Result<ConnectionInfo, RuntimeError> {
        let (_, runtime) = self.runtime()?;
        runtime.test_connection().await
    }

    async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        let (_, runtime) = self.runtime()?;
        runtime.release_conversation(conversation_id).await
    }

    async fn rewind_history(&self, space: &ExecutionSpace, native_session: &str, native_message_id: &str) -> Result<(), RuntimeError> {
        let (runtime, _guard) = self.begin(space)?;
        runtime.rewind_history(space, native_session, native_message_id).await
    }

    async fn restore_history(&self, space: &ExecutionSpace, native_session: &str) -> Result<(), RuntimeError> {
        let (runtime, _guard) = self.begin(space)?;
        runtime.restore_history(space, native_session).await
    }

    async fn fork_session(&self, space: &ExecutionSpace, native_session: &str, before: Option<&str>) -> Result<String, RuntimeError> {
        let (runtime, _guard) = self.begin(space)?;
        runtime.fork_session(space, native_session, before).await
    }

    async fn plan(&self, space: &ExecutionSpace, native_session: &str) -> Result<Vec<PlanStep>, RuntimeError> {
        let (runtime, _guard) = self.begin(space)?;
        runtime.plan(space, native_session).await
    }

    fn status(&self) -> RuntimeStatus {
        match self.lock().as_ref() {
            Some(b) => b.runtime.status(),
            None => RuntimeStatus::default(),
        }
    }

    /// Gives back this facade's lease; the shared runtime and runs in flight carry on.
    async fn dispose(&self) {
        let binding = self.lock().take();
        if let Some(b) = binding {
            self.registry.release_lease(b.owner_id);
        }
    }
}

impl Drop for WorkspaceRuntime {
    fn drop(&mut self) {
        let binding = self.binding.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(b) = binding {
            self.registry.release_lease(b.owner_id);
        }
    }
}

/// A run's events with its activity guard: the guard goes when the run's terminal event is seen,
/// the stream ends, or the caller drops the stream early, whichever comes first.
struct GuardedStream {
    inner: EventStream,
    guard: Option<ActivityGuard>,
}

impl Stream for GuardedStream {
    type Item = RuntimeEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RuntimeEvent>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(None) => self.guard = None,
            Poll::Ready(Some(event)) if event.is_terminal() => self.guard = None,
            _ => {}
        }
        polled
    }
}
