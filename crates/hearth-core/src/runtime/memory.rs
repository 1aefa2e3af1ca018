//! The shared runtime's memory over time, and when the registry replaces its process to give memory
//! back. OpenCode keeps much of what a per-project instance used after the instance is freed (its
//! heap grows with every project visited), so a long day of use grows it without bound; a fresh
//! process starts small, and native sessions live on disk, so replacing an idle process loses nothing.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Replace an idle runtime whose process tree has held more than this. Measured on the pinned
/// runtime with the scripted model (`cargo bench -p hearth-core --bench soak`, `-- --no-recycle` for
/// the growth): a fresh process holds ~420 MiB, ~660-780 MiB with two projects active, and visiting
/// more projects grows it to 1.1-1.4 GiB, which freeing their instances does not give back. The
/// policy weighs the tree's high-water mark (`VmHWM`), not the idle reading: the runtime's heap
/// shrinks between turns and swells ~150 MiB while they run, so idle readings let it cross the bound
/// unseen (at 960 MiB on idle readings the soak peaked at 1,110 MiB, 1.67 times its steady state; at
/// 840 MiB, 1.53-1.71). On the peak, 840 MiB held the soak to 1,006 MiB against a steady 698 MiB
/// (1.44), still above what two active projects hold, so working in two does not cause replacements.
pub const RECYCLE_ABOVE_BYTES: u64 = 840 * 1024 * 1024;
/// The memory bound counts only once the process has served this many spaces since it started.
/// Two active projects alone can reach a peak near the bound (~820 MiB in the soak), and while only
/// they are served a fresh process would soon hold as much again: replacing it would restart it
/// after every turn. Growth from visiting more projects is what a fresh process gives back.
pub const RECYCLE_ABOVE_BYTES_AFTER_SPACES: usize = 3;
/// Past this peak the process is replaced however few spaces it served: a day in one project must
/// not grow it without bound either.
pub const RECYCLE_CEILING_BYTES: u64 = 2 * RECYCLE_ABOVE_BYTES;
/// Replace an idle runtime after it has freed this many instances, whatever its memory reads: the
/// garbage collector may hand pages back to the OS late, so resident memory alone reacts late.
pub const RECYCLE_AFTER_DISPOSALS: usize = 24;
/// How far back the memory history reaches (the Diagnostics chart's width).
pub const MEMORY_HISTORY_WINDOW: Duration = Duration::from_secs(60 * 60);
/// Samples kept at most, across runtimes: one per runtime per sweep, with room for a retired one.
pub const MAX_MEMORY_SAMPLES: usize = 512;

/// When the registry replaces an idle runtime's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecyclePolicy {
    /// Replace past this peak once `above_bytes_after_spaces` spaces were served.
    pub above_bytes: u64,
    pub above_bytes_after_spaces: usize,
    /// Replace past this peak whatever was served.
    pub ceiling_bytes: u64,
    pub after_disposals: usize,
}

impl Default for RecyclePolicy {
    fn default() -> Self {
        Self {
            above_bytes: RECYCLE_ABOVE_BYTES,
            above_bytes_after_spaces: RECYCLE_ABOVE_BYTES_AFTER_SPACES,
            ceiling_bytes: RECYCLE_CEILING_BYTES,
            after_disposals: RECYCLE_AFTER_DISPOSALS,
        }
    }
}

/// What the policy weighs of one idle runtime, counted since its process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessLoad {
    /// The most its process tree held (`None` when it could not be read).
    pub peak_bytes: Option<u64>,
    /// Spaces it opened an instance for (one visited again after being freed counts again).
    pub spaces_served: usize,
    /// Instances it freed.
    pub disposals: usize,
}

impl RecyclePolicy {
    /// Never recycle (benches that measure growth itself).
    pub const NEVER: Self =
        Self { above_bytes: u64::MAX, above_bytes_after_spaces: usize::MAX, ceiling_bytes: u64::MAX, after_disposals: usize::MAX };

    /// Why an idle runtime under `load` should be replaced now, if it should.
    pub fn due(&self, load: ProcessLoad) -> Option<RecycleReason> {
        let past = |bound: u64| load.peak_bytes.is_some_and(|bytes| bytes > bound);
        if past(self.ceiling_bytes) || (past(self.above_bytes) && load.spaces_served >= self.above_bytes_after_spaces) {
            Some(RecycleReason::Memory)
        } else if load.disposals >= self.after_disposals {
            Some(RecycleReason::Disposals)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub enum RecycleReason {
    /// Its memory was past the bound.
    Memory,
    /// It had freed many instances.
    Disposals,
}

/// One reading of a runtime's memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct MemorySample {
    /// How long before the report was made.
    pub ago_ms: u64,
    pub owner_id: u32,
    pub rss_bytes: u64,
}

/// One process replaced by a fresh one.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct RecycleMark {
    pub ago_ms: u64,
    pub owner_id: u32,
    pub reason: RecycleReason,
    /// What the old process held when it was replaced, if it could be read.
    pub rss_bytes: Option<u64>,
}

/// The last hour of memory readings and recycles, for the Diagnostics chart.
#[derive(Debug, Clone, PartialEq, serde::Serialize, specta::Type)]
#[serde(rename_all = "camelCase")]
pub struct MemoryReport {
    pub bound_bytes: u64,
    pub after_disposals: u32,
    pub window_ms: u64,
    /// Oldest first.
    pub samples: Vec<MemorySample>,
    pub recycles: Vec<RecycleMark>,
}

#[derive(Debug, Default)]
pub(crate) struct MemoryHistory {
    samples: VecDeque<(Instant, usize, u64)>,
    recycles: VecDeque<(Instant, usize, RecycleReason, Option<u64>)>,
}

impl MemoryHistory {
    pub fn sample(&mut self, at: Instant, owner: usize, rss: u64) {
        self.samples.push_back((at, owner, rss));
        while self.samples.len() > MAX_MEMORY_SAMPLES {
            self.samples.pop_front();
        }
        self.forget_before(at);
    }

