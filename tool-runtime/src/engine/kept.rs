//! Active turns as this runtime's last step of each left them (closed by the step itself or by
//! the resume that ran its approved calls), with their sessions, so that
//! the next step starts from memory: reading and decoding the turn (with the previous step's
//! results, ten calls' worth for a step of ten) and its session costs more than the rest of a
//! step of reads.
//!
//! A copy is only ever a starting point, and it is checked before it is used: the step asks
//! the store whether the turn and the session are still at the copy's versions
//! ([`crate::Store::step_since`], both questions of [`crate::Store::turn_since`] and
//! [`crate::Store::session_since`] at once; on SQLite one hop to the connection and one
//! indexed lookup each, nothing decoded) and reads whichever is not. So a write by anybody else, in
//! this process (a cancel, an answer, a `complete`) or another one sharing the store (several
//! handles on one file, several instances on one Postgres), is seen by the next step exactly
//! as without the copy: the check happens where the read happened, and decides the same. A
//! copy is never trusted because this process "owns" the turn: nothing in a shared store says
//! it does.
//!
//! The check is sound because a version names one state of a record: every write of a turn or
//! session gives it the next version, and a record's id is never reused for another record
//! while this runtime lives (turn ids are fresh UUIDs). A session id can be reused once its
//! session is deleted, so the session's copy is kept with its turn, never on its own: a
//! session is deleted only after its turns, so while the turn is still at its copy's version
//! the session's row is the one the copy was taken from, and its version is comparable.
//!
//! What a check cannot see (a write landing between it and the step's own write) the step's
//! write refuses, as it always did: every write of a step is fenced by the turn's version,
//! so a stale copy ends in a conflict, never in a lost update or a step run twice.
//!
//! A copy is taken out while a step works on it (two steps never share one), and put back
//! only when the step's last write of the turn succeeded, with the version it gave. Copies of
//! turns that ended, wait or run are not kept: they take no step before another write.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::record::{SessionRecord, TurnRecord, TurnStatus};

/// How many turns are kept; beyond it, the oldest kept goes.
const CAPACITY: usize = 64;

/// A turn and its session as a step left them, each with its version.
pub(crate) struct KeptTurn {
    pub(crate) turn: TurnRecord,
    pub(crate) version: u64,
    pub(crate) session: SessionRecord,
    pub(crate) session_version: u64,
}

/// The copies, by turn id, each with its age.
#[derive(Default)]
pub(crate) struct KeptTurns {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    turns: HashMap<String, (KeptTurn, u64)>,
    /// Increases at every `keep`: the age of a copy.
    clock: u64,
}

impl KeptTurns {
    /// Takes out the copy of turn `id`, if one is kept.
    pub(crate) fn take(&self, id: &str) -> Option<KeptTurn> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.turns.is_empty() {
            return None;
        }
        kept.turns.remove(id).map(|(copy, _)| copy)
    }

    /// Keeps `copy`, unless its turn takes no steps or a newer copy is kept already.
    pub(crate) fn keep(&self, copy: KeptTurn) {
        if copy.turn.status != TurnStatus::Active || copy.turn.session_id != copy.session.id {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept
            .turns
            .get(&copy.turn.id)
            .is_some_and(|(held, _)| held.version >= copy.version)
        {
            return;
        }
        kept.clock += 1;
        let age = kept.clock;
        kept.turns.insert(copy.turn.id.clone(), (copy, age));
        if kept.turns.len() > CAPACITY {
            let oldest = kept
                .turns
                .iter()
                .min_by_key(|(_, (_, age))| *age)
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
    use toolwright_core::Caller;

    fn copy(id: &str, status: TurnStatus, version: u64) -> KeptTurn {
        KeptTurn {
            turn: TurnRecord {
                id: id.to_owned(),
                session_id: "s".to_owned(),
                current: None,
                caller: Caller::Model,
                structured_output: false,
                tainted_by: None,
                status,
                steps: 1,
                pending: None,
                last_step: None,
            },
            version,
            session: SessionRecord::new("s"),
            session_version: 1,
        }
    }

    #[test]
    fn a_copy_is_taken_out_once_and_a_newer_one_wins() {
        let kept = KeptTurns::default();
        kept.keep(copy("t", TurnStatus::Active, 3));
        kept.keep(copy("t", TurnStatus::Active, 2));
        assert_eq!(kept.take("t").map(|c| c.version), Some(3));
        assert!(kept.take("t").is_none(), "taken out: the next step reads");
    }

    #[test]
    fn turns_that_take_no_steps_are_not_kept() {
        let kept = KeptTurns::default();
        for status in [
            TurnStatus::Waiting,
            TurnStatus::Running,
            TurnStatus::Completed,
            TurnStatus::Cancelled,
        ] {
            kept.keep(copy("t", status, 2));
            assert!(kept.take("t").is_none(), "{status:?}");
        }
    }

    #[test]
    fn the_oldest_copy_goes_beyond_the_capacity() {
        let kept = KeptTurns::default();
        for n in 0..=CAPACITY {
            kept.keep(copy(&format!("t{n}"), TurnStatus::Active, 1));
        }
        assert!(kept.take("t0").is_none(), "the oldest went");
        assert!(kept.take(&format!("t{CAPACITY}")).is_some());
        assert!(kept.take("t1").is_some());
    }
}
