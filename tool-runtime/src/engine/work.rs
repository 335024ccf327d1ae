//! What runs in this process and under which lease: the turns whose calls run here and the
//! workflow tasks whose bodies run here, with their cancellation tokens, and the heartbeat that
//! renews their leases.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::record::TurnStatus;
use crate::store::{Lease, LeaseKind, Store};

/// Work running in this process: a turn's calls or a task's body.
struct Running {
    /// Which registration put it there (a later one for the same id replaces it).
    registration: u64,
    /// Fired to cancel the work.
    token: CancellationToken,
    /// A turn's: fired to steer its step (a child of `token`; the running plain and `execute`
    /// calls take theirs from it). A task's: `token` again (tasks are not steered).
    steer: CancellationToken,
    /// The claim it runs under, once the claiming write returned it, with when it was taken.
    lease: Option<(Lease, Instant)>,
    /// A `serve` task's: the cancellation of each call its body received.
    calls: Arc<CallTokens>,
}

/// The cancellation of each call a `serve` task's body received, by the call's index: a call
/// cancelled on its own leaves the task serving.
#[derive(Debug, Default)]
pub(crate) struct CallTokens(Mutex<HashMap<usize, CancellationToken>>);

impl CallTokens {
    /// The token of call `index`: a child of `parent` (cancelling the task cancels its calls),
    /// made on first use, fired at once when `cancelled`.
    pub(crate) fn token(
        &self,
        index: usize,
        parent: &CancellationToken,
        cancelled: bool,
    ) -> CancellationToken {
        let Ok(mut tokens) = self.0.lock() else {
            return parent.child_token();
        };
        let token = tokens
            .entry(index)
            .or_insert_with(|| parent.child_token())
            .clone();
        if cancelled {
            token.cancel();
        }
        token
    }

    /// Forgets call `index`'s token once the call has its result (a replay makes it again).
    pub(crate) fn forget(&self, index: usize) {
        if let Ok(mut tokens) = self.0.lock() {
            tokens.remove(&index);
        }
    }

    /// Fires call `index`'s token; a call the body has not received yet gets a fired one.
    pub(crate) fn cancel(&self, index: usize) {
        if let Ok(mut tokens) = self.0.lock() {
            tokens.entry(index).or_default().cancel();
        }
    }
}

/// The running work of this instance. Cheap to share: the heartbeat and the guards of running
/// work hold it.
pub(crate) struct WorkTracker {
    store: Arc<dyn Store>,
    /// This instance's name in the store's leases.
    instance: String,
    /// How long a claim lasts unless renewed.
    lease: Duration,
    /// Turns whose calls run in this process now.
    turns: Mutex<HashMap<String, Running>>,
    /// Workflow tasks whose bodies run in this process now.
    tasks: Mutex<HashMap<String, Running>>,
    registrations: AtomicU64,
    /// Whether the task renewing this instance's leases was started.
    heartbeat: AtomicBool,
    /// Notified whenever this process records something about a task (a result, an end).
    task_changed: Notify,
}

impl std::fmt::Debug for WorkTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkTracker")
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// Removes a turn's token from the tracker when its calls are done; only its own registration,
/// never a later one for the same turn.
pub(crate) struct TrackedTurn {
    work: Arc<WorkTracker>,
    turn_id: String,
    registration: u64,
    token: CancellationToken,
    steer: CancellationToken,
}

/// Removes a task's entry from the tracker when its runner stops; only its own registration.
pub(crate) struct TrackedTask {
    work: Arc<WorkTracker>,
    task_id: String,
    registration: u64,
}

impl WorkTracker {
    pub(crate) fn new(store: Arc<dyn Store>, instance: String, lease: Duration) -> Arc<Self> {
        Arc::new(WorkTracker {
            store,
            instance,
            lease,
            turns: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            registrations: AtomicU64::new(0),
            heartbeat: AtomicBool::new(false),
            task_changed: Notify::new(),
        })
    }

    /// Registers `token` as the cancellation of turn `turn_id`'s running calls until the
    /// returned guard drops.
    pub(crate) fn track_turn(
        self: &Arc<Self>,
        turn_id: &str,
        token: &CancellationToken,
    ) -> TrackedTurn {
        let registration = self.registrations.fetch_add(1, Ordering::Relaxed);
        let steer = token.child_token();
        if let Ok(mut turns) = self.turns.lock()
            // Calls running here under a claim keep their entry: a competing claim of the same
            // turn loses its write, and if it wins, `hold` puts its own entry back.
            && turns.get(turn_id).is_none_or(|r| r.lease.is_none())
        {
            turns.insert(
                turn_id.to_owned(),
                Running {
                    registration,
                    token: token.clone(),
                    steer: steer.clone(),
                    lease: None,
                    calls: Arc::default(),
                },
            );
        }
        TrackedTurn {
            work: Arc::clone(self),
            turn_id: turn_id.to_owned(),
            registration,
            token: token.clone(),
            steer,
        }
    }

