//! The selected-runtime manager: the app's one door to runtimes, and the one place they are wired.
//!
//! It adds two things to the registry. It *selects*: a conversation names a [`RuntimeSpec`] (a
//! family and its configuration), and the manager makes that family's runtime through the registry,
//! which keeps one process per configuration. And it *caches* a facade per (selection, project)
//! with a capacity, evicting the least recently used idle facades, and creates each facade once
//! however many callers ask at the same moment. Facades are cheap leases on the shared process, so
//! eviction never stops a process: every facade of one configuration drives the same runtime however
//! many projects are open.
//!
//! [`SelectedRuntimeManager::start`] is the only constructor: the app, the self-test, the benches
//! and the integration tests all run the wiring it builds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};

use super::contract::{AgentRuntime, RuntimeError};
use super::facade::WorkspaceRuntime;
use super::process::{RuntimeHost, RuntimeKey, RuntimeSlot, RuntimeSpec};
use super::registry::{LocalRuntimeRegistry, RegisteredRuntimeStatus, RegistryConfig};
use crate::space::ExecutionSpace;

/// Facades kept per manager by default: one per recently used project is plenty, since a facade
/// holds no process of its own and is recreated in microseconds.
pub const DEFAULT_FACADE_CAPACITY: usize = 8;

/// Everything the wiring needs: what every runtime is given, and the registry's and cache's bounds.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    pub host: RuntimeHost,
    pub registry: RegistryConfig,
    pub facade_capacity: usize,
}

impl ManagerConfig {
    /// Production bounds for runtimes rooted at `host`.
    pub fn new(host: RuntimeHost) -> Self {
        Self { host, registry: RegistryConfig::default(), facade_capacity: DEFAULT_FACADE_CAPACITY }
    }
}

/// A conversation's choice of runtime: a family and its configuration.
pub type RuntimeSelection = Arc<dyn RuntimeSpec>;

type Pending = Shared<BoxFuture<'static, Result<Arc<WorkspaceRuntime>, RuntimeError>>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    slot: RuntimeSlot,
    key: RuntimeKey,
    space: String,
}

enum Slot {
    /// Being created; later callers for the same key await the same creation.
    Creating { generation: u64, future: Pending },
    Ready {
        facade: Arc<WorkspaceRuntime>,
        last_used: u64,
    },
}

#[derive(Default)]
struct State {
    disposed: bool,
    /// Monotonic use counter: orders the LRU without depending on the clock.
    tick: u64,
    slots: HashMap<CacheKey, Slot>,
}

/// Hands out facades by (selection, space). It returns the concrete [`WorkspaceRuntime`] (which
/// implements [`AgentRuntime`]) because the manager must see a facade's in-flight runs to evict only
/// idle ones, and diagnostics use `owner_id` to show that all facades share one process.
pub struct SelectedRuntimeManager {
    capacity: usize,
    host: RuntimeHost,
    registry: Arc<LocalRuntimeRegistry>,
    state: Mutex<State>,
}

impl SelectedRuntimeManager {
    /// The production wiring: a registry with `config.registry` bounds, and this manager over it.
    /// Call inside a tokio runtime (the registry spawns its sweeper there).
    pub fn start(config: ManagerConfig) -> Self {
        Self {
            capacity: config.facade_capacity.max(1),
            host: config.host,
            registry: Arc::new(LocalRuntimeRegistry::with_config(config.registry)),
            state: Mutex::new(State::default()),
        }
    }

    /// What every runtime is given (records folder, run hooks).
    pub fn host(&self) -> &RuntimeHost {
        &self.host
    }

    /// Every runtime process alive now, for diagnostics.
    pub fn runtimes(&self) -> Vec<RegisteredRuntimeStatus> {
        self.registry.status()
    }

    /// The runtimes alive now whose slot is `slot` (`acp:claude-code`) or one of its per-project
    /// slots (`acp:codex@/path`), current ones first.
    pub fn processes_of(&self, slot: &str) -> Vec<std::sync::Arc<dyn super::ProcessRuntime>> {
        self.registry.processes_of(slot)
    }

    /// The processes of every runtime alive now (the gateway serves these and nothing else).
    pub fn pids(&self) -> Vec<u32> {
        self.registry.gateway_callers()
    }

    /// The last hour of every runtime's memory, and the processes replaced to give memory back.
    pub fn memory_report(&self) -> super::memory::MemoryReport {
        self.registry.memory_report()
    }

