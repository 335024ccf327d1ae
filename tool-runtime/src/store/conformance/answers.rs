//! The part `answers`.

use super::fixtures::turn;
use super::part::Part;
use crate::record::{
    Approver, CallState, Decision, RequestStatus, StepPatch, TurnRecord, TurnStatus,
};
use crate::store::Store;

/// What answering request `n` of the fixture turn `record` changes: the request settled (with a
/// note holding text a backend could mangle) and its call ready.
fn answered(record: &TurnRecord, n: usize) -> StepPatch {
    let step = record.pending.as_ref().expect("the fixture turn is parked");
    let mut request = step.requests[n].clone();
    request.status = RequestStatus::Settled {
        decision: Decision::Approved,
        responder: None,
        note: Some(format!("yes to {n}: \u{0} \"quoted\" \u{1F980}")),
    };
    let mut call = step.calls[n].clone();
    call.state = CallState::Ready {
        approved_by: Some(Approver { principal: None }),
    };
    StepPatch {
        step: step.index,
        request,
        calls: vec![call],
    }
}

/// `settle_request`: an answer's patch is fenced by the turn's version, read back applied in
/// order, moves the turn in the write order, and is taken in by the next whole write.
pub async fn answers(store: &dyn Store) {
    let part = Part::new("answers");
    let session = part.id("session");
    let id = part.id("turn");
    let other = part.id("other");
    let requests: Vec<String> = (0..3).map(|n| part.id(&format!("r{n}"))).collect();
    let ids: Vec<&str> = requests.iter().map(String::as_str).collect();
    let record = turn(&id, &session, TurnStatus::Waiting, &ids);
    let read = |id: String| async move { store.turn(&id).await };

    part.refused(
        "an answer to a turn that does not exist",
        store.settle_request(&id, &answered(&record, 0), 1).await,
    );
    part.ok(
        "inserting a parked turn",
        store.put_turn(&record, None).await,
    );
    part.ok(
        "inserting a second parked turn",
        store
            .put_turn(&turn(&other, &session, TurnStatus::Waiting, &[]), None)
            .await,
    );

    let first = answered(&record, 0);
    let version = part.ok(
        "recording an answer at the turn's version",
        store.settle_request(&id, &first, 1).await,
    );
    assert_eq!(
        version, 2,
        "{part}: an answer gives the turn the next version"
    );
    let mut expected = record.clone();
    assert!(expected.apply(&first));
    assert_eq!(
        part.ok("reading an answered turn", read(id.clone()).await),
        Some((expected.clone(), 2)),
        "{part}: a turn reads back with its answer applied"
    );
    answered_since(store, &part, &id, &expected).await;
    let waiting = part.ok("listing waiting turns", store.waiting_turns().await);
    let mine: Vec<&String> = waiting
        .iter()
        .filter(|w| [&id, &other].contains(w))
        .collect();
    assert_eq!(
        mine,
        [&other, &id],
        "{part}: an answer is a write: the answered turn is now the most recently written"
    );

    part.refused(
        "an answer at a stale version",
        store.settle_request(&id, &answered(&record, 1), 1).await,
    );
    part.refused(
        "an answer at a version from the future",
        store.settle_request(&id, &answered(&record, 1), 7).await,
    );
    assert_eq!(
        part.ok("reading the turn again", read(id.clone()).await),
        Some((expected.clone(), 2)),
        "{part}: a refused answer changes nothing"
    );

    let second = answered(&record, 2);
    part.ok(
        "recording a second answer",
        store.settle_request(&id, &second, 2).await,
    );
    assert!(expected.apply(&second));
    assert_eq!(
        part.ok("reading a turn with two answers", read(id.clone()).await),
        Some((expected.clone(), 3)),
        "{part}: answers apply in the order they were recorded"
    );
    part.refused(
        "a whole write at the version before the last answer",
        store.put_turn(&expected, Some(2)).await,
    );

    // The next whole write holds what it holds: here the step as first parked, so an answer
    // left beside it would show if the store applied it again.
    let mut rewritten = record.clone();
    rewritten.steps = 2;
    part.ok(
        "writing the whole turn after answers",
        store.put_turn(&rewritten, Some(3)).await,
    );
    assert_eq!(
        part.ok("reading the rewritten turn", read(id.clone()).await),
        Some((rewritten.clone(), 4)),
        "{part}: a whole write takes in the answers recorded before it; they are not applied again"
    );
    for request in &requests {
        assert_eq!(
            part.ok("looking up a request", store.turn_of_request(request).await),
            Some(id.clone()),
            "{part}: answers leave the request index as it was"
        );
    }
    let last = part.ok(
        "answering after a whole write",
        store.settle_request(&id, &answered(&rewritten, 1), 4).await,
    );
    assert!(rewritten.apply(&answered(&record, 1)));
    assert_eq!(
        part.ok("reading the turn at last", read(id).await),
        Some((rewritten, last)),
        "{part}: an answer after a whole write applies to that write"
    );
}

/// Turn `id`, written at version 1 and answered since (`expected`, version 2), reads as changed
/// for a reader of version 1: through [`Store::turn_since`] and [`Store::step_since`].
async fn answered_since(store: &dyn Store, part: &Part, id: &str, expected: &TurnRecord) {
    assert_eq!(
        part.ok(
            "reading an answered turn since its last write",
            store.turn_since(id, 1).await
        ),
        Some((Some(expected.clone()), 2)),
        "{part}: an answer changes the turn for a reader of the version before it"
    );
    assert_eq!(
        part.ok(
            "reading an answered turn and a missing session since their versions",
            store.step_since((id, 1), (&part.id("no-session"), 1)).await
        )
        .0,
        Some((Some(expected.clone()), 2)),
        "{part}: an answer changes the turn for a step that holds the version before it"
    );
}