    /// Registers the runner of task `task_id`, cancelled by `token`, under `lease`, until the
    /// returned guard drops.
    pub(crate) fn track_task(
        self: &Arc<Self>,
        task_id: &str,
        token: &CancellationToken,
        lease: Option<Lease>,
        calls: &Arc<CallTokens>,
    ) -> TrackedTask {
        let registration = self.registrations.fetch_add(1, Ordering::Relaxed);
        let leased = lease.is_some();
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.insert(
                task_id.to_owned(),
                Running {
                    registration,
                    token: token.clone(),
                    steer: token.clone(),
                    lease: lease.map(|lease| (lease, Instant::now())),
                    calls: Arc::clone(calls),
                },
            );
        }
        if leased {
            self.ensure_heartbeat();
        }
        TrackedTask {
            work: Arc::clone(self),
            task_id: task_id.to_owned(),
            registration,
        }
    }

    /// Fires the token of turn `turn_id`'s calls running in this process, if any.
    pub(crate) fn cancel_turn(&self, turn_id: &str) {
        if let Ok(turns) = self.turns.lock()
            && let Some(running) = turns.get(turn_id)
        {
            running.token.cancel();
        }
    }

    /// Fires the steering token of turn `turn_id`'s step running in this process: its running
    /// plain and `execute` calls are interrupted. Whether a step of the turn runs here.
    pub(crate) fn steer_turn(&self, turn_id: &str) -> bool {
        let Ok(turns) = self.turns.lock() else {
            return false;
        };
        let Some(running) = turns.get(turn_id) else {
            return false;
        };
        running.steer.cancel();
        true
    }

    /// Whether turn `turn_id`'s calls run in this process.
    pub(crate) fn runs_turn(&self, turn_id: &str) -> bool {
        self.turns
            .lock()
            .is_ok_and(|turns| turns.contains_key(turn_id))
    }

    /// Whether task `task_id`'s body runs in this process.
    pub(crate) fn runs_task(&self, task_id: &str) -> bool {
        self.tasks
            .lock()
            .is_ok_and(|tasks| tasks.contains_key(task_id))
    }

    /// The token of task `task_id`'s body running in this process, if it does.
    pub(crate) fn task_token(&self, task_id: &str) -> Option<CancellationToken> {
        self.tasks
            .lock()
            .ok()
            .and_then(|tasks| tasks.get(task_id).map(|r| r.token.clone()))
    }

    /// The call tokens of task `task_id`'s body running in this process, if it does.
    pub(crate) fn task_calls(&self, task_id: &str) -> Option<Arc<CallTokens>> {
        self.tasks
            .lock()
            .ok()
            .and_then(|tasks| tasks.get(task_id).map(|r| Arc::clone(&r.calls)))
    }

    /// Notified whenever this process records something about a task.
    pub(crate) fn task_changed(&self) -> &Notify {
        &self.task_changed
    }

    /// Starts renewing this instance's leases (once): every third of the lease, one store call
    /// extends the leases of the work running here. Work whose lease another instance took
    /// over meanwhile has its token fired (its writes are fenced anyway); when renewals keep
    /// failing for two thirds of the lease, every piece of leased work here is cancelled, since
    /// other instances will soon take it over.
    pub(crate) fn ensure_heartbeat(self: &Arc<Self>) {
        if self.heartbeat.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak: Weak<WorkTracker> = Arc::downgrade(self);
        let every = (self.lease / 3).max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut renewed_at = Instant::now();
            loop {
                tokio::time::sleep(every).await;
                let Some(work) = weak.upgrade() else {
                    return;
                };
                work.renew(&mut renewed_at).await;
            }
        });
    }

    /// The leases of the work running here, with when each was taken.
    fn held_leases(&self) -> Vec<(Lease, Instant)> {
        let mut held = Vec::new();
        for map in [&self.turns, &self.tasks] {
            if let Ok(running) = map.lock() {
                held.extend(running.values().filter_map(|w| w.lease.clone()));
            }
        }
        held
    }

    /// Fires the token of the work running here under `lease`, if it still does.
    fn cancel_leased(&self, lease: &Lease) {
        let map = match lease.kind {
            LeaseKind::Turn => &self.turns,
            LeaseKind::Task => &self.tasks,
        };
        if let Ok(running) = map.lock()
            && let Some(work) = running.get(&lease.id)
            && work.lease.as_ref().is_some_and(|(l, _)| l == lease)
        {
            work.token.cancel();
        }
    }

    /// One renewal round of [`WorkTracker::ensure_heartbeat`].
    async fn renew(&self, renewed_at: &mut Instant) {
        let started = Instant::now();
        let held = self.held_leases();
        if held.is_empty() {
            *renewed_at = started;
            return;
        }
        let leases: Vec<Lease> = held.iter().map(|(l, _)| l.clone()).collect();
        let lease = self.lease;
        let renewal = tokio::time::timeout(lease / 3, self.store.renew_leases(&leases, lease));
        let renewed = match renewal.await {
            Ok(Ok(renewed)) => renewed,
            failed => {
                let error = match failed {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no answer within {:?}", lease / 3),
                };
                self.renewal_failed(&held, started.duration_since(*renewed_at), &error);
                return;
            }
        };
        *renewed_at = started;
        for (lease, since) in held {
            // Claims taken while the renewal ran may be missing from its answer.
            if since >= started || renewed.contains(&lease) {
                continue;
            }
            // Missing: taken over, or the holder's own write just ended the running state.
            // Only the first is a loss.
            if self.still_running(&lease).await {
                tracing::warn!(
                    "instance `{}` lost its lease on {} `{}` (token {}): another instance took the work over; cancelling it here",
                    self.instance,
                    lease.kind,
                    lease.id,
                    lease.token
                );
                self.cancel_leased(&lease);
            }
        }
    }

    /// A renewal failed with `error`, `unrenewed` after the last one that worked: past two
    /// thirds of the lease, other instances may take the work over, so it is cancelled here.
    fn renewal_failed(&self, held: &[(Lease, Instant)], unrenewed: Duration, error: &str) {
        if unrenewed >= self.lease * 2 / 3 {
            tracing::error!(
                "instance `{}` could not renew its leases for {unrenewed:?} ({error}); other instances may take its work over, so it cancels the work running here",
                self.instance,
            );
            for (lease, _) in held {
                self.cancel_leased(lease);
            }
        } else {
            tracing::warn!(
                "renewing the leases of instance `{}` failed: {error}",
                self.instance
            );
        }
    }

    /// Whether the record `lease` covers is still in the state its lease was taken for.
    async fn still_running(&self, lease: &Lease) -> bool {
        match lease.kind {
            LeaseKind::Turn => self
                .store
                .turn(&lease.id)
                .await
                .ok()
                .flatten()
                .is_some_and(|(t, _)| t.status == TurnStatus::Running),
            LeaseKind::Task => self
                .store
                .task(&lease.id)
                .await
                .ok()
                .flatten()
                .is_some_and(|(t, _)| t.is_leased()),
        }
    }
}

