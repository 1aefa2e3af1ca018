//! The local runtime registry: owns the process-owning runtimes, one per configuration, and hands out
//! workspace facades bound to one execution space each. Facades lease a runtime; the registry closes
//! a runtime nobody leases after an idle period, retires a runtime whose configuration was replaced
//! once its runs drain, frees the runtime's idle per-space instances (OpenCode never does), and
//! replaces an idle runtime's process when it holds too much memory (see `memory.rs`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::contract::{RuntimeError, RuntimeStatus};
use super::facade::WorkspaceRuntime;
use super::memory::{MemoryHistory, MemoryReport, RecyclePolicy};
use super::process::{ProcessRuntime, RuntimeKey, RuntimeSlot};
use crate::space::ExecutionSpace;

/// A runtime nobody leases and nobody runs on is closed after this long: long enough to survive
/// switching projects or settings pages, short enough not to keep ~300 MB for nothing.
pub const DEFAULT_IDLE_CLOSE_AFTER: Duration = Duration::from_secs(5 * 60);
/// A per-space instance without runs for this long is freed (~50 MB and its MCP children each).
pub const DEFAULT_INSTANCE_IDLE_AFTER: Duration = Duration::from_secs(10 * 60);
/// At most this many idle instances stay warm per runtime; the least recently used go first.
pub const DEFAULT_MAX_WARM_INSTANCES: usize = 6;
/// How often the sweeper looks for idle instances.
pub const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryConfig {
    pub idle_close_after: Duration,
    pub instance_idle_after: Duration,
    pub max_warm_instances: usize,
    pub sweep_every: Duration,
    pub recycle: RecyclePolicy,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            idle_close_after: DEFAULT_IDLE_CLOSE_AFTER,
            instance_idle_after: DEFAULT_INSTANCE_IDLE_AFTER,
            max_warm_instances: DEFAULT_MAX_WARM_INSTANCES,
            sweep_every: DEFAULT_SWEEP_EVERY,
            recycle: RecyclePolicy::default(),
        }
    }
}

/// One runtime as diagnostics see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredRuntimeStatus {
    pub owner_id: u32,
    pub family: String,
    /// Which runtime of the family (`opencode`, `acp:claude-code`, …).
    pub slot: String,
    pub key: RuntimeKey,
    /// Replaced by a newer configuration; closes when its runs drain.
    pub retired: bool,
    pub facades: u32,
    pub active_runs: u32,
    /// Cache identities of the spaces whose instances are warm, most recently used first.
    pub warm_instances: Vec<String>,
    pub runtime: RuntimeStatus,
}

/// Owns process-owning runtimes. Create it inside a tokio runtime (it spawns its sweeper there) and
/// share it behind an `Arc`; call [`LocalRuntimeRegistry::dispose`] on shutdown.
pub struct LocalRuntimeRegistry {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    config: RegistryConfig,
    /// Where timers and disposals run: facades may be dropped outside any runtime context.
    handle: Handle,
    stop: CancellationToken,
    sweeper: Mutex<Option<JoinHandle<()>>>,
    state: Mutex<State>,
    memory: Mutex<MemoryHistory>,
    /// One recycle decision at a time: two would both read the old process's memory and replace
    /// the fresh one too.
    recycling: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    disposed: bool,
    next_owner_id: usize,
    /// slot → the owner with the slot's current configuration.
    current: HashMap<RuntimeSlot, usize>,
    /// Every owner not yet disposed, current and retired.
    owners: HashMap<usize, Owner>,
}

struct Owner {
    slot: RuntimeSlot,
    key: RuntimeKey,
    runtime: Arc<dyn ProcessRuntime>,
    leases: usize,
    active_runs: usize,
    retired: bool,
    /// Bumped on every lease and run change; an idle-close timer only fires if it still matches,
    /// so any activity during the idle period cancels the close.
    epoch: u64,
    instances: HashMap<String, Instance>,
    /// Instances freed since the process started (a recycle starts it again).
    disposals: usize,
    /// Instances opened since the process started.
    spaces_served: usize,
}

