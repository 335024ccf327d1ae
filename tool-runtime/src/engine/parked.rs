//! Parked turns as the answer path last wrote them, so that the next answer to the same turn
//! starts from memory instead of reading and decoding the whole step again: with a step of
//! 1,000 parked calls, that read would make every answer cost the size of the step.
//!
//! A copy is only ever a starting point. An answer records its patch at the copy's version
//! ([`crate::Store::settle_request`]); if anything else wrote the turn since (another answer,
//! another instance, a revoke), the store refuses it and the answer starts again from the
//! store. A copy is taken out while an answer works on it, so two answers never share one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::record::TurnRecord;

/// How many parked turns are kept; beyond it, the oldest kept goes.
const CAPACITY: usize = 32;

/// The copies, by turn id, each with its version and when it was kept.
#[derive(Default)]
pub(crate) struct ParkedTurns {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    turns: HashMap<String, (TurnRecord, u64, u64)>,
    /// Increases at every `keep`: the age of a copy.
    clock: u64,
}

impl ParkedTurns {
    /// Takes out the copy of turn `id`, if one is kept.
    pub(crate) fn take(&self, id: &str) -> Option<(TurnRecord, u64)> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.turns
            .remove(id)
            .map(|(turn, version, _)| (turn, version))
    }

    /// Keeps `turn` as written at `version`, unless a newer copy is kept already.
    pub(crate) fn keep(&self, turn: TurnRecord, version: u64) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept
            .turns
            .get(&turn.id)
            .is_some_and(|&(_, held, _)| held >= version)
        {
            return;
        }
        kept.clock += 1;
        let age = kept.clock;
        kept.turns.insert(turn.id.clone(), (turn, version, age));
        if kept.turns.len() > CAPACITY {
            let oldest = kept
                .turns
                .iter()
                .min_by_key(|(_, (_, _, age))| *age)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                kept.turns.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TurnStatus;
    use toolwright_core::Caller;

    fn turn(id: &str) -> TurnRecord {
        TurnRecord {
            id: id.to_owned(),
            session_id: "s".to_owned(),
            current: None,
            caller: Caller::Model,
            structured_output: false,
            tainted_by: None,
            status: TurnStatus::Waiting,
            steps: 1,
            pending: None,
            last_step: None,
        }
    }

    #[test]
    fn a_copy_is_taken_out_once_and_a_newer_one_wins() {
        let parked = ParkedTurns::default();
        parked.keep(turn("t"), 3);
        parked.keep(turn("t"), 2);
        assert_eq!(
            parked.take("t").map(|(_, v)| v),
            Some(3),
            "the older copy is ignored"
        );
        assert!(
            parked.take("t").is_none(),
            "taken out: the next answer reads the store"
        );
    }

    #[test]
    fn the_oldest_copy_goes_beyond_the_capacity() {
        let parked = ParkedTurns::default();
        for n in 0..=CAPACITY {
            parked.keep(turn(&format!("t{n}")), 1);
        }
        assert!(parked.take("t0").is_none(), "the oldest went");
        assert!(parked.take(&format!("t{CAPACITY}")).is_some());
        assert!(parked.take("t1").is_some());
    }
}
