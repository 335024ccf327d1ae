//! The part `steps`: the history of a turn's closed steps ([`Store::turn_steps`]).

use std::sync::Arc;

use serde_json::json;
use toolwright_core::ToolError;

use super::fixtures::{awkward_json, turn};
use super::part::Part;
use crate::record::{CallResult, ClosedStep, SessionRecord, TurnRecord, TurnStatus};
use crate::store::{Appended, Claim, Cursor, MAX_PAGE_LIMIT, PageRequest, Store, StoreError};

/// Closed step `index` of one call whose result says `form` (and carries values a backend
/// could mangle).
pub(super) fn closed(index: u32, form: &str) -> ClosedStep {
    let mut result = CallResult::failed(
        &format!("call-{index}"),
        "todo.add",
        ToolError::new(format!("step {index}: {form}")),
    );
    result.output = awkward_json();
    result.label = Some(form.to_owned());
    ClosedStep {
        index,
        results: vec![Arc::new(result)],
        requests: Vec::new(),
    }
}

/// The step history: every step a turn write carried, oldest first, in the form the turn last
/// wrote it, written with the turn or not at all; paged by the index; limits checked; empty for
/// an unknown turn; deleted with the session.
pub async fn steps(store: &dyn Store) {
    let part = Part::new("steps");
    let session = part.id("s");
    part.ok(
        "writing a session",
        store.put_session(&SessionRecord::new(&session), None).await,
    );
    let id = part.id("t");
    let mut record = turn(&id, &session, TurnStatus::Active, &[]);
    record.pending = None;
    let written = history(store, &part, &mut record).await;
    paging(store, &part, &id, &written).await;
    limits(store, &part, &id).await;
    deleted_with_the_session(store, &part, &mut record, written.1).await;
}

/// Every step of turn `id`, read in pages of `limit`.
async fn all(store: &dyn Store, part: &Part, id: &str, limit: usize) -> Vec<ClosedStep> {
    let mut steps = Vec::new();
    let mut request = PageRequest::first(limit);
    for _ in 0..1_000 {
        let page = part.ok("listing steps", store.turn_steps(id, &request).await);
        assert!(page.items.len() <= limit, "{part}: a page over its limit");
        steps.extend(page.items);
        match page.next {
            Some(next) => request = PageRequest::after(next, limit),
            None => return steps,
        }
    }
    panic!("{part}: the steps of a turn never end")
}

/// Steps 0, 1 and 2 closed across three writes (an insert, a plain write, a write appending
/// to the conversation), a write carrying step 2 unchanged, a refused write carrying step 3,
/// and step 2 closed again in another form. Returns the steps kept and the turn's version.
async fn history(
    store: &dyn Store,
    part: &Part,
    record: &mut TurnRecord,
) -> (Vec<ClosedStep>, u64) {
    let id = record.id.clone();
    assert!(
        all(store, part, &id, 10).await.is_empty(),
        "{part}: a turn not yet written has no steps"
    );
    record.last_step = Some(closed(0, "first"));
    let mut version = part.ok("inserting a turn", store.put_turn(record, None).await);
    record.steps = 2;
    record.last_step = Some(closed(1, "second"));
    version = part.ok(
        "writing a turn",
        store.put_turn(record, Some(version)).await,
    );
    record.steps = 3;
    record.last_step = Some(closed(2, "third"));
    let messages = [json!({ "role": "assistant", "content": "step 2" })];
    let appended = Appended {
        first: 0,
        messages: &messages,
    };
    version = part
        .ok(
            "writing a turn with messages",
            store
                .write_turn_appending(record, Some(version), Claim::None, appended)
                .await,
        )
        .version;
    let mut expected = vec![closed(0, "first"), closed(1, "second"), closed(2, "third")];
    assert_eq!(
        all(store, part, &id, 10).await,
        expected,
        "{part}: each step a write carried is listed, oldest first, as written"
    );
    // Carried again unchanged (a write that parks the next step keeps `last_step`).
    version = part.ok(
        "writing a turn",
        store.put_turn(record, Some(version)).await,
    );
    let mut stale = record.clone();
    stale.last_step = Some(closed(3, "refused"));
    part.refused(
        "a write at a stale version",
        store.put_turn(&stale, Some(version - 1)).await,
    );
    assert_eq!(
        all(store, part, &id, 10).await,
        expected,
        "{part}: a write without a new step adds none, and a refused write's step is not kept"
    );
    record.last_step = Some(closed(2, "closed again"));
    version = part.ok(
        "writing a turn",
        store.put_turn(record, Some(version)).await,
    );
    expected[2] = closed(2, "closed again");
    assert_eq!(
        all(store, part, &id, 10).await,
        expected,
        "{part}: a step closed again with its index is listed in its latest form"
    );
    (expected, version)
}

/// Pages of two: steps 0 and 1 with a cursor (the last index), then step 2 without one.
async fn paging(store: &dyn Store, part: &Part, id: &str, written: &(Vec<ClosedStep>, u64)) {
    let first = part.ok(
        "listing steps",
        store.turn_steps(id, &PageRequest::first(2)).await,
    );
    assert_eq!(first.items, written.0[..2], "{part}: the first page of two");
    let next = first
        .next
        .unwrap_or_else(|| panic!("{part}: a page of two of three steps has a next page"));
    assert_eq!(
        next.as_str(),
        "1",
        "{part}: the cursor is the last step's index"
    );
    let second = part.ok(
        "listing steps",
        store.turn_steps(id, &PageRequest::after(next, 2)).await,
    );
    assert_eq!(second.items, written.0[2..], "{part}: the second page");
    assert_eq!(second.next, None, "{part}: the last page has no next");
    let unknown = part.ok(
        "listing steps",
        store
            .turn_steps(&part.id("unknown"), &PageRequest::first(10))
            .await,
    );
    assert!(
        unknown.items.is_empty() && unknown.next.is_none(),
        "{part}: an unknown turn's page is empty"
    );
}

/// Limits of 0 and above [`MAX_PAGE_LIMIT`], and a cursor that is not a step index, are refused.
async fn limits(store: &dyn Store, part: &Part, id: &str) {
    let requests = [
        PageRequest::first(0),
        PageRequest::first(MAX_PAGE_LIMIT + 1),
        PageRequest::after(Cursor::new("turns:1"), 10),
    ];
    for request in requests {
        match store.turn_steps(id, &request).await {
            Err(StoreError::Invalid(message)) => assert!(!message.is_empty()),
            other => panic!(
                "{part}: listing steps with {request:?} must be refused with \
                 StoreError::Invalid, got {other:?}"
            ),
        }
    }
}

/// Deleting the session takes the turn's steps with it.
async fn deleted_with_the_session(
    store: &dyn Store,
    part: &Part,
    record: &mut TurnRecord,
    version: u64,
) {
    record.status = TurnStatus::Completed;
    part.ok(
        "ending the turn",
        store.put_turn(record, Some(version)).await,
    );
    for _ in 0..100 {
        let deleted = part.ok(
            "deleting the session",
            store.delete_session(&record.session_id, 1).await,
        );
        if deleted.done {
            assert!(
                all(store, part, &record.id, 10).await.is_empty(),
                "{part}: a deleted session's turns keep no steps"
            );
            return;
        }
    }
    panic!("{part}: deleting a session in batches of 1 never finishes")
}
