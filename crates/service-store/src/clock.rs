use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use service_types::Timestamp;

/// The source of "now" for every TTL, schedule and timestamp a driver writes.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::new(chrono::Utc::now())
    }
}

/// A clock that only moves when told to, so TTL and schedule tests never sleep.
#[derive(Debug)]
pub struct ManualClock {
    micros: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            micros: AtomicI64::new(start.unix_micros()),
        }
    }

    /// Moves the clock to `at` (backwards too).
    pub fn set(&self, at: Timestamp) {
        self.micros.store(at.unix_micros(), Ordering::SeqCst);
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let micros = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.micros.fetch_add(micros, Ordering::SeqCst);
    }

    /// Moves the clock forward by whole or fractional minutes.
    pub fn advance_minutes(&self, minutes: f64) {
        let at = self.now().plus_minutes(minutes);
        self.set(at);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_micros(self.micros.load(Ordering::SeqCst))
    }
}
