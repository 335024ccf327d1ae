//! The part `races`.

use futures_util::future::join_all;

use super::fixtures::turn;
use super::part::Part;
use crate::record::TurnStatus;
use crate::store::{Store, StoreError};

/// Concurrent read-modify-write of one turn through one store: every write lands exactly once.
///
/// Each writer reads the turn, increments `steps` and writes it back with the version it read,
/// retrying on a conflict. Each version must have exactly one winner and no increment be lost.
pub async fn races(store: &dyn Store) {
    const WRITERS: u64 = 8;
    const ROUNDS: u64 = 4;
    let part = Part::new("races");
    let id = part.id("turn");
    let mut record = turn(&id, &part.id("session"), TurnStatus::Running, &[]);
    record.steps = 0;
    part.ok(
        "inserting the contended turn",
        store.put_turn(&record, None).await,
    );

    let (p, id) = (&part, &id);
    let writer = move || async move {
        let mut won = Vec::new();
        for _ in 0..ROUNDS {
            loop {
                let (mut current, version) = p
                    .ok("reading the contended turn", store.turn(id).await)
                    .unwrap_or_else(|| panic!("{p}: the contended turn disappeared"));
                current.steps += 1;
                match store.put_turn(&current, Some(version)).await {
                    Ok(next) => {
                        assert_eq!(next, version + 1, "{p}: a write stores version + 1");
                        won.push(next);
                        break;
                    }
                    Err(StoreError::Conflict(_)) => continue,
                    Err(error) => panic!("{p}: a contended write failed: {error}"),
                }
            }
        }
        won
    };
    let mut won: Vec<u64> = join_all((0..WRITERS).map(|_| writer()))
        .await
        .into_iter()
        .flatten()
        .collect();
    won.sort_unstable();
    let every: Vec<u64> = (2..=WRITERS * ROUNDS + 1).collect();
    assert_eq!(
        won, every,
        "{part}: each version must be won by exactly one writer"
    );
    let (last, version) = part
        .ok("reading the contended turn", store.turn(id).await)
        .unwrap_or_else(|| panic!("{part}: the contended turn disappeared"));
    assert_eq!(
        (u64::from(last.steps), version),
        (WRITERS * ROUNDS, WRITERS * ROUNDS + 1),
        "{part}: no increment may be lost"
    );
}
