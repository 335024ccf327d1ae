//! The part `requests`.

use super::fixtures::turn;
use super::part::Part;
use crate::record::TurnStatus;
use crate::store::Store;

/// The request index: it follows `put_turn` as requests are added and moved, keeps requests of
/// closed steps resolvable to their turn, and a refused write leaves it alone.
pub async fn requests(store: &dyn Store) {
    let part = Part::new("requests");
    let session = part.id("session");
    let (a, b) = (part.id("turn-a"), part.id("turn-b"));
    let [r1, r2, r3, r4, r5] = ["r1", "r2", "r3", "r4", "r5"].map(|r| part.id(r));
    let p = &part;
    let owner = move |request: String| async move {
        p.ok(
            "looking up a request",
            store.turn_of_request(&request).await,
        )
    };

    assert_eq!(
        owner(part.id("unknown")).await,
        None,
        "{part}: an unknown request id has no turn"
    );

    let mut turn_a = turn(&a, &session, TurnStatus::Waiting, &[&r1, &r2]);
    part.ok(
        "inserting a turn with two requests",
        store.put_turn(&turn_a, None).await,
    );
    assert_eq!(
        owner(r1.clone()).await.as_ref(),
        Some(&a),
        "{part}: added request r1"
    );
    assert_eq!(
        owner(r2.clone()).await.as_ref(),
        Some(&a),
        "{part}: added request r2"
    );

    turn_a = turn(&a, &session, TurnStatus::Waiting, &[&r2, &r3]);
    part.ok(
        "replacing request r1 by r3",
        store.put_turn(&turn_a, Some(1)).await,
    );
    assert_eq!(
        owner(r1.clone()).await.as_ref(),
        Some(&a),
        "{part}: a request of a closed step must still resolve to its turn (late answers are dropped, not unknown)"
    );
    assert_eq!(
        owner(r2.clone()).await.as_ref(),
        Some(&a),
        "{part}: kept request r2"
    );
    assert_eq!(
        owner(r3.clone()).await.as_ref(),
        Some(&a),
        "{part}: added request r3"
    );

    part.refused(
        "a stale turn write carrying request r4",
        store
            .put_turn(&turn(&a, &session, TurnStatus::Waiting, &[&r4]), Some(1))
            .await,
    );
    assert_eq!(
        owner(r4.clone()).await,
        None,
        "{part}: a refused write must not index its requests"
    );
    assert_eq!(
        owner(r2.clone()).await.as_ref(),
        Some(&a),
        "{part}: a refused write must not drop the turn's requests"
    );

    let turn_b = turn(&b, &session, TurnStatus::Waiting, &[&r3]);
    part.ok(
        "inserting a turn that takes over request r3",
        store.put_turn(&turn_b, None).await,
    );
    assert_eq!(
        owner(r3.clone()).await.as_ref(),
        Some(&b),
        "{part}: a request belongs to the turn that wrote it last"
    );
    assert_eq!(
        owner(r2.clone()).await.as_ref(),
        Some(&a),
        "{part}: r2 stays with turn a"
    );

    let mut settled = turn(&a, &session, TurnStatus::Running, &[]);
    settled.pending = None;
    part.ok(
        "clearing turn a's requests",
        store.put_turn(&settled, Some(2)).await,
    );
    assert_eq!(
        owner(r2.clone()).await.as_ref(),
        Some(&a),
        "{part}: requests of a closed step still resolve to their turn"
    );
    assert_eq!(
        owner(r3.clone()).await.as_ref(),
        Some(&b),
        "{part}: clearing turn a must not drop r3, which turn b wrote later"
    );

    part.refused(
        "inserting (expected = None) an existing turn carrying request r5",
        store
            .put_turn(&turn(&b, &session, TurnStatus::Waiting, &[&r5]), None)
            .await,
    );
    assert_eq!(
        owner(r5.clone()).await,
        None,
        "{part}: a refused insert must not index its requests"
    );

    appended(store, &part, &session).await;

    let mut done = turn(&b, &session, TurnStatus::Completed, &[]);
    done.pending = None;
    part.ok("completing turn b", store.put_turn(&done, Some(1)).await);
    assert_eq!(
        owner(r3).await.as_ref(),
        Some(&b),
        "{part}: requests of a completed turn still resolve to it"
    );
}

/// A step's requests grow as it goes on: a write that keeps the requests the turn held and
/// adds one indexes the new one, and a reordered list keeps every request resolvable.
async fn appended(store: &dyn Store, part: &Part, session: &str) {
    let owner = |request: String| async move {
        part.ok(
            "looking up a request",
            store.turn_of_request(&request).await,
        )
    };
    let c = part.id("turn-c");
    let [r6, r7, r8] = ["r6", "r7", "r8"].map(|r| part.id(r));
    part.ok(
        "inserting a turn with request r6",
        store
            .put_turn(&turn(&c, session, TurnStatus::Waiting, &[&r6]), None)
            .await,
    );
    part.ok(
        "writing the turn unchanged",
        store
            .put_turn(&turn(&c, session, TurnStatus::Waiting, &[&r6]), Some(1))
            .await,
    );
    part.ok(
        "adding request r7",
        store
            .put_turn(
                &turn(&c, session, TurnStatus::Waiting, &[&r6, &r7]),
                Some(2),
            )
            .await,
    );
    assert_eq!(
        owner(r7.clone()).await.as_ref(),
        Some(&c),
        "{part}: a request appended to the turn's requests"
    );
    part.ok(
        "putting request r8 before the others",
        store
            .put_turn(
                &turn(&c, session, TurnStatus::Waiting, &[&r8, &r6, &r7]),
                Some(3),
            )
            .await,
    );
    for request in [r6, r7, r8] {
        assert_eq!(
            owner(request.clone()).await.as_ref(),
            Some(&c),
            "{part}: request {request} of a reordered list"
        );
    }
}