struct Instance {
    space: ExecutionSpace,
    last_activity: Instant,
    active_runs: usize,
}

impl Owner {
    fn idle(&self) -> bool {
        self.leases == 0 && self.active_runs == 0
    }

    /// `space`'s instance, listed (and counted as served) if this is its first use since it was
    /// opened or freed.
    fn instance(&mut self, space: &ExecutionSpace, now: Instant) -> &mut Instance {
        match self.instances.entry(space.cache_identity.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                self.spaces_served += 1;
                e.insert(Instance { space: space.clone(), last_activity: now, active_runs: 0 })
            }
        }
    }
}

impl LocalRuntimeRegistry {
    /// A registry with the default bounds. Must be called inside a tokio runtime.
    pub fn new() -> Self {
        Self::with_config(RegistryConfig::default())
    }

    pub fn with_config(config: RegistryConfig) -> Self {
        let inner = Arc::new(Inner {
            config,
            handle: Handle::current(),
            stop: CancellationToken::new(),
            sweeper: Mutex::new(None),
            state: Mutex::new(State::default()),
            memory: Mutex::new(MemoryHistory::default()),
            recycling: tokio::sync::Mutex::new(()),
        });
        let task = inner.handle.spawn(sweep_loop(
            Arc::downgrade(&inner),
            inner.stop.clone(),
            config.sweep_every,
        ));
        *inner.sweeper.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Self { inner }
    }

    pub fn config(&self) -> RegistryConfig {
        self.inner.config
    }

    /// A facade bound to `space` over the runtime of `slot` configured as `key`.
    ///
    /// `factory` runs at most once per key while that key's runtime lives, even under concurrent
    /// acquires: it must be cheap (construct only; the process launches lazily on first use). A key
    /// that differs from the slot's current one retires the current runtime: it takes no new
    /// facades or runs and closes once its in-flight runs drain.
    pub async fn acquire(
        &self,
        slot: RuntimeSlot,
        key: RuntimeKey,
        space: ExecutionSpace,
        factory: impl FnOnce() -> Result<Arc<dyn ProcessRuntime>, RuntimeError>,
    ) -> Result<WorkspaceRuntime, RuntimeError> {
        let inner = &self.inner;
        let mut to_close = Vec::new();
        let (owner_id, runtime) = {
            let mut state = inner.lock();
            if state.disposed {
                return Err(RuntimeError::Disposed);
            }
            let existing = state.current.get(&slot).copied();
            let reuse = existing.filter(|id| state.owners.get(id).is_some_and(|o| o.key == key));
            let id = match reuse {
                Some(id) => id,
                None => {
                    // Created under the lock: that is what makes concurrent acquires create once.
                    // Before retiring the old runtime, so a failing factory leaves it serving.
                    let runtime = factory()?;
                    if let Some(old) = existing {
                        to_close.extend(inner.retire_locked(&mut state, old));
                    }
                    let id = state.next_owner_id;
                    state.next_owner_id += 1;
                    tracing::info!(%slot, key = %key, owner = id, "runtime created");
                    state.owners.insert(
                        id,
                        Owner {
                            slot: slot.clone(),
                            key,
                            runtime,
                            leases: 0,
                            active_runs: 0,
                            retired: false,
                            epoch: 0,
                            instances: HashMap::new(),
                            disposals: 0,
                            spaces_served: 0,
                        },
                    );
                    state.current.insert(slot.clone(), id);
                    id
                }
            };
            let owner = state.owners.get_mut(&id).expect("owner just found or inserted");
            owner.leases += 1;
            owner.epoch += 1;
            (id, owner.runtime.clone())
        };
        for runtime in to_close {
            inner.spawn_close(runtime);
        }
        Ok(WorkspaceRuntime::new(
            inner.clone(),
            slot.clone(),
            space,
            owner_id,
            runtime,
        ))
    }

