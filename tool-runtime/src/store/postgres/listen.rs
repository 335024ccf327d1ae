//! [`Store::changed`](crate::store::Store::changed) on Postgres: a listener on a connection of
//! its own turns the `NOTIFY` of record writes into wake-ups of the store's waiters, and
//! reconnects when its connection drops.
//!
//! A write notifies only what a waiter acts on (`records::Announce`): a change waiters read at
//! once (a task's result or end), or a wake-up time, which wakes the waiters when it comes
//! rather than when it is written: the listener's clock counts it as a change then. Every
//! notification that arrives while a waiter is busy folds into one wake-up of its next wait
//! (each waiter keeps a [`ChangeMark`] of the changes it has seen).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx_core::Error as SqlError;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

use super::records::Heard;
use super::{CHANNEL, PostgresStore, backend};
use crate::store::{ChangeMark, StoreError};

/// Shortest and longest pause before the listener of [`Store::changed`] connects again.
const LISTEN_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// The most wake-up times to come that are kept: past the bound the latest is dropped, and the
/// waiters' poll finds its record due instead (as it would without notifications).
const MAX_WAKE_UPS: usize = 1024;

impl PostgresStore {
    /// [`Store::changed`](crate::store::Store::changed): [`PostgresStore::wait_since`] with the
    /// mark its callers share.
    pub(super) async fn wait_for_change(&self, timeout: Duration) {
        let shared = || {
            self.changes
                .shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let mut mark = *shared();
        self.wait_since(&mut mark, timeout).await;
        let mut shared = shared();
        *shared = (*shared).max(mark);
    }

    /// The count of changes heard so far.
    pub(super) fn mark_now(&self) -> ChangeMark {
        ChangeMark::new(self.changes.heard.borrow().changes)
    }

    /// Waits for a change heard after `mark` (a wake-up time coming is one), or `timeout`; then
    /// moves `mark` to every change heard so far: the caller reads the store next, and sees
    /// them.
    pub(super) async fn wait_since(&self, mark: &mut ChangeMark, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.next_change(*mark)).await;
        *mark = (*mark).max(self.mark_now());
    }