    pub fn recycled(&mut self, at: Instant, owner: usize, reason: RecycleReason, rss: Option<u64>) {
        self.recycles.push_back((at, owner, reason, rss));
        while self.recycles.len() > MAX_MEMORY_SAMPLES {
            self.recycles.pop_front();
        }
        self.forget_before(at);
    }

    fn forget_before(&mut self, now: Instant) {
        let old = |at: Instant| now.duration_since(at) > MEMORY_HISTORY_WINDOW;
        while self.samples.front().is_some_and(|s| old(s.0)) {
            self.samples.pop_front();
        }
        while self.recycles.front().is_some_and(|r| old(r.0)) {
            self.recycles.pop_front();
        }
    }

    pub fn report(&self, now: Instant, policy: &RecyclePolicy) -> MemoryReport {
        let ago = |at: Instant| now.duration_since(at).as_millis() as u64;
        let window = |at: Instant| now.duration_since(at) <= MEMORY_HISTORY_WINDOW;
        MemoryReport {
            bound_bytes: policy.above_bytes,
            after_disposals: u32::try_from(policy.after_disposals).unwrap_or(u32::MAX),
            window_ms: MEMORY_HISTORY_WINDOW.as_millis() as u64,
            samples: self
                .samples
                .iter()
                .filter(|s| window(s.0))
                .map(|&(at, owner, rss)| MemorySample { ago_ms: ago(at), owner_id: owner as u32, rss_bytes: rss })
                .collect(),
            recycles: self
                .recycles
                .iter()
                .filter(|r| window(r.0))
                .map(|&(at, owner, reason, rss)| RecycleMark { ago_ms: ago(at), owner_id: owner as u32, reason, rss_bytes: rss })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn due_past_the_bound_once_spaces_were_served_past_the_ceiling_or_after_many_disposals() {
        let policy =
            RecyclePolicy { above_bytes: 500 * MIB, above_bytes_after_spaces: 3, ceiling_bytes: 1000 * MIB, after_disposals: 3 };
        let load = |peak: Option<u64>, spaces_served, disposals| ProcessLoad { peak_bytes: peak, spaces_served, disposals };
        assert_eq!(policy.due(load(Some(501 * MIB), 3, 0)), Some(RecycleReason::Memory));
        assert_eq!(policy.due(load(Some(500 * MIB), 3, 0)), None, "at the bound is within it");
        assert_eq!(policy.due(load(Some(900 * MIB), 2, 0)), None, "only the spaces it still serves: a fresh one would grow as much");
        assert_eq!(policy.due(load(Some(1001 * MIB), 1, 0)), Some(RecycleReason::Memory), "past the ceiling whatever it served");
        assert_eq!(policy.due(load(Some(100 * MIB), 0, 3)), Some(RecycleReason::Disposals));
        assert_eq!(policy.due(load(None, 9, 2)), None, "unreadable memory alone never recycles");
        assert_eq!(RecyclePolicy::NEVER.due(load(Some(u64::MAX - 1), usize::MAX - 1, usize::MAX - 1)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_history_keeps_one_hour_oldest_first() {
        let mut history = MemoryHistory::default();
        let start = Instant::now();
        history.sample(start, 0, 300 * MIB);
        tokio::time::advance(Duration::from_secs(30 * 60)).await;
        history.sample(Instant::now(), 0, 700 * MIB);
        history.recycled(Instant::now(), 0, RecycleReason::Memory, Some(700 * MIB));
        tokio::time::advance(Duration::from_secs(31 * 60)).await;
        let now = Instant::now();
        history.sample(now, 1, 310 * MIB);
        let report = history.report(now, &RecyclePolicy::default());
        let owners: Vec<_> = report.samples.iter().map(|s| (s.owner_id, s.rss_bytes / MIB, s.ago_ms / 60_000)).collect();
        assert_eq!(owners, [(0, 700, 31), (1, 310, 0)], "the reading from 61 minutes ago is gone");
        assert_eq!(report.recycles.len(), 1);
        assert_eq!(report.recycles[0].reason, RecycleReason::Memory);
        assert_eq!(report.bound_bytes, RECYCLE_ABOVE_BYTES);
    }
}
