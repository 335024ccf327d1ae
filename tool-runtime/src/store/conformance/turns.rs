//! The part `turns`.

use super::fixtures::turn;
use super::part::Part;
use crate::record::TurnStatus;
use crate::store::Store;

/// Turns: insert, read, versioned updates (status changes included), refused writes.
pub async fn turns(store: &dyn Store) {
    let part = Part::new("turns");
    let id = part.id("turn");
    let session = part.id("session");
    let p = &part;
    let read = move |id: String| async move { p.ok("reading the turn", store.turn(&id).await) };

    assert!(
        read(id.clone()).await.is_none(),
        "{part}: a turn never written must read as None"
    );
    part.refused(
        "a versioned write of a turn that does not exist",
        store
            .put_turn(&turn(&id, &session, TurnStatus::Active, &[]), Some(1))
            .await,
    );
    assert!(
        read(id.clone()).await.is_none(),
        "{part}: a refused versioned write must not create the turn"
    );

    let mut record = turn(&id, &session, TurnStatus::Active, &[]);
    let version = part.ok("inserting a turn", store.put_turn(&record, None).await);
    assert_eq!(version, 1, "{part}: an inserted turn has version 1");
    assert_eq!(
        read(id.clone()).await,
        Some((record.clone(), 1)),
        "{part}: reading an inserted turn"
    );

    let statuses = [
        TurnStatus::Waiting,
        TurnStatus::Running,
        TurnStatus::Completed,
    ];
    for (expected, status) in (1..).zip(statuses) {
        record.status = status;
        record.steps += 1;
        let version = part.ok(
            "updating a turn with its current version",
            store.put_turn(&record, Some(expected)).await,
        );
        assert_eq!(
            version,
            expected + 1,
            "{part}: a write with expected = {expected} stores version {}",
            expected + 1
        );
        assert_eq!(
            read(id.clone()).await,
            Some((record.clone(), expected + 1)),
            "{part}: reading a turn updated to {status:?}"
        );
    }

    let mut stale = record.clone();
    stale.status = TurnStatus::Cancelled;
    part.refused(
        "a turn write with a stale version",
        store.put_turn(&stale, Some(3)).await,
    );
    part.refused(
        "a turn write with a version from the future",
        store.put_turn(&stale, Some(9)).await,
    );
    part.refused(
        "a turn write with the largest version",
        store.put_turn(&stale, Some(u64::MAX)).await,
    );
    part.refused(
        "inserting (expected = None) a turn that exists",
        store.put_turn(&stale, None).await,
    );
    assert_eq!(
        read(id.clone()).await,
        Some((record.clone(), 4)),
        "{part}: refused writes must leave the turn and its version unchanged"
    );

    let since = |known: u64| {
        let id = id.clone();
        async move {
            p.ok(
                "reading the turn since a version",
                store.turn_since(&id, known).await,
            )
        }
    };
    assert_eq!(
        since(4).await,
        Some((None, 4)),
        "{part}: a turn still at the version the reader holds"
    );
    assert_eq!(
        since(3).await,
        Some((Some(record), 4)),
        "{part}: a turn at a newer version than the reader holds"
    );
    assert_eq!(
        p.ok(
            "reading a missing turn since a version",
            store.turn_since(&part.id("missing"), 1).await
        ),
        None,
        "{part}: a turn never written, read since a version"
    );
}
