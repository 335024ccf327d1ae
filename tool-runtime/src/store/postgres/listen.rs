//! [`Store::changed`](crate::store::Store::changed) on Postgres: a listener on a connection of
//! its own turns the `NOTIFY` of record writes into wake-ups of the store's waiters, and
//! reconnects when its connection drops.
//!
//! A write notifies only what a waiter acts on (`records::Announce`): a change waiters read at
//! once (a task's result or end), or a wake-up time, which wakes the waiters when it comes
//! rather than when it is written. Every notification that arrives while the waiters are busy
//! folds into one wake-up.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx_core::Error as SqlError;
use sqlx_postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

use super::records::Heard;
use super::{CHANNEL, PostgresStore, backend};
use crate::store::StoreError;

/// Shortest and longest pause before the listener of [`Store::changed`] connects again.
const LISTEN_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// The most wake-up times kept, the soonest: a later one is dropped, and the waiters' poll
/// finds its record due instead (as it would without notifications).
const MAX_WAKE_UPS: usize = 1024;

impl PostgresStore {
    /// Waits for the next change, a wake-up time announced to come, or `timeout`; then marks
    /// every change so far, and every wake-up time come, as seen.
    pub(super) async fn wait_for_change(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.next_change()).await;
        // The caller reads the store next, and sees every change notified so far and every
        // record due by now: those need not wake the next call early. (Its clock reads after
        // this one, so a time dropped here is one its read finds due.)
        let now = now_ms();
        let mut seen = 0;
        self.changes.heard.send_if_modified(|heard| {
            heard.wake_ups = heard.wake_ups.split_off(&now.saturating_add(1));
            seen = heard.changes;
            // Nothing new to wake anyone for.
            false
        });
        self.changes.reported.fetch_max(seen, Ordering::SeqCst);
    }

    /// Starts the listener behind [`Store::changed`] once, and waits for the next change or
    /// the next wake-up time to come (at once when one did since the last call returned).
    async fn next_change(&self) {
        if let Err(error) = self.start_listening().await {
            tracing::warn!(
                "postgres `{}`: cannot listen for changes, falling back to polling: {error}",
                self.place
            );
            return std::future::pending().await;
        }
        let mut heard = self.changes.heard.subscribe();
        loop {
            let soonest = {
                let heard = heard.borrow_and_update();
                if heard.changes > self.changes.reported.load(Ordering::SeqCst) {
                    return;
                }
                heard.wake_ups.first().copied()
            };
            let come = async {
                match soonest {
                    Some(at) => {
                        let wait = at.saturating_sub(now_ms());
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = come => return,
                // A change, or a new wake-up time: look again. The sender lives as long as
                // `self`: this cannot fail while we wait.
                _ = heard.changed() => {}
            }
        }
    }

    /// Starts the listener once. On a task of its own: a caller whose timeout ends before the
    /// `LISTEN` is in effect (a first `changed` with a short timeout) must not cancel it half
    /// way, or the writes until the next call would go unheard.
    async fn start_listening(&self) -> Result<(), StoreError> {
        if self.changes.listener.initialized() {
            return Ok(());
        }
        let (pool, place, changes) = (
            self.pool.clone(),
            Arc::clone(&self.place),
            Arc::clone(&self.changes),
        );
        let start = tokio::spawn(async move {
            changes
                .listener
                .get_or_try_init(|| listen(&pool, &place, &changes))
                .await
                .map(|_| ())
        });
        match start.await {
            Ok(started) => started,
            Err(error) => Err(StoreError::Backend(format!(
                "postgres `{}`: starting the listener failed: {error}",
                self.place
            ))),
        }
    }
}

/// Unix milliseconds by this machine's clock, the clock wake-up times are written in
/// ([`crate::Clock`]'s default).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// What the waiters of [`Store::changed`] wait on: what the listener heard.
pub(super) struct Changes {
    heard: watch::Sender<Hearing>,
    /// The count of changes when the last `changed` call returned.
    reported: AtomicU64,
    /// Set once the listener runs.
    listener: OnceCell<()>,
    /// Stops the listener when the store is dropped.
    stop: CancellationToken,
}

/// What the listener heard so far.
#[derive(Default)]
struct Hearing {
    /// The changes notified (and the listener's reconnections, which may have missed some). A
    /// count rather than a bare wake-up, so that one arriving while no call waits (the caller is
    /// busy reading the store) still ends the next call at once.
    changes: u64,
    /// The wake-up times announced that have not come yet, as of the last call's return (Unix
    /// milliseconds), the soonest [`MAX_WAKE_UPS`].
    wake_ups: BTreeSet<u64>,
}

impl Changes {
    pub(super) fn new() -> Self {
        Changes {
            heard: watch::Sender::new(Hearing::default()),
            reported: AtomicU64::new(0),
            listener: OnceCell::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Tells the waiters what was heard; false once the store is gone.
    fn hear(changes: &Weak<Changes>, heard: Heard) -> bool {
        let Some(changes) = changes.upgrade() else {
            return false;
        };
        changes.heard.send_modify(|hearing| {
            let wake = match heard {
                Heard::WakeUp(at) => Some(at),
                Heard::Change(wake) => {
                    hearing.changes += 1;
                    wake
                }
            };
            if let Some(at) = wake {
                // A time before 1970 is due now.
                hearing.wake_ups.insert(u64::try_from(at).unwrap_or(0));
                if hearing.wake_ups.len() > MAX_WAKE_UPS {
                    hearing.wake_ups.pop_last();
                }
            }
        });
        true
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts listening: `LISTEN` is in effect when this returns, so a write committed after it is
/// seen. The listener runs in a task that holds the store only weakly.
async fn listen(pool: &PgPool, place: &str, changes: &Arc<Changes>) -> Result<(), StoreError> {
    // A pool of one of its own, with the store pool's options: the listening connection lives as
    // long as the store and must not take a connection from its work.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with((*pool.connect_options()).clone());
    let fail = |error: SqlError| backend(place, "cannot listen for changes", &error);
    let mut listener = PgListener::connect_with(&own).await.map_err(fail)?;
    listener.listen(CHANNEL).await.map_err(fail)?;
    let stop = changes.stop.clone();
    let changes = Arc::downgrade(changes);
    let place = place.to_owned();
    tokio::spawn(async move {
        let mut listener = Some(listener);
        let mut pause = LISTEN_RETRY.0;
        loop {
            let Some(active) = listener.as_mut() else {
                let reconnected = tokio::select! {
                    () = stop.cancelled() => return,
                    reconnected = reconnect(&own) => reconnected,
                };
                match reconnected {
                    Ok(fresh) => {
                        listener = Some(fresh);
                        // Writes made while nobody listened were not announced.
                        if !Changes::hear(&changes, Heard::Change(None)) {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(
                            "postgres `{place}`: cannot listen for changes again (retrying in \
                             {pause:?}): {error}"
                        );
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(pause) => {}
                        }
                        pause = (pause * 2).min(LISTEN_RETRY.1);
                    }
                }
                continue;
            };
            let received = tokio::select! {
                () = stop.cancelled() => return,
                received = active.try_recv() => received,
            };
            let heard = match received {
                Ok(Some(notification)) => {
                    pause = LISTEN_RETRY.0;
                    Heard::of(notification.payload())
                }
                // The connection dropped and sqlx opened a new one: notifications sent in
                // between are lost, so wake the waiters to read the store.
                Ok(None) => Heard::Change(None),
                Err(error) => {
                    tracing::warn!("postgres `{place}`: listening for changes failed: {error}");
                    listener = None;
                    Heard::Change(None)
                }
            };
            if !Changes::hear(&changes, heard) {
                return;
            }
        }
    });
    Ok(())
}

async fn reconnect(pool: &PgPool) -> Result<PgListener, SqlError> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}
