//! The registry's sweeper: on every tick it frees idle per-space instances (idle too long, or beyond
//! the warm bound), reads each runtime's memory into the history, and replaces the process of an
//! idle runtime that holds too much (see `memory.rs`). A child of `registry.rs`, sharing its state.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Inner, Owner};
use crate::runtime::memory::ProcessLoad;
use crate::runtime::process::ProcessRuntime;
use crate::space::ExecutionSpace;

pub(super) async fn sweep_loop(inner: Weak<Inner>, stop: CancellationToken, every: Duration) {
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        inner.sweep().await;
    }
}

impl Inner {
    pub(super) async fn sweep(&self) {
        let now = Instant::now();
        let work: Vec<_> = {
            let mut state = self.lock();
            state
                .owners
                .values_mut()
                .map(|owner| {
                    let expired: Vec<String> = owner
                        .instances
                        .iter()
                        .filter(|(_, i)| {
                            i.active_runs == 0 && now.duration_since(i.last_activity) >= self.config.instance_idle_after
                        })
                        .map(|(k, _)| k.clone())
                        .collect();
                    let mut spaces: Vec<_> = expired
                        .iter()
                        .filter_map(|k| owner.instances.remove(k))
                        .map(|i| i.space)
                        .collect();
                    owner.disposals += spaces.len();
                    spaces.extend(evict_over_capacity(owner, self.config.max_warm_instances, None));
                    (owner.runtime.clone(), spaces)
                })
                .filter(|(_, spaces)| !spaces.is_empty())
                .collect()
        };
        for (runtime, spaces) in work {
            dispose_instances(runtime, spaces).await;
        }
        let ids: Vec<usize> = self.lock().owners.iter().filter(|(_, o)| !o.retired).map(|(id, _)| *id).collect();
        for id in ids {
            self.recycle_if_due(id, true).await;
        }
    }

    /// Replace owner `id`'s process if it has no run and the policy says so; with `sample`, record
    /// its memory in the history either way.
    pub(super) async fn recycle_if_due(&self, id: usize, sample: bool) {
        let _one_at_a_time = self.recycling.lock().await;
        let Some((runtime, disposals, spaces_served, idle)) = self
            .lock()
            .owners
            .get(&id)
            .filter(|o| !o.retired)
            .map(|o| (o.runtime.clone(), o.disposals, o.spaces_served, o.active_runs == 0))
        else {
            return;
        };
        if !idle && !sample {
            // A run began meanwhile: nothing to record and nothing to replace.
            return;
        }
        let rss = runtime.memory_bytes();
        let now = Instant::now();
        if let (true, Some(rss)) = (sample, rss) {
            self.memory.lock().unwrap_or_else(|p| p.into_inner()).sample(now, id, rss);
        }
        // The peak, not the reading now: between turns the runtime holds less than it takes again
        // with the next one, so a reading in an idle moment would let every busy stretch overshoot.
        let peak = runtime.peak_memory_bytes().or(rss);
        let load = ProcessLoad { peak_bytes: peak, spaces_served, disposals };
        let Some(reason) = self.config.recycle.due(load).filter(|_| idle) else { return };
        match runtime.recycle().await {
            Ok(true) => {
                tracing::info!(owner = id, ?reason, rss, peak, disposals, spaces_served, "runtime process recycled");
                if let Some(owner) = self.lock().owners.get_mut(&id) {
                    owner.disposals = 0;
                    // The fresh process has no instances; one a run opened meanwhile stays listed.
                    owner.instances.retain(|_, i| i.active_runs > 0);
                    owner.spaces_served = owner.instances.len();
                }
                let mut history = self.memory.lock().unwrap_or_else(|p| p.into_inner());
                history.recycled(now, id, reason, rss);
                if let Some(fresh) = runtime.memory_bytes() {
                    history.sample(Instant::now(), id, fresh);
                }
            }
            // Something used the process after all: the next idle moment tries again.
            Ok(false) => {}
            Err(e) => tracing::warn!(owner = id, error = %e, "could not recycle the runtime process"),
        }
    }
}

/// Remove the least recently used idle instances beyond `max_warm`; instances with a run in flight
/// are never removed, so the count may stay above the bound while they run.
pub(super) fn evict_over_capacity(owner: &mut Owner, max_warm: usize, keep: Option<&str>) -> Vec<ExecutionSpace> {
    let excess = owner.instances.len().saturating_sub(max_warm);
    if excess == 0 {
        return Vec::new();
    }
    let mut idle: Vec<(Instant, String)> = owner
        .instances
        .iter()
        .filter(|(k, i)| i.active_runs == 0 && Some(k.as_str()) != keep)
        .map(|(k, i)| (i.last_activity, k.clone()))
        .collect();
    idle.sort();
    let evicted: Vec<ExecutionSpace> =
        idle.into_iter().take(excess).filter_map(|(_, k)| owner.instances.remove(&k)).map(|i| i.space).collect();
    owner.disposals += evicted.len();
    evicted
}

pub(super) async fn dispose_instances(runtime: Arc<dyn ProcessRuntime>, spaces: Vec<ExecutionSpace>) {
    for space in spaces {
        tracing::debug!(space = %space.cache_identity, "disposing idle runtime instance");
        if let Err(e) = runtime.dispose_instance(&space).await {
            tracing::warn!(space = %space.cache_identity, error = %e, "could not dispose an idle instance");
        }
    }
}
