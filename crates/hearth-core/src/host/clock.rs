//! The time a bound is measured against, injected where a test must stand in for it: a grant's
//! expiry is tested by moving a manual clock past it, not by sleeping through it.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A monotonic clock.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> Instant;
}

/// A clock shared by the parts that measure against it.
pub type SharedClock = Arc<dyn Clock>;

/// The machine's monotonic clock: what production runs on.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The machine's clock, shared.
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that moves only when told to: for tests of expiry and bounds in time.
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    elapsed: Mutex<Duration>,
}

impl ManualClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { start: Instant::now(), elapsed: Mutex::new(Duration::ZERO) })
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.elapsed.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + *self.elapsed.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.now() - t0, Duration::from_secs(3));
    }
}
