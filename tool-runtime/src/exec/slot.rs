//! A call's place among the calls that may run at once ([`crate::Options::concurrency`]), and
//! giving it up while the body waits on work that needs places of its own.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

tokio::task_local! {
    /// The place of the call whose body is being polled.
    static SLOT: Slot;
}

/// The place one call holds, while its body runs.
pub(crate) struct Slot {
    slots: Arc<Semaphore>,
    held: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Slot {
    pub(crate) fn new(slots: Arc<Semaphore>, held: Option<OwnedSemaphorePermit>) -> Self {
        Slot {
            slots,
            held: Mutex::new(held),
        }
    }

    /// Runs `body` holding this place; it is given back when `body` ends (or is dropped).
    pub(crate) async fn hold<F: Future>(self, body: F) -> F::Output {
        SLOT.scope(self, body).await
    }
}

/// Runs `work` without the place of the call whose body awaits it, and takes a place again
/// before returning: for a body that waits on other calls, such as a subagent's, which need
/// places of their own. Without it, calls waiting on calls can take every place and wait for
/// each other until their timeout. Outside a call's body, `work` just runs.
///
/// ```
/// # async fn demo() {
/// let answer = toolwright_runtime::without_call_slot(async { 42 }).await;
/// assert_eq!(answer, 42);
/// # }
/// ```
pub async fn without_call_slot<F: Future>(work: F) -> F::Output {
    let released = SLOT
        .try_with(|slot| {
            let permit = slot.held.lock().ok()?.take()?;
            drop(permit);
            Some(Arc::clone(&slot.slots))
        })
        .ok()
        .flatten();
    let output = work.await;
    if let Some(slots) = released
        && let Ok(permit) = slots.acquire_owned().await
    {
        let _ = SLOT.try_with(|slot| {
            if let Ok(mut held) = slot.held.lock() {
                *held = Some(permit);
            }
        });
    }
    output
}
