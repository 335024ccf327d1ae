//! The part `delete`.

use std::time::Duration;

use serde_json::json;

use super::fixtures::{minimal_task, turn};
use super::part::Part;
use crate::record::{
    AttachmentPlace, AttachmentRecord, EntryKind, JournalEntry, SessionRecord, TaskStatus,
    TurnStatus,
};
use crate::store::{Claim, Store, StoreError};

fn entry(position: u32, value: serde_json::Value) -> JournalEntry {
    JournalEntry {
        position,
        kind: EntryKind::Step,
        name: format!("step-{position}"),
        value,
    }
}

/// What a session holds, written under `part`'s ids: a finished turn `<s>-t1` with an indexed
/// request, an answer beside it and journals (a call's, the steering log, a hook's), a second
/// finished turn, a finished task with a question, a grant, a conversation and an attachment.
/// Returns the turn ids.
async fn fill(store: &dyn Store, part: &Part, session: &str) -> [String; 2] {
    let t1 = format!("{session}-t1");
    let t2 = format!("{session}-t2");
    part.ok(
        "writing the session",
        store.put_session(&SessionRecord::new(session), None).await,
    );
    let request = format!("{session}-r1");
    let first = turn(&t1, session, TurnStatus::Completed, &[request.as_str()]);
    part.ok("writing a turn", store.put_turn(&first, None).await);
    let second = turn(&t2, session, TurnStatus::Cancelled, &[]);
    part.ok("writing a turn", store.put_turn(&second, None).await);
    for run in [
        format!("{t1}/call-0"),
        format!("{t1}#steering"),
        format!("hooks/{session}-h1"),
    ] {
        // A NUL in a record must not stop the store from reading its ids.
        let value = json!({ "turn_id": t1, "call_id": "call-0", "note": "nul:\u{0}" });
        part.ok(
            "recording a journal entry",
            store.append_journal(&run, &entry(0, value)).await,
        );
    }
    let mut task = minimal_task(&format!("{session}-task"), session);
    task.status = TaskStatus::Finished;
    task.requests = first.pending.as_ref().unwrap().requests.clone();
    task.requests[0].request_id = format!("{session}-task-r1");
    part.ok("writing a task", store.put_task(&task, None).await);
    part.ok(
        "remembering a grant",
        store
            .remember_approval(session, "user:oidc:alice", "k")
            .await,
    );
    part.ok(
        "appending a message",
        store
            .append_conversation(session, &t1, 0, &[json!({ "role": "user" })])
            .await,
    );
    let attachment = AttachmentRecord {
        session_id: session.to_owned(),
        id: "sha256:cc".to_owned(),
        media_type: "image/png".to_owned(),
        size: 1,
        place: AttachmentPlace::Stored(vec![7]),
    };
    if store.keeps_attachments() {
        part.ok(
            "storing an attachment",
            store.put_attachment(&attachment).await,
        );
    }
    [t1, t2]
}

/// Deleting a session: refused while a turn or a task of it is not over, then done in batches
/// (calling again until `done`), taking every record of the session and nothing of another's
/// (not a journal whose run id merely starts like one of its turns').
pub async fn delete(store: &dyn Store) {
    let part = Part::new("delete");
    let (gone, kept) = (part.id("gone"), part.id("kept"));
    let [t1, t2] = fill(store, &part, &gone).await;
    fill(store, &part, &kept).await;
    // A run of another session whose id starts with a deleted turn's id.
    let lookalike = format!("{t1}0/call-0");
    part.ok(
        "recording a look-alike run",
        store.append_journal(&lookalike, &entry(0, json!(1))).await,
    );

    let waiting = turn(&part.id("gone-t3"), &gone, TurnStatus::Waiting, &[]);
    part.ok(
        "writing a waiting turn",
        store.put_turn(&waiting, None).await,
    );
    match store.delete_session(&gone, 1).await {
        Err(StoreError::Busy { session_id, what }) => {
            assert_eq!(session_id, gone, "{part}: the refusal names the session");
            assert!(what.contains("waiting"), "{part}: it says what: {what}");
        }
        other => panic!("{part}: deleting a session with a waiting turn: {other:?}"),
    }
    assert!(
        part.ok("reading a turn", store.turn(&t1).await).is_some(),
        "{part}: a refused deletion deletes nothing"
    );
    let (mut over, version) = part
        .ok("reading the waiting turn", store.turn(&waiting.id).await)
        .unwrap();
    over.status = TurnStatus::Completed;
    part.ok("completing it", store.put_turn(&over, Some(version)).await);

    // A turn cancelled while a step of it runs (its step still open, its lease live).
    let mut cancelled = turn(&part.id("gone-t4"), &gone, TurnStatus::Cancelled, &[]);
    let take = Claim::Take {
        owner: "conformance",
        ttl: Duration::from_secs(60),
    };
    let written = part.ok(
        "writing a turn cancelled mid-step",
        store.write_turn(&cancelled, None, take).await,
    );
    match store.delete_session(&gone, 1).await {
        Err(StoreError::Busy { what, .. }) => {
            assert!(what.contains("still runs"), "{part}: it says why: {what}");
        }
        other => panic!("{part}: deleting a session whose cancelled turn runs: {other:?}"),
    }
    cancelled.pending = None;
    part.ok(
        "closing its step",
        store.put_turn(&cancelled, Some(written.version)).await,
    );

    let mut open = minimal_task(&part.id("gone-open-task"), &gone);
    open.status = TaskStatus::Sleeping { until_ms: 1 };
    let open_version = part.ok("writing an open task", store.put_task(&open, None).await);
    match store.delete_session(&gone, 1).await {
        Err(StoreError::Busy { what, .. }) => {
            assert!(what.contains("task"), "{part}: it names the task: {what}");
        }
        other => panic!("{part}: deleting a session with an open task: {other:?}"),
    }
    open.status = TaskStatus::Cancelled;
    part.ok(
        "cancelling it",
        store.put_task(&open, Some(open_version)).await,
    );

    let mut calls = 0;
    loop {
        calls += 1;
        let deleted = part.ok("deleting a batch", store.delete_session(&gone, 1).await);
        assert!(
            deleted.turns <= 1 && deleted.tasks <= 1,
            "{part}: a batch holds at most `batch` turns and tasks: {deleted:?}"
        );
        if deleted.done {
            break;
        }
        assert!(
            calls < 10,
            "{part}: deleting in batches of 1 never finishes"
        );
    }
    assert!(
        calls >= 3,
        "{part}: three turns take three batches of 1, then the rest"
    );

    check_gone(store, &part, &gone, [&t1, &t2]).await;
    check_kept(store, &part, &kept).await;
    assert_eq!(
        part.ok(
            "reading the look-alike run",
            store.journal(&lookalike).await
        )
        .len(),
        1,
        "{part}: a run of another turn whose id starts like a deleted one's stays"
    );
    let again = part.ok("deleting it again", store.delete_session(&gone, 1).await);
    assert!(
        again.done && again.turns == 0,
        "{part}: deleting a session that is gone is done at once: {again:?}"
    );
}

