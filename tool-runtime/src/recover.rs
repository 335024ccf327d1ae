//! Recovery after a crash: steps that were claimed for execution but never recorded.

use crate::call::StepOutcome;
use crate::error::RuntimeError;
use crate::record::{Approver, CallState, TurnStatus};
use crate::runtime::Runtime;
use crate::store::{Claim, LeaseKind, StoreError};

impl Runtime {
    /// Settles turns left `running` by a process that stopped while their calls ran. A `durable`
    /// call runs again from its journal: steps it recorded return their values without running,
    /// and it continues at the first unrecorded step. Any other interrupted call ends with a
    /// `RESULT_UNKNOWN` error (it is never run again, since its side effects may have happened).
    /// Each turn becomes active again so the model can decide what to do. Returns the recovered
    /// turns with the outcome of their step.
    ///
    /// Workflow tasks left `running` (or `cancelling`) run again from their journals, on tasks
    /// of their own.
    ///
    /// Call it at startup when this process is the only one using the store. It takes every
    /// running piece of work over whatever its lease says, so with several instances on one
    /// database it would settle calls still running on a sibling: there, use
    /// [`Runtime::run_worker`] (or [`Runtime::take_over_expired`]), which waits for leases to
    /// expire.
    pub async fn recover(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        let turns = self.0.store.running_turns().await?;
        let recovered = self.recover_turns(turns, false).await?;
        // Workflow tasks a stopped process was running go on from their journals.
        self.recover_tasks(None, false).await?;
        Ok(recovered)
    }

    /// Takes over the running work of instances that stopped renewing their leases (killed,
    /// frozen, cut off from the database) and finishes it as [`Runtime::recover`] does: a
    /// `durable` call runs again from its journal, any other interrupted call ends with
    /// `RESULT_UNKNOWN`, tasks run again from their journals. Work whose lease is still live is
    /// left to its holder, so this is safe to call while other instances run; each piece of
    /// work is taken over by exactly one instance (the claim is a versioned write), and the
    /// former holder's later writes are refused ([`crate::StoreError::Fenced`]).
    ///
    /// [`Runtime::run_worker`] calls it periodically. Returns the turns taken over with the
    /// outcome of their step.
    pub async fn take_over_expired(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        let expired = self.0.store.expired_leases().await?;
        let (turns, tasks): (Vec<_>, Vec<_>) = expired
            .into_iter()
            .partition(|(kind, _)| *kind == LeaseKind::Turn);
        let tasks: Vec<String> = tasks.into_iter().map(|(_, id)| id).collect();
        if !tasks.is_empty()
            && let Err(error) = self.recover_tasks(Some(tasks), true).await
        {
            // The turns are taken over all the same.
            tracing::warn!("taking over expired tasks failed: {error}");
        }
        let turns = turns.into_iter().map(|(_, id)| id).collect();
        self.recover_turns(turns, true).await
    }