    /// How many runtimes are alive (current and retired-but-draining).
    pub fn runtime_count(&self) -> usize {
        self.registry.runtime_count()
    }

    /// Sweep idle per-project instances now, as the registry's sweeper does on each tick.
    pub async fn sweep_instances(&self) {
        self.registry.sweep_instances().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The facade for `selection` in `space`, created once however many callers ask at once.
    pub async fn get_runtime(
        &self,
        selection: &RuntimeSelection,
        space: &ExecutionSpace,
    ) -> Result<Arc<WorkspaceRuntime>, RuntimeError> {
        let key = CacheKey {
            slot: selection.slot(),
            key: selection.key(),
            space: space.cache_identity.clone(),
        };
        let (generation, future) = {
            let mut state = self.lock();
            if state.disposed {
                return Err(RuntimeError::Disposed);
            }
            state.tick += 1;
            let tick = state.tick;
            match state.slots.get_mut(&key) {
                Some(Slot::Ready { facade, last_used }) => {
                    *last_used = tick;
                    return Ok(facade.clone());
                }
                Some(Slot::Creating { generation, future }) => (*generation, future.clone()),
                None => {
                    let (registry, host, spec, space) = (self.registry.clone(), self.host.clone(), selection.clone(), space.clone());
                    let future: Pending = async move {
                        let facade = registry.acquire(spec.slot(), spec.key(), space, || spec.create(&host)).await?;
                        Ok(Arc::new(facade))
                    }
                    .boxed()
                    .shared();
                    state.slots.insert(
                        key.clone(),
                        Slot::Creating {
                            generation: tick,
                            future: future.clone(),
                        },
                    );
                    (tick, future)
                }
            }
        };
        let result = future.await;
        // The first waiter to get here files the result (the starter may have been cancelled).
        let mut state = self.lock();
        if state.disposed {
            return Err(RuntimeError::Disposed);
        }
        let ours = matches!(state.slots.get(&key), Some(Slot::Creating { generation: g, .. }) if *g == generation);
        if ours {
            match &result {
                Ok(facade) => {
                    state.tick += 1;
                    let last_used = state.tick;
                    state.slots.insert(
                        key.clone(),
                        Slot::Ready {
                            facade: facade.clone(),
                            last_used,
                        },
                    );
                    self.evict_locked(&mut state, &key);
                }
                // Not cached: the next call tries again.
                Err(_) => {
                    state.slots.remove(&key);
                }
            }
        }
        result
    }

    /// Drop least recently used idle facades until within capacity. `keep` (just handed out) stays;
    /// busy facades stay even if that leaves the cache above capacity until they finish.
    fn evict_locked(&self, state: &mut State, keep: &CacheKey) {
        let excess = state.slots.len().saturating_sub(self.capacity);
        if excess == 0 {
            return;
        }
        let mut idle: Vec<(u64, CacheKey)> = state
            .slots
            .iter()
            .filter(|(k, _)| *k != keep)
            .filter_map(|(k, slot)| match slot {
                Slot::Ready { facade, last_used } if facade.active_runs() == 0 => Some((*last_used, k.clone())),
                _ => None,
            })
            .collect();
        idle.sort_by_key(|(used, _)| *used);
        for (_, key) in idle.into_iter().take(excess) {
            // Dropping our Arc gives the lease back once callers still holding the facade let go.
            state.slots.remove(&key);
            tracing::debug!(space = %key.space, slot = %key.slot, "facade evicted");
        }
    }

    /// Facades currently cached (created or being created).
    pub fn cached_count(&self) -> usize {
        self.lock().slots.len()
    }

    /// Forget a conversation's native session in every runtime.
    pub async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        self.registry.release_conversation(conversation_id).await
    }

    /// Give back every cached facade's lease, refuse further requests, and close every runtime,
    /// waiting for each process to stop. Idempotent.
    pub async fn dispose(&self) {
        let facades: Vec<_> = {
            let mut state = self.lock();
            state.disposed = true;
            state
                .slots
                .drain()
                .filter_map(|(_, slot)| match slot {
                    Slot::Ready { facade, .. } => Some(facade),
                    Slot::Creating { .. } => None,
                })
                .collect()
        };
        for facade in facades {
            facade.dispose().await;
        }
        self.registry.dispose().await;
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