/// Nothing of session `session` is left.
async fn check_gone(store: &dyn Store, part: &Part, session: &str, turns: [&String; 2]) {
    assert!(
        part.ok("reading the session", store.session(session).await)
            .is_none(),
        "{part}: the session record is deleted"
    );
    for id in turns {
        assert!(
            part.ok("reading a turn", store.turn(id).await).is_none(),
            "{part}: turn `{id}` is deleted"
        );
    }
    let request = format!("{session}-r1");
    assert!(
        part.ok("resolving a request", store.turn_of_request(&request).await)
            .is_none(),
        "{part}: the request index rows go with their turn"
    );
    let task_request = format!("{session}-task-r1");
    assert!(
        part.ok(
            "resolving a task's request",
            store.task_of_request(&task_request).await
        )
        .is_none(),
        "{part}: a task's request index rows go with it"
    );
    let t1 = turns[0];
    for run in [
        format!("{t1}/call-0"),
        format!("{t1}#steering"),
        format!("hooks/{session}-h1"),
    ] {
        assert!(
            part.ok("reading a journal", store.journal(&run).await)
                .is_empty(),
            "{part}: journal `{run}` goes with its turn"
        );
    }
    assert!(
        part.ok(
            "reading a task",
            store.task(&format!("{session}-task")).await
        )
        .is_none(),
        "{part}: the task is deleted"
    );
    assert!(
        part.ok("listing tasks", store.session_tasks(session).await)
            .is_empty(),
        "{part}: no task is listed"
    );
    assert!(
        part.ok(
            "reading grants",
            store.approvals(session, "user:oidc:alice").await
        )
        .is_empty(),
        "{part}: the grants are deleted"
    );
    assert!(
        part.ok(
            "reading the conversation",
            store.conversation(session).await
        )
        .is_empty(),
        "{part}: the conversation is deleted"
    );
    assert!(
        part.ok(
            "reading an attachment",
            store.attachment(session, "sha256:cc").await
        )
        .is_none(),
        "{part}: the attachments are deleted"
    );
}

/// Everything of session `session` is still there.
async fn check_kept(store: &dyn Store, part: &Part, session: &str) {
    let t1 = format!("{session}-t1");
    assert!(part.ok("reading", store.session(session).await).is_some());
    assert!(part.ok("reading", store.turn(&t1).await).is_some());
    assert!(
        part.ok(
            "reading",
            store.turn_of_request(&format!("{session}-r1")).await
        )
        .is_some()
    );
    for run in [
        format!("{t1}/call-0"),
        format!("{t1}#steering"),
        format!("hooks/{session}-h1"),
    ] {
        assert_eq!(
            part.ok("reading a journal", store.journal(&run).await)
                .len(),
            1,
            "{part}: another session's journal `{run}` stays"
        );
    }
    assert!(
        part.ok("reading", store.task(&format!("{session}-task")).await)
            .is_some()
    );
    assert_eq!(
        part.ok("reading", store.approvals(session, "user:oidc:alice").await)
            .len(),
        1,
        "{part}: another session's grants stay"
    );
    assert_eq!(
        part.ok("reading", store.conversation(session).await).len(),
        1,
        "{part}: another session's conversation stays"
    );
    if store.keeps_attachments() {
        assert!(
            part.ok("reading", store.attachment(session, "sha256:cc").await)
                .is_some(),
            "{part}: another session's attachments stay"
        );
    }
}
