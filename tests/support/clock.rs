//! A clock the test sets and moves by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use toolwright::runtime::{Clock, Options};

/// A clock that stands still until the test moves it. Clones share one time, so a test keeps a
/// clone to move the clock of the runtimes it built.
#[derive(Clone, Debug, Default)]
pub(crate) struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `now_ms` (Unix milliseconds).
    pub(crate) fn at(now_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(now_ms)))
    }

    pub(crate) fn set(&self, now_ms: u64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    pub(crate) fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// The runtime's default options with this clock.
    pub(crate) fn options(&self) -> Options {
        Options {
            clock: Arc::new(self.clone()),
            ..Default::default()
        }
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