    /// Forget a conversation's native session in every live runtime. Every runtime is asked even if
    /// one fails; the first failure is returned.
    pub async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        let runtimes: Vec<_> = self.inner.lock().owners.values().map(|o| o.runtime.clone()).collect();
        let mut first_error = None;
        for runtime in runtimes {
            if let Err(e) = runtime.release_conversation(conversation_id).await {
                tracing::warn!(conversation_id, error = %e, "release_conversation failed");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Every runtime not yet closed, oldest first.
    pub fn status(&self) -> Vec<RegisteredRuntimeStatus> {
        let state = self.inner.lock();
        let mut ids: Vec<_> = state.owners.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| {
                let o = &state.owners[&id];
                let mut warm: Vec<_> = o.instances.iter().collect();
                warm.sort_by_key(|(_, i)| std::cmp::Reverse(i.last_activity));
                RegisteredRuntimeStatus {
                    owner_id: id as u32,
                    family: o.slot.family.to_string(),
                    slot: o.slot.to_string(),
                    key: o.key.clone(),
                    retired: o.retired,
                    facades: o.leases as u32,
                    active_runs: o.active_runs as u32,
                    warm_instances: warm.into_iter().map(|(k, _)| k.clone()).collect(),
                    runtime: o.runtime.status(),
                }
            })
            .collect()
    }

    /// The runtimes alive now whose slot is `slot` or one of its per-project slots (`slot@…`),
    /// current ones first.
    pub fn processes_of(&self, slot: &str) -> Vec<Arc<dyn ProcessRuntime>> {
        let state = self.inner.lock();
        let mut found: Vec<(bool, usize, Arc<dyn ProcessRuntime>)> = state
            .owners
            .iter()
            .filter(|(_, o)| {
                let name = o.slot.to_string();
                name == slot || name.strip_prefix(slot).is_some_and(|rest| rest.starts_with('@'))
            })
            .map(|(id, o)| (o.retired, *id, o.runtime.clone()))
            .collect();
        found.sort_by_key(|(retired, id, _)| (*retired, std::cmp::Reverse(*id)));
        found.into_iter().map(|(_, _, r)| r).collect()
    }

    /// The processes of every runtime that may call Hearth's gateway (see
    /// [`ProcessRuntime::gateway_callers`]).
    pub fn gateway_callers(&self) -> Vec<u32> {
        let runtimes: Vec<_> = self.inner.lock().owners.values().map(|o| o.runtime.clone()).collect();
        runtimes.iter().flat_map(|r| r.gateway_callers()).collect()
    }

    /// How many runtimes are alive (current and retired-but-draining).
    pub fn runtime_count(&self) -> usize {
        self.inner.lock().owners.len()
    }

    /// Sweep idle instances now, as the sweeper does on each tick: free idle instances, read each
    /// runtime's memory and replace an idle one that holds too much.
    pub async fn sweep_instances(&self) {
        self.inner.sweep().await;
    }

    /// The last hour of memory readings and recycles.
    pub fn memory_report(&self) -> MemoryReport {
        let history = self.inner.memory.lock().unwrap_or_else(|p| p.into_inner());
        history.report(Instant::now(), &self.inner.config.recycle)
    }

    /// Stop the sweeper and close every runtime, waiting for each to stop. Facades still held fail
    /// their next call with [`RuntimeError::Disposed`]. Idempotent.
    pub async fn dispose(&self) {
        self.inner.stop.cancel();
        let sweeper = self.inner.sweeper.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = sweeper {
            let _ = task.await;
        }
        let runtimes: Vec<_> = {
            let mut state = self.inner.lock();
            state.disposed = true;
            state.current.clear();
            state.owners.drain().map(|(_, o)| o.runtime).collect()
        };
        futures::future::join_all(runtimes.iter().map(|r| r.dispose())).await;
        tracing::info!(count = runtimes.len(), "registry disposed");
    }
}

impl Default for LocalRuntimeRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LocalRuntimeRegistry {
    /// Without `dispose` the sweeper would outlive the registry; runtimes are still closed by
    /// their own process supervision when the app exits.
    fn drop(&mut self) {
        self.inner.stop.cancel();
    }
}

/// Marks one run (or compaction) on one space of one runtime; dropping it ends the run's share of
/// activity, whichever way the run ended.
pub(crate) struct ActivityGuard {
    inner: Arc<Inner>,
    owner_id: usize,
    space_id: String,
    facade_runs: Arc<AtomicUsize>,
}

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        self.facade_runs.fetch_sub(1, Ordering::SeqCst);
        self.inner.end_activity(self.owner_id, &self.space_id);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves counters, not invariants across awaits: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Mark `id` retired; returns its runtime if it can close now (no runs in flight).
    fn retire_locked(&self, state: &mut State, id: usize) -> Option<Arc<dyn ProcessRuntime>> {
        let owner = state.owners.get_mut(&id)?;
        owner.retired = true;
        owner.epoch += 1;
        if state.current.get(&owner.slot) == Some(&id) {
            let slot = owner.slot.clone();
            state.current.remove(&slot);
        }
        let owner = &state.owners[&id];
        tracing::info!(
            owner = id,
            active_runs = owner.active_runs,
            "runtime retired by a configuration change"
        );
        if owner.active_runs == 0 {
            state.owners.remove(&id).map(|o| o.runtime)
        } else {
            None
        }
    }

