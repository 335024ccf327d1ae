//! The part `sessions`.

use serde_json::json;

use super::fixtures::turn;
use super::part::Part;
use crate::record::{SessionRecord, TurnStatus};
use crate::store::{StepSince, Store};

/// Sessions: insert, read, versioned updates, refused stale and duplicate writes.
pub async fn sessions(store: &dyn Store) {
    let part = Part::new("sessions");
    let id = part.id("session");
    let p = &part;
    let read =
        move |id: String| async move { p.ok("reading the session", store.session(&id).await) };

    assert!(
        read(id.clone()).await.is_none(),
        "{part}: a session never written must read as None"
    );
    part.refused(
        "a versioned write of a session that does not exist",
        store.put_session(&SessionRecord::new(&id), Some(1)).await,
    );
    assert!(
        read(id.clone()).await.is_none(),
        "{part}: a refused versioned write must not create the session"
    );

    let mut record = SessionRecord::new(&id);
    let version = part.ok(
        "inserting a session",
        store.put_session(&record, None).await,
    );
    assert_eq!(version, 1, "{part}: an inserted session has version 1");
    assert_eq!(
        read(id.clone()).await,
        Some((record.clone(), 1)),
        "{part}: reading an inserted session"
    );

    for expected in 1..=3 {
        record.state.insert("count".into(), json!(expected));
        let version = part.ok(
            "updating a session with its current version",
            store.put_session(&record, Some(expected)).await,
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
            "{part}: reading an updated session"
        );
        assert_eq!(
            part.ok(
                "reading the session since the version before",
                store.session_since(&id, expected).await
            ),
            Some((Some(record.clone()), expected + 1)),
            "{part}: a session at a newer version than the reader holds"
        );
        assert_eq!(
            part.ok(
                "reading the session since its version",
                store.session_since(&id, expected + 1).await
            ),
            Some((None, expected + 1)),
            "{part}: a session still at the version the reader holds"
        );
    }
    assert_eq!(
        part.ok(
            "reading a missing session since a version",
            store.session_since(&part.id("missing"), 1).await
        ),
        None,
        "{part}: a session never written, read since a version"
    );

    let mut stale = record.clone();
    stale.interactive = false;
    part.refused(
        "a session write with a stale version",
        store.put_session(&stale, Some(2)).await,
    );
    part.refused(
        "a session write with a version from the future",
        store.put_session(&stale, Some(5)).await,
    );
    part.refused(
        "a session write with the largest version",
        store.put_session(&stale, Some(u64::MAX)).await,
    );
    part.refused(
        "inserting (expected = None) a session that exists",
        store.put_session(&stale, None).await,
    );
    assert_eq!(
        read(id.clone()).await,
        Some((record.clone(), 4)),
        "{part}: refused writes must leave the session and its version unchanged"
    );
    step_since(store, &part, record).await;

    let other = part.id("other");
    part.ok(
        "inserting a second session",
        store.put_session(&SessionRecord::new(&other), None).await,
    );
    assert_eq!(
        read(other).await.map(|(_, version)| version),
        Some(1),
        "{part}: versions are per session"
    );
}

/// [`Store::step_since`] agrees with [`Store::turn_since`] and [`Store::session_since`]:
/// `session` is stored at version 4; a turn of it is written here at versions 1 and 2.
async fn step_since(store: &dyn Store, part: &Part, session: SessionRecord) {
    let turn_id = part.id("stepped");
    let mut record = turn(&turn_id, &session.id, TurnStatus::Active, &[]);
    part.ok("inserting a turn", store.put_turn(&record, None).await);
    let since = |turn, session| both_since(store, part, turn, session);
    assert_eq!(
        since((&turn_id, 1), (&session.id, 4)).await,
        (Some((None, 1)), Some((None, 4))),
        "{part}: a turn and session both still at the versions the reader holds"
    );
    record.status = TurnStatus::Waiting;
    part.ok("updating the turn", store.put_turn(&record, Some(1)).await);
    assert_eq!(
        since((&turn_id, 1), (&session.id, 4)).await,
        (Some((Some(record.clone()), 2)), Some((None, 4))),
        "{part}: a turn that moved on beside a session that did not"
    );
    assert_eq!(
        since((&turn_id, 2), (&session.id, 3)).await,
        (Some((None, 2)), Some((Some(session.clone()), 4))),
        "{part}: a session that moved on beside a turn that did not"
    );
    assert_eq!(
        since((&part.id("missing"), 1), (&part.id("missing"), 1)).await,
        (None, None),
        "{part}: a turn and a session never written"
    );
}

/// [`Store::step_since`] of `turn` and `session`, which must not fail.
async fn both_since(
    store: &dyn Store,
    part: &Part,
    turn: (&str, u64),
    session: (&str, u64),
) -> StepSince {
    part.ok(
        "reading a turn and its session since their versions",
        store.step_since(turn, session).await,
    )
}