    /// Starts the listener behind [`Store::changed`] once, and waits for a change heard after
    /// `mark` (at once when one was already).
    async fn next_change(&self, mark: ChangeMark) {
        if let Err(error) = self.start_listening().await {
            tracing::warn!(
                "postgres `{}`: cannot listen for changes, falling back to polling: {error}",
                self.place
            );
            return std::future::pending().await;
        }
        let mut heard = self.changes.heard.subscribe();
        while heard.borrow_and_update().changes <= mark.seen() {
            // The sender lives as long as `self`: this cannot fail while we wait.
            if heard.changed().await.is_err() {
                return;
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
    /// What the callers of `changed` have seen, together.
    shared: Mutex<ChangeMark>,
    /// Set once the listener runs.
    listener: OnceCell<()>,
    /// Stops the listener when the store is dropped.
    stop: CancellationToken,
}

/// What the listener heard so far.
#[derive(Default)]
struct Hearing {
    /// The changes notified, the wake-up times come, and the listener's reconnections (which
    /// may have missed notifications). A count rather than a bare wake-up, so that one coming
    /// while a waiter does not wait (it is busy reading the store) still ends its next wait at
    /// once: each waiter's [`ChangeMark`] says how many it has seen.
    changes: u64,
    /// The wake-up times announced that have not come yet (Unix milliseconds), the soonest
    /// [`MAX_WAKE_UPS`]; the listener's clock counts each as a change when it comes.
    wake_ups: BTreeSet<u64>,
}

impl Changes {
    pub(super) fn new() -> Self {
        Changes {
            heard: watch::Sender::new(Hearing::default()),
            shared: Mutex::new(ChangeMark::default()),
            listener: OnceCell::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Tells the waiters what was heard; false once the store is gone.
    fn hear(changes: &Weak<Changes>, heard: Heard) -> bool {
        let Some(changes) = changes.upgrade() else {
            return false;
        };
        // Waiters care for the count, the clock for the soonest time: a later time wakes neither.
        changes.heard.send_if_modified(|hearing| {
            let mut notify = false;
            let wake = match heard {
                Heard::WakeUp(at) => Some(at),
                Heard::Change(wake) => {
                    hearing.changes += 1;
                    notify = true;
                    wake
                }
            };
            // A time before 1970 is due now. One already come (a short sleep, a deadline past,
            // a slow commit) is the soonest: the clock counts it at once.
            if let Some(at) = wake.map(|at| u64::try_from(at).unwrap_or(0)) {
                notify |= hearing.wake_ups.first().is_none_or(|&first| at < first);
                keep_wake_ups(&mut hearing.wake_ups, [at]);
            }
            notify
        });
        true
    }

    /// Once `LISTEN` is in effect (the first time, or again after the connection dropped):
    /// what was written while nobody here listened was not heard, so the waiters look again
    /// (one change), and the clock learns the wake-up times to come the database holds.
    fn listening(changes: &Weak<Changes>, upcoming: Vec<u64>) -> bool {
        let Some(changes) = changes.upgrade() else {
            return false;
        };
        changes.heard.send_modify(|hearing| {
            hearing.changes += 1;
            keep_wake_ups(&mut hearing.wake_ups, upcoming);
        });
        true
    }

    /// Counts the wake-up times come by `now` as one change; false once the store is gone.
    fn come(changes: &Weak<Changes>, now: u64) -> bool {
        let Some(changes) = changes.upgrade() else {
            return false;
        };
        changes.heard.send_if_modified(|hearing| {
            let later = hearing.wake_ups.split_off(&now.saturating_add(1));
            let came = !hearing.wake_ups.is_empty();
            hearing.wake_ups = later;
            if came {
                hearing.changes += 1;
            }
            came
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
    let heard = changes.heard.subscribe();
    let changes = Arc::downgrade(changes);
    // Marks taken before this were taken while nobody listened.
    Changes::listening(&changes, upcoming(pool, place).await);
    let pool = pool.clone();
    tokio::spawn(clock(Weak::clone(&changes), heard, stop.clone()));
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
                        if !Changes::listening(&changes, upcoming(&pool, &place).await) {
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
                // between are lost, so wake the waiters to read the store, and read the
                // wake-up times to come again.
                Ok(None) => {
                    if !Changes::listening(&changes, upcoming(&pool, &place).await) {
                        return;
                    }
                    continue;
                }
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

/// The listener's clock: counts each announced wake-up time as a change when it comes, so a
/// waiter busy at that moment sees it at its next wait. Ends with the store.
async fn clock(
    changes: Weak<Changes>,
    mut heard: watch::Receiver<Hearing>,
    stop: CancellationToken,
) {
    loop {
        let soonest = heard.borrow_and_update().wake_ups.first().copied();
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
            () = stop.cancelled() => return,
            changed = heard.changed() => {
                // A new time, or a change: look again. Gone: the store was dropped.
                if changed.is_err() {
                    return;
                }
            }
            () = come => {
                if !Changes::come(&changes, now_ms()) {
                    return;
                }
            }
        }
    }
}

/// Adds `times` to the wake-up times to come, keeping the soonest [`MAX_WAKE_UPS`].
fn keep_wake_ups(wake_ups: &mut BTreeSet<u64>, times: impl IntoIterator<Item = u64>) {
    wake_ups.extend(times);
    while wake_ups.len() > MAX_WAKE_UPS {
        wake_ups.pop_last();
    }
}

/// The soonest wake-up times to come of the turns and tasks in the database (those written
/// while nobody here listened among them); none when they cannot be read (the waiters' poll
/// finds their records due instead).
async fn upcoming(pool: &PgPool, place: &str) -> Vec<u64> {
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    let read: Result<Vec<i64>, SqlError> = query_scalar(
        "(SELECT wake_at FROM turns WHERE wake_at > $1 ORDER BY wake_at LIMIT $2) \
         UNION ALL (SELECT wake_at FROM tasks WHERE wake_at > $1 ORDER BY wake_at LIMIT $2)",
    )
    .bind(now)
    .bind(i64::try_from(MAX_WAKE_UPS).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await;
    match read {
        Ok(times) => times
            .into_iter()
            .filter_map(|t| u64::try_from(t).ok())
            .collect(),
        Err(error) => {
            tracing::warn!("postgres `{place}`: cannot read the wake-up times to come: {error}");
            Vec::new()
        }
    }
}

async fn reconnect(pool: &PgPool) -> Result<PgListener, SqlError> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}