    fn spawn_close(&self, runtime: Arc<dyn ProcessRuntime>) {
        self.handle.spawn(async move { runtime.dispose().await });
    }

    /// The owner `id` lost activity: close it if retired and drained, or start its idle timer.
    fn after_release(self: &Arc<Self>, state: &mut State, id: usize) -> Option<Arc<dyn ProcessRuntime>> {
        let owner = state.owners.get_mut(&id)?;
        owner.epoch += 1;
        if owner.retired && owner.active_runs == 0 {
            tracing::info!(owner = id, "retired runtime drained; closing");
            return state.owners.remove(&id).map(|o| o.runtime);
        }
        if !owner.retired && owner.active_runs == 0 && self.config.recycle != RecyclePolicy::NEVER {
            // The moment a runtime has no run is when replacing its process costs nobody a wait.
            let weak = Arc::downgrade(self);
            self.handle.spawn(async move {
                if let Some(inner) = weak.upgrade() {
                    inner.recycle_if_due(id, false).await;
                }
            });
        }
        if !owner.retired && owner.idle() {
            let epoch = owner.epoch;
            let weak = Arc::downgrade(self);
            let after = self.config.idle_close_after;
            self.handle.spawn(async move {
                tokio::time::sleep(after).await;
                if let Some(inner) = weak.upgrade() {
                    inner.close_if_still_idle(id, epoch);
                }
            });
        }
        None
    }

    fn close_if_still_idle(&self, id: usize, epoch: u64) {
        let runtime = {
            let mut state = self.lock();
            match state.owners.get(&id) {
                Some(o) if o.epoch == epoch && o.idle() && !o.retired => {}
                _ => return,
            }
            let owner = state.owners.remove(&id).expect("checked above");
            if state.current.get(&owner.slot) == Some(&id) {
                state.current.remove(&owner.slot);
            }
            owner.runtime
        };
        tracing::info!(owner = id, "runtime idle; closing");
        self.spawn_close(runtime);
    }

    pub(crate) fn release_lease(self: &Arc<Self>, id: usize) {
        let close = {
            let mut state = self.lock();
            match state.owners.get_mut(&id) {
                Some(owner) => owner.leases = owner.leases.saturating_sub(1),
                None => return,
            }
            self.after_release(&mut state, id)
        };
        if let Some(runtime) = close {
            self.spawn_close(runtime);
        }
    }

