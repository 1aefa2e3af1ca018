//! The shared runtime's memory over time, and when the registry replaces its process to give memory
//! back. OpenCode keeps much of what a per-project instance used after the instance is freed (its
//! heap grows with every project visited), so a long day of use grows it without bound; a fresh
//! process starts small, and native sessions live on disk, so replacing an idle process loses nothing.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Replace an idle runtime whose process tree holds more than this. Measured on the pinned runtime
/// with the scripted model (`cargo bench -p hearth-core --bench soak -- --no-recycle`): a fresh
/// process holds ~420 MiB, ~670–770 MiB with two projects active, and visiting more projects grows
/// it to 1.1–1.4 GiB, which freeing their instances does not give back. The bound sits well above
/// two active projects, so working in two never triggers a replacement, and well below the growth.
pub const RECYCLE_ABOVE_BYTES: u64 = 960 * 1024 * 1024;
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
    pub above_bytes: u64,
    pub after_disposals: usize,
}

impl Default for RecyclePolicy {
    fn default() -> Self {
        Self { above_bytes: RECYCLE_ABOVE_BYTES, after_disposals: RECYCLE_AFTER_DISPOSALS }
    }
}

impl RecyclePolicy {
    /// Never recycle (benches that measure growth itself).
    pub const NEVER: Self = Self { above_bytes: u64::MAX, after_disposals: usize::MAX };

    /// Why an idle runtime holding `rss` (if it could be read) that freed `disposals` instances
    /// since its process started should be replaced now, if it should.
    pub fn due(&self, rss: Option<u64>, disposals: usize) -> Option<RecycleReason> {
        if rss.is_some_and(|bytes| bytes > self.above_bytes) {
            Some(RecycleReason::Memory)
        } else if disposals >= self.after_disposals {
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
    fn due_past_the_bound_or_after_many_disposals_and_not_otherwise() {
        let policy = RecyclePolicy { above_bytes: 500 * MIB, after_disposals: 3 };
        assert_eq!(policy.due(Some(501 * MIB), 0), Some(RecycleReason::Memory));
        assert_eq!(policy.due(Some(500 * MIB), 0), None, "at the bound is within it");
        assert_eq!(policy.due(Some(100 * MIB), 3), Some(RecycleReason::Disposals));
        assert_eq!(policy.due(None, 2), None, "unreadable memory alone never recycles");
        assert_eq!(RecyclePolicy::NEVER.due(Some(u64::MAX - 1), usize::MAX - 1), None);
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
