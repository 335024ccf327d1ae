//! A call's place among the calls that may run at once ([`crate::Options::concurrency`]) and
//! the clock of its timeout ([`crate::Options::call_timeout`]), both given up while the body
//! waits on other calls ([`waiting_on_calls`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

tokio::task_local! {
    /// The slot of the call whose body is being polled.
    static SLOT: Arc<Slot>;
}

/// One running call's place, and the time its body spent waiting on other calls.
pub(crate) struct Slot {
    slots: Arc<Semaphore>,
    held: Mutex<Option<OwnedSemaphorePermit>>,
    pause: Mutex<Pause>,
    resumed: Notify,
}

/// How long a call's timeout clock stood still.
#[derive(Default)]
struct Pause {
    /// How many waits are open (they may nest).
    open: u32,
    /// Since when the clock stands still, while some wait is open.
    since: Option<Instant>,
    /// The time of the waits that ended.
    total: Duration,
}

impl Slot {
    pub(crate) fn new(slots: Arc<Semaphore>, held: Option<OwnedSemaphorePermit>) -> Arc<Self> {
        Arc::new(Slot {
            slots,
            held: Mutex::new(held),
            pause: Mutex::default(),
            resumed: Notify::new(),
        })
    }

    /// Runs `body` as the call's body: holding this place, and reached by
    /// [`waiting_on_calls`] inside it.
    pub(crate) async fn hold<F: Future>(self: Arc<Self>, body: F) -> F::Output {
        SLOT.scope(self, body).await
    }

    /// Runs `run`, failing with `Err(())` once it ran `limit` without counting the time its
    /// body spent in [`waiting_on_calls`].
    pub(crate) async fn within<F: Future>(
        &self,
        limit: Duration,
        run: std::pin::Pin<&mut F>,
    ) -> Result<F::Output, ()> {
        let start = Instant::now();
        let mut run = run;
        loop {
            let (waited, waiting) = self.waited();
            if waiting {
                // The clock stands still: only the end of the wait (or of the body) matters.
                let resumed = self.resumed.notified();
                if self.waited().1 {
                    tokio::select! {
                        biased;
                        output = run.as_mut() => return Ok(output),
                        () = resumed => continue,
                    }
                }
                continue;
            }
            // The body first: one that finishes when first polled never starts the timer.
            tokio::select! {
                biased;
                output = run.as_mut() => return Ok(output),
                () = tokio::time::sleep_until(start + limit + waited) => {
                    let (now_waited, now_waiting) = self.waited();
                    if !now_waiting && now_waited == waited {
                        return Err(());
                    }
                }
            }
        }
    }

    /// The time the body's waits took so far, and whether one is open now.
    fn waited(&self) -> (Duration, bool) {
        let pause = self.pause.lock().unwrap_or_else(PoisonError::into_inner);
        (pause.total, pause.open > 0)
    }

    fn open_wait(&self) {
        let mut pause = self.pause.lock().unwrap_or_else(PoisonError::into_inner);
        if pause.open == 0 {
            pause.since = Some(Instant::now());
        }
        pause.open += 1;
    }

    fn close_wait(&self) {
        let mut pause = self.pause.lock().unwrap_or_else(PoisonError::into_inner);
        pause.open = pause.open.saturating_sub(1);
        if pause.open == 0 {
            if let Some(since) = pause.since.take() {
                pause.total += since.elapsed();
            }
            drop(pause);
            self.resumed.notify_waiters();
        }
    }
}

/// Closes a wait when it ends, however it ends (a body dropped mid-wait too).
struct Waiting(Option<Arc<Slot>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.close_wait();
        }
    }
}

/// Runs `work`, which waits on other calls (a subagent's session, say), as the call whose body
/// awaits it should: without its place among the calls that may run at once, which the calls
/// it waits on need ([`crate::Options::concurrency`]: otherwise calls waiting on calls can take
/// every place and wait for each other), and without counting the time against its
/// [`crate::Options::call_timeout`] (a subagent may wait hours for its person). It takes a
/// place again before it returns; cancelling the call still stops it. Outside a call's body,
/// `work` just runs.
///
/// ```
/// # async fn demo() {
/// let answer = toolwright_runtime::waiting_on_calls(async { 42 }).await;
/// assert_eq!(answer, 42);
/// # }
/// ```
pub async fn waiting_on_calls<F: Future>(work: F) -> F::Output {
    let Ok(slot) = SLOT.try_with(Arc::clone) else {
        return work.await;
    };
    let released = slot
        .held
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .is_some();
    slot.open_wait();
    let waiting = Waiting(Some(Arc::clone(&slot)));
    let output = work.await;
    if released && let Ok(permit) = Arc::clone(&slot.slots).acquire_owned().await {
        *slot.held.lock().unwrap_or_else(PoisonError::into_inner) = Some(permit);
    }
    // The clock goes on once the call holds its place again.
    drop(waiting);
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> Arc<Slot> {
        let slots = Arc::new(Semaphore::new(1));
        let held = Arc::clone(&slots).try_acquire_owned().ok();
        Slot::new(slots, held)
    }

    #[tokio::test]
    async fn time_waiting_on_calls_does_not_count_against_the_timeout() {
        let limit = Duration::from_millis(300);
        let over = Duration::from_millis(600);

        // Waiting on other calls past the limit: not a timeout, and the place was free
        // meanwhile and is held again after.
        let waited = slot();
        let body = Arc::clone(&waited).hold(async {
            waiting_on_calls(async {
                let slots = SLOT.with(|s| Arc::clone(&s.slots));
                assert_eq!(slots.available_permits(), 1, "the place is given up");
                tokio::time::sleep(over).await;
            })
            .await;
            "done"
        });
        let body = std::pin::pin!(body);
        assert_eq!(waited.within(limit, body).await, Ok("done"));
        assert_eq!(
            waited.slots.available_permits(),
            0,
            "the place is held again"
        );

        // The same time spent by the body itself is a timeout.
        let busy = slot();
        let body = std::pin::pin!(Arc::clone(&busy).hold(tokio::time::sleep(over)));
        assert_eq!(busy.within(limit, body).await, Err(()));
    }

    #[tokio::test]
    async fn a_body_ready_when_its_deadline_fires_keeps_its_value() {
        // The body is pending once and ready from then on, but nothing wakes it: the task is
        // woken by the timer, and both are ready in that poll. The body is polled first, so
        // its value is kept (an unbiased select would pick the timeout about half the time).
        let limit = Duration::from_millis(5);
        for _ in 0..32 {
            let slot = slot();
            let mut polled = false;
            let body = std::pin::pin!(std::future::poll_fn(|_| {
                if std::mem::replace(&mut polled, true) {
                    std::task::Poll::Ready("done")
                } else {
                    std::task::Poll::Pending
                }
            }));
            assert_eq!(slot.within(limit, body).await, Ok("done"));
        }
    }
}
