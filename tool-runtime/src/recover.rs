//! Recovery after a crash: steps that were claimed for execution but never recorded.

use crate::record::TurnStatus;
use crate::runtime::{Runtime, RuntimeError, StepOutcome};

impl Runtime {
    /// Settles turns left `running` by a process that stopped while their approved calls ran:
    /// those calls end with a `RESULT_UNKNOWN` error (they are never run again, since their side
    /// effects may have happened), and each turn becomes active again so the model can decide
    /// what to do. Returns the recovered turn ids.
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
            match self.resume(session, turn, version, Vec::new()).await {
                Ok(outcome) => recovered.push((turn_id, outcome)),
                // Another process recovered or resumed it meanwhile.
                Err(RuntimeError::Store(crate::store::StoreError::Conflict(_))) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(recovered)
    }
}
