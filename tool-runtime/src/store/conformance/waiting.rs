//! The part `waiting`.

use std::collections::BTreeSet;

use super::fixtures::turn;
use super::part::{Part, part_ok};
use crate::record::TurnStatus;
use crate::store::Store;

/// `waiting_turns`: only turns with status `waiting`, least recently written first.
pub async fn waiting(store: &dyn Store) {
    let part = Part::new("waiting");
    let session = part.id("session");
    let ids: Vec<String> = (1..=7).map(|n| part.id(&format!("t{n}"))).collect();
    let statuses = [
        TurnStatus::Waiting,
        TurnStatus::Active,
        TurnStatus::Waiting,
        TurnStatus::Waiting,
        TurnStatus::Completed,
        TurnStatus::Cancelled,
        TurnStatus::Running,
    ];
    for (id, status) in ids.iter().zip(statuses) {
        part.ok(
            "inserting a turn",
            store.put_turn(&turn(id, &session, status, &[]), None).await,
        );
    }
    let (p, mine_ids) = (&part, &ids);
    let listed = move || async move {
        let all = p.ok("listing waiting turns", store.waiting_turns().await);
        let mine: Vec<String> = all.into_iter().filter(|id| mine_ids.contains(id)).collect();
        let distinct: BTreeSet<&String> = mine.iter().collect();
        assert_eq!(
            distinct.len(),
            mine.len(),
            "{p}: waiting_turns lists a turn twice: {mine:?}"
        );
        mine
    };
    let expect =
        |numbers: &[usize]| -> Vec<String> { numbers.iter().map(|n| ids[n - 1].clone()).collect() };

    assert_eq!(
        listed().await,
        expect(&[1, 3, 4]),
        "{part}: only waiting turns, in the order they were written"
    );

    let session = &session;
    let write = move |n: usize, status: TurnStatus, expected: u64| {
        let record = turn(&mine_ids[n - 1], session, status, &[]);
        async move { store.put_turn(&record, Some(expected)).await }
    };
    let running = |p: &'static str| async move {
        let all = part_ok(p, store.running_turns().await);
        all.into_iter()
            .filter(|id| mine_ids.contains(id))
            .collect::<Vec<String>>()
    };
    assert_eq!(
        running("listing running turns").await,
        expect(&[7]),
        "{part}: running_turns lists only turns claimed for execution"
    );
    part.ok("resuming t1", write(1, TurnStatus::Running, 1).await);
    assert_eq!(
        listed().await,
        expect(&[3, 4]),
        "{part}: a turn that left `waiting` is no longer listed"
    );
    assert_eq!(
        running("listing running turns").await,
        expect(&[7, 1]),
        "{part}: running_turns lists claimed turns, least recently written first"
    );

    part.ok("parking t2", write(2, TurnStatus::Waiting, 1).await);
    assert_eq!(
        listed().await,
        expect(&[3, 4, 2]),
        "{part}: a newly parked turn comes last"
    );

    part.ok(
        "rewriting t3, still waiting",
        write(3, TurnStatus::Waiting, 1).await,
    );
    assert_eq!(
        listed().await,
        expect(&[4, 2, 3]),
        "{part}: a rewritten waiting turn moves behind the others (least recently written first)"
    );

    part.refused(
        "a stale write of t4",
        write(4, TurnStatus::Waiting, 7).await,
    );
    assert_eq!(
        listed().await,
        expect(&[4, 2, 3]),
        "{part}: a refused write must not reorder the waiting turns"
    );
}