    /// Claims each of `turns` still `running` (for a take-over only when its lease expired) and
    /// settles its interrupted step.
    async fn recover_turns(
        &self,
        turns: Vec<String>,
        take_over: bool,
    ) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        let mut recovered = Vec::new();
        // Take-overs resume concurrently: one long durable call must not hold up the others.
        let mut spawned = Vec::new();
        for turn_id in turns {
            if self
                .0
                .active
                .lock()
                .is_ok_and(|active| active.contains_key(&turn_id))
            {
                // Its calls run in this process.
                continue;
            }
            let (turn, version) = match self.0.store.turn(&turn_id).await {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                // One record that cannot be read must not stop the take-over of the rest.
                Err(error) if take_over => {
                    tracing::warn!(turn_id, "cannot take over a running turn: {error}");
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            if turn.status != TurnStatus::Running {
                continue;
            }
            let Some((session, _)) = self.0.store.session(&turn.session_id).await? else {
                if take_over {
                    // One broken record must not stop the take-over of the rest.
                    tracing::warn!(
                        turn_id,
                        "cannot take over a running turn: its session `{}` is gone",
                        turn.session_id
                    );
                    continue;
                }
                return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
            };
            // Durable calls run again from their journals (recorded steps return their values
            // without running); any other interrupted call's result is unknown.
            let durable: Vec<(String, Option<Approver>)> = turn
                .pending
                .iter()
                .flat_map(|step| &step.calls)
                .filter(|call| {
                    call.state == CallState::Running
                        && self
                            .registry()
                            .get(&call.tool)
                            .is_some_and(|t| t.kind().is_journaled())
                })
                .map(|call| (call.call_id.clone(), None))
                .collect();
            let token = tokio_util::sync::CancellationToken::new();
            let running = self.track(&turn_id, &token);
            let claim = if take_over {
                Claim::TakeOver {
                    owner: &self.0.options.instance,
                    ttl: self.0.options.lease,
                }
            } else {
                self.take()
            };
            // The claim gives the turn a new fencing token: whatever the former holder still
            // writes is refused.
            let (version, lease) = match self.0.store.write_turn(&turn, Some(version), claim).await
            {
                Ok(written) => {
                    running.hold(written.lease.clone());
                    (written.version, written.lease)
                }
                // Another instance recovered or resumed it meanwhile, or its lease is live.
                Err(StoreError::Conflict(_)) => continue,
                Err(error) if take_over => {
                    tracing::warn!(turn_id, "taking over a running turn failed: {error}");
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            if take_over {
                let runtime = self.clone();
                spawned.push(tokio::spawn(async move {
                    let _running = running;
                    let outcome = runtime
                        .resume(session, turn, version, durable, token, lease)
                        .await;
                    (turn_id, outcome)
                }));
                continue;
            }
            match self
                .resume(session, turn, version, durable, token, lease)
                .await
            {
                Ok(outcome) => recovered.push((turn_id, outcome)),
                Err(RuntimeError::Store(StoreError::Conflict(_) | StoreError::Fenced { .. })) => {}
                Err(error) => return Err(error),
            }
        }
        for joined in futures_util::future::join_all(spawned).await {
            match joined {
                Ok((turn_id, Ok(outcome))) => recovered.push((turn_id, outcome)),
                Ok((
                    _,
                    Err(RuntimeError::Store(StoreError::Conflict(_) | StoreError::Fenced { .. })),
                )) => {}
                Ok((turn_id, Err(error))) => {
                    tracing::warn!(turn_id, "taking over a running turn failed: {error}");
                }
                Err(error) => tracing::warn!("a take-over task failed: {error}"),
            }
        }
        Ok(recovered)
    }
}

impl Runtime {
    /// Wakes workflow calls whose durable sleep is over (by [`crate::Options::clock`]): each runs
    /// again, replaying its journal past the sleep. Returns the turns whose step went on.
    ///
    /// Timers live in the store, so they fire after a restart too; run this periodically (see
    /// [`Runtime::run_timers`]).
    ///
    /// Workflow tasks whose sleep is over run again too, on tasks of their own (their results
    /// arrive as `task.result` events and through [`crate::Turn::task_results`]).
    pub async fn wake_due(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        let now = self.0.options.clock.now_ms();
        self.wake_tasks(now).await?;
        let mut woken = Vec::new();
        for turn_id in self.0.store.due_turns(now).await? {
            loop {
                let Some((mut turn, version)) = self.0.store.turn(&turn_id).await? else {
                    break;
                };
                if !turn.wake_sleepers(now) {
                    break;
                }
                let claimed = turn.claim_step();
                let token = tokio_util::sync::CancellationToken::new();
                let running = self.track(&turn_id, &token);
                let claim = if turn.status == TurnStatus::Running {
                    self.take()
                } else {
                    Claim::None
                };
                let (version, lease) =
                    match self.0.store.write_turn(&turn, Some(version), claim).await {
                        Ok(written) => {
                            running.hold(written.lease.clone());
                            (written.version, written.lease)
                        }
                        Err(StoreError::Conflict(_)) => continue,
                        Err(error) => return Err(error.into()),
                    };
                if turn.status == TurnStatus::Running {
                    let Some((session, _)) = self.0.store.session(&turn.session_id).await? else {
                        return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
                    };
                    let outcome = self
                        .resume(session, turn, version, claimed, token, lease)
                        .await?;
                    woken.push((turn_id.clone(), outcome));
                }
                break;
            }
        }
        Ok(woken)
    }

    /// Calls [`Runtime::wake_due`] every `every` on a task of its own, until the returned handle
    /// is aborted. One task serves every sleeping run; a sleeping run itself holds none.
    pub fn run_timers(&self, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let runtime = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            loop {
                interval.tick().await;
                if let Err(error) = runtime.wake_due().await {
                    tracing::warn!("waking due timers failed: {error}");
                }
            }
        })
    }

    /// Runs this instance's share of the work several instances on one database share, on a
    /// task of its own until the returned handle is aborted:
    ///
    /// - takes over running work whose lease expired ([`Runtime::take_over_expired`]), so the
    ///   work of an instance that died or froze is finished by another;
    /// - wakes durable timers that are due ([`Runtime::wake_due`]);
    /// - renews this instance's leases (every third of [`crate::Options::lease`]).
    ///
    /// It looks again whenever the store reports a change from another process (Postgres
    /// `LISTEN/NOTIFY`) and every `poll` in any case, so nothing depends on a notification
    /// arriving. With one instance it replaces [`Runtime::run_timers`].
    pub fn run_worker(&self, poll: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let runtime = self.clone();
        runtime.ensure_heartbeat();
        tokio::spawn(async move {
            // Two loops, so that a long take-over (a durable call running again) does not hold
            // up due timers, nor the other way round.
            let take_over = async {
                loop {
                    if let Err(error) = runtime.take_over_expired().await {
                        tracing::warn!("taking over expired work failed: {error}");
                    }
                    runtime.0.store.changed(poll).await;
                }
            };
            let timers = async {
                loop {
                    if let Err(error) = runtime.wake_due().await {
                        tracing::warn!("waking due timers failed: {error}");
                    }
                    runtime.0.store.changed(poll).await;
                }
            };
            tokio::join!(take_over, timers);
        })
    }
}
