//! The selected-runtime manager: the app's one door to runtimes. It caches a facade per
//! (selection, project) with a capacity, evicting the least recently used idle facades. Facades are
//! cheap leases on a shared process-owning runtime, so eviction never stops a process: every facade
//! of one configuration drives the same runtime however many projects are open.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};

use super::contract::{AgentRuntime, RuntimeError};
use super::facade::WorkspaceRuntime;
use super::process::RuntimeKey;
use crate::space::ExecutionSpace;

/// Facades kept per manager by default: one per recently used project is plenty, since a facade
/// holds no process of its own and is recreated in microseconds.
pub const DEFAULT_FACADE_CAPACITY: usize = 8;

/// Which runtime a conversation uses: the provider (runtime family, e.g. `"opencode"`) and the key
/// of its effective configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuntimeSelection {
    pub provider: String,
    pub key: RuntimeKey,
}

type CreateFn = dyn Fn(RuntimeSelection, ExecutionSpace) -> BoxFuture<'static, Result<WorkspaceRuntime, RuntimeError>>
    + Send
    + Sync;
type ReleaseFn = dyn Fn(String) -> BoxFuture<'static, Result<(), RuntimeError>> + Send + Sync;
type Pending = Shared<BoxFuture<'static, Result<Arc<WorkspaceRuntime>, RuntimeError>>>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    selection: RuntimeSelection,
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
/// implements [`AgentRuntime`], so callers may treat it as `Arc<dyn AgentRuntime>`) because the
/// manager must see a facade's in-flight runs to evict only idle ones, and diagnostics use
/// `owner_id` to show that all facades share one process.
pub struct SelectedRuntimeManager {
    capacity: usize,
    create: Box<CreateFn>,
    release: Box<ReleaseFn>,
    state: Mutex<State>,
}

impl SelectedRuntimeManager {
    /// `create` makes a facade (production: `registry.acquire(...)` with the selection's runtime
    /// factory); `release` forgets a conversation in every runtime (production:
    /// `registry.release_conversation`). `capacity` is raised to at least 1.
    pub fn new<C, CFut, R, RFut>(capacity: usize, create: C, release: R) -> Self
    where
        C: Fn(RuntimeSelection, ExecutionSpace) -> CFut + Send + Sync + 'static,
        CFut: Future<Output = Result<WorkspaceRuntime, RuntimeError>> + Send + 'static,
        R: Fn(String) -> RFut + Send + Sync + 'static,
        RFut: Future<Output = Result<(), RuntimeError>> + Send + 'static,
    {
        Self {
            capacity: capacity.max(1),
            create: Box::new(move |selection, space| create(selection, space).boxed()),
            release: Box::new(move |id| release(id).boxed()),
            state: Mutex::new(State::default()),
        }
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
            selection: selection.clone(),
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
                    let created = (self.create)(selection.clone(), space.clone());
                    let future: Pending = async move { created.await.map(Arc::new) }.boxed().shared();
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
            tracing::debug!(space = %key.space, provider = %key.selection.provider, "facade evicted");
        }
    }

    /// Facades currently cached (created or being created).
    pub fn cached_count(&self) -> usize {
        self.lock().slots.len()
    }

    /// Forget a conversation's native session in every runtime.
    pub async fn release_conversation(&self, conversation_id: &str) -> Result<(), RuntimeError> {
        (self.release)(conversation_id.to_owned()).await
    }

    /// Give back every cached facade's lease and refuse further requests. Runs in flight finish;
    /// the runtimes themselves belong to the registry, which closes them.
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
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