    /// The runtime a facade of `slot` bound to `id` should use now: `id` itself unless it was
    /// retired, else the slot's current runtime, to which the facade's lease moves.
    pub(crate) fn rebind(
        self: &Arc<Self>,
        slot: &RuntimeSlot,
        id: usize,
    ) -> Result<(usize, Arc<dyn ProcessRuntime>), RuntimeError> {
        let (result, close) = {
            let mut state = self.lock();
            if state.disposed {
                return Err(RuntimeError::Disposed);
            }
            if let Some(owner) = state.owners.get(&id).filter(|o| !o.retired) {
                return Ok((id, owner.runtime.clone()));
            }
            let Some(new_id) = state.current.get(slot).copied() else {
                return Err(RuntimeError::Replaced);
            };
            let new = state.owners.get_mut(&new_id).expect("current owners are registered");
            new.leases += 1;
            new.epoch += 1;
            let runtime = new.runtime.clone();
            let close = match state.owners.get_mut(&id) {
                Some(old) => {
                    old.leases = old.leases.saturating_sub(1);
                    self.after_release(&mut state, id)
                }
                None => None,
            };
            tracing::debug!(from = id, to = new_id, "facade moved to the current configuration");
            (Ok((new_id, runtime)), close)
        };
        if let Some(runtime) = close {
            self.spawn_close(runtime);
        }
        result
    }

    /// Start a run (or compaction) of owner `id` in `space`.
    pub(crate) fn begin_activity(
        self: &Arc<Self>,
        id: usize,
        space: &ExecutionSpace,
        facade_runs: &Arc<AtomicUsize>,
    ) -> Result<ActivityGuard, RuntimeError> {
        let evicted = {
            let mut state = self.lock();
            let owner = state.owners.get_mut(&id).ok_or(RuntimeError::Disposed)?;
            owner.active_runs += 1;
            owner.epoch += 1;
            let now = Instant::now();
            let instance = owner.instance(space, now);
            instance.active_runs += 1;
            instance.last_activity = now;
            let evicted = evict_over_capacity(owner, self.config.max_warm_instances, None);
            (owner.runtime.clone(), evicted)
        };
        facade_runs.fetch_add(1, Ordering::SeqCst);
        self.spawn_instance_disposals(evicted.0, evicted.1);
        Ok(ActivityGuard {
            inner: self.clone(),
            owner_id: id,
            space_id: space.cache_identity.clone(),
            facade_runs: facade_runs.clone(),
        })
    }

    fn end_activity(self: &Arc<Self>, id: usize, space_id: &str) {
        let close = {
            let mut state = self.lock();
            let Some(owner) = state.owners.get_mut(&id) else { return };
            owner.active_runs = owner.active_runs.saturating_sub(1);
            if let Some(instance) = owner.instances.get_mut(space_id) {
                instance.active_runs = instance.active_runs.saturating_sub(1);
                instance.last_activity = Instant::now();
            }
            self.after_release(&mut state, id)
        };
        if let Some(runtime) = close {
            self.spawn_close(runtime);
        }
    }

    /// Note activity on a space without a run (a permission reply, pre-warming): its instance is
    /// warm now, and counts against the warm bound like any other.
    pub(crate) fn touch(self: &Arc<Self>, id: usize, space: &ExecutionSpace) {
        let evicted = {
            let mut state = self.lock();
            let Some(owner) = state.owners.get_mut(&id) else { return };
            let now = Instant::now();
            owner.instance(space, now).last_activity = now;
            (owner.runtime.clone(), evict_over_capacity(owner, self.config.max_warm_instances, Some(&space.cache_identity)))
        };
        self.spawn_instance_disposals(evicted.0, evicted.1);
    }

    fn spawn_instance_disposals(&self, runtime: Arc<dyn ProcessRuntime>, spaces: Vec<ExecutionSpace>) {
        if spaces.is_empty() {
            return;
        }
        self.handle.spawn(dispose_instances(runtime, spaces));
    }
}

#[path = "registry_sweep.rs"]
mod sweep;
use sweep::{dispose_instances, evict_over_capacity, sweep_loop};

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
