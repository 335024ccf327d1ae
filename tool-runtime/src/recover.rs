//! Recovery after a crash: steps that were claimed for execution but never recorded.

use crate::record::{Approver, CallState, TurnStatus};
use crate::runtime::{Runtime, RuntimeError, StepOutcome};

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
    /// Call it at startup when this process is the only one using the store; with several
    /// instances on one database, a claimed step may still be running elsewhere.
    pub async fn recover(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        let mut recovered = Vec::new();
        for turn_id in self.0.store.running_turns().await? {
            let Some((turn, version)) = self.0.store.turn(&turn_id).await? else {
                continue;
            };
            if turn.status != TurnStatus::Running {
                continue;
            }
            let Some((session, _)) = self.0.store.session(&turn.session_id).await? else {
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
                            .is_some_and(|t| t.descriptor().kind.is_journaled())
                })
                .map(|call| (call.call_id.clone(), None))
                .collect();
            let token = tokio_util::sync::CancellationToken::new();
            let _running = self.track(&turn_id, &token);
            match self.resume(session, turn, version, durable, token).await {
                Ok(outcome) => recovered.push((turn_id, outcome)),
                // Another process recovered or resumed it meanwhile.
                Err(RuntimeError::Store(crate::store::StoreError::Conflict(_))) => {}
                Err(error) => return Err(error),
            }
        }
        // Workflow tasks a stopped process was running go on from their journals.
        self.recover_tasks().await?;
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
        for turn_id in self.0.store.waiting_turns().await? {
            loop {
                let Some((mut turn, version)) = self.0.store.turn(&turn_id).await? else {
                    break;
                };
                if turn.status != TurnStatus::Waiting {
                    break;
                }
                let Some(step) = turn.pending.as_mut() else {
                    break;
                };
                let mut due = false;
                for call in &mut step.calls {
                    if let CallState::Sleeping { until_ms } = call.state
                        && until_ms <= now
                    {
                        call.state = CallState::Ready { approved_by: None };
                        due = true;
                    }
                }
                if !due {
                    break;
                }
                let claimed = crate::pipeline::claim_step(&mut turn);
                let token = tokio_util::sync::CancellationToken::new();
                let _running = self.track(&turn_id, &token);
                let version = match self.0.store.put_turn(&turn, Some(version)).await {
                    Ok(version) => version,
                    Err(crate::store::StoreError::Conflict(_)) => continue,
                    Err(error) => return Err(error.into()),
                };
                if turn.status == TurnStatus::Running {
                    let Some((session, _)) = self.0.store.session(&turn.session_id).await? else {
                        return Err(RuntimeError::UnknownSession(turn.session_id.clone()));
                    };
                    let outcome = self.resume(session, turn, version, claimed, token).await?;
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
}
