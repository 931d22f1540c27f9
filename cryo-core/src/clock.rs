//! Injected time. Pure stages take `now` as a value; I/O stages take a [`Clock`].

use std::sync::Arc;

/// A source of "now", in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Current time.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that always says the same time (tests, golden files, replays).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_ms(&self) -> i64 {
        self.0
    }
}

/// The default clock.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// Seed the randomness of Cryo's code on this thread (the names of the files it writes, snapshot
/// ids, retry jitter), or give it back to the OS with `None`: the commit-protocol simulator runs
/// a seed on one thread, and this makes the seed fix every name as well as the interleaving.
/// Not API.
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub fn seed_thread_randomness(seed: Option<u64>) {
    crate::random::seeded::seed(seed);
}
