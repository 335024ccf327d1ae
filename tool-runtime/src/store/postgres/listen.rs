//! [`Store::changed`](crate::store::Store::changed) on Postgres: a listener on a connection of
//! its own turns the `NOTIFY` of every turn and task write into an early wake-up of the store's
//! waiters, and reconnects when its connection drops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx_core::Error as SqlError;
use sqlx_postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

use super::{CHANNEL, PostgresStore, backend};
use crate::store::StoreError;

/// Shortest and longest pause before the listener of [`Store::changed`] connects again.
const LISTEN_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

impl PostgresStore {
    /// Waits for the next change, or `timeout`; then marks every notification so far as seen.
    pub(super) async fn wait_for_change(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.next_change()).await;
        // The caller reads the store next, and sees every write notified so far: those
        // need not wake the next call early.
        let seen = *self.changes.count.borrow();
        self.changes.reported.fetch_max(seen, Ordering::SeqCst);
    }

    /// Starts the listener behind [`Store::changed`] once, and waits for the next notification
    /// (at once when one arrived since the last call returned).
    async fn next_change(&self) {
        let started = self
            .changes
            .listener
            .get_or_try_init(|| listen(&self.pool, &self.place, &self.changes))
            .await;
        if let Err(error) = started {
            tracing::warn!(
                "postgres `{}`: cannot listen for changes, falling back to polling: {error}",
                self.place
            );
            return std::future::pending().await;
        }
        let mut count = self.changes.count.subscribe();
        if *count.borrow_and_update() > self.changes.reported.load(Ordering::SeqCst) {
            return;
        }
        // The sender lives as long as `self`: this cannot fail while we wait.
        let _ = count.changed().await;
    }
}

/// What [`Store::changed`] waits on: the number of notifications the listener received.
///
/// A count rather than a bare wake-up, so that a notification arriving while no call waits (the
/// caller is busy reading the store) still ends the next call at once.
pub(super) struct Changes {
    count: watch::Sender<u64>,
    /// The count when the last `changed` call returned.
    reported: AtomicU64,
    /// Set once the listener runs.
    listener: OnceCell<()>,
    /// Stops the listener when the store is dropped.
    stop: CancellationToken,
}

impl Changes {
    pub(super) fn new() -> Self {
        Changes {
            count: watch::Sender::new(0),
            reported: AtomicU64::new(0),
            listener: OnceCell::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Wakes every waiter; false once the store is gone.
    fn bump(changes: &Weak<Changes>) -> bool {
        match changes.upgrade() {
            Some(changes) => {
                changes.count.send_modify(|count| *count += 1);
                true
            }
            None => false,
        }
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
                        if !Changes::bump(&changes) {
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
            match received {
                Ok(Some(_)) => pause = LISTEN_RETRY.0,
                // The connection dropped and sqlx opened a new one: notifications sent in
                // between are lost, so wake the waiters to read the store.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!("postgres `{place}`: listening for changes failed: {error}");
                    listener = None;
                }
            }
            if !Changes::bump(&changes) {
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
