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
        Ok(recovered)
    }
}