impl TrackedTurn {
    /// The token that steering the turn fires: the parent of its running plain and `execute`
    /// calls' tokens, a child of the turn's.
    pub(crate) fn steer_token(&self) -> &CancellationToken {
        &self.steer
    }

    /// Records the lease the claiming write took for the tracked turn. The claiming write won:
    /// whatever entry a competing registration left, the turn's calls now run here under this
    /// one.
    pub(crate) fn hold(&self, lease: Option<Lease>) {
        let Some(lease) = lease else { return };
        if let Ok(mut turns) = self.work.turns.lock() {
            turns.insert(
                self.turn_id.clone(),
                Running {
                    registration: self.registration,
                    token: self.token.clone(),
                    steer: self.steer.clone(),
                    lease: Some((lease, Instant::now())),
                    calls: Arc::default(),
                },
            );
        }
        self.work.ensure_heartbeat();
    }
}

impl Drop for TrackedTurn {
    fn drop(&mut self) {
        if let Ok(mut turns) = self.work.turns.lock()
            && turns
                .get(&self.turn_id)
                .is_some_and(|r| r.registration == self.registration)
        {
            turns.remove(&self.turn_id);
        }
    }
}

impl Drop for TrackedTask {
    fn drop(&mut self) {
        if let Ok(mut tasks) = self.work.tasks.lock()
            && tasks
                .get(&self.task_id)
                .is_some_and(|r| r.registration == self.registration)
        {
            tasks.remove(&self.task_id);
        }
        self.work.task_changed.notify_waiters();
    }
}
