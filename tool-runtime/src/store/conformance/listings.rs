//! The part `listings`: the paged listings of sessions, turns and tasks.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use super::fixtures::{minimal_task, turn};
use super::part::Part;
use crate::record::{Decision, RequestStatus, SessionRecord, StepPatch, TaskStatus, TurnStatus};
use crate::store::{
    Cursor, MAX_PAGE_LIMIT, Page, PageRequest, Store, StoreError, TaskFilter, TurnFilter,
};

/// The listings: the limit rules and foreign cursors refused; each filter selecting what it
/// names; most recently written first (tasks: created); pages bounded, full but the last, and
/// the last without a next cursor; and cursors that survive writes between pages (a record
/// unwritten throughout is listed exactly once, nothing twice).
pub async fn listings(store: &dyn Store) {
    let part = Part::new("listings");
    limits(&part, store).await;
    turns(&part, store).await;
    turns_written_between_pages(&part, store).await;
    an_answer_is_a_write(&part, store).await;
    tasks(&part, store).await;
    sessions(&part, store).await;
}

/// Every page of a listing, `limit` at a time, each checked to be bounded (full when a next
/// page follows); `keep` picks this run's items out of a listing shared with other data. A
/// store-wide listing stops once it kept `enough` (this run's records are the newest, so the
/// rest of a store shared with other data need not be read).
async fn every_page<T, F, Fut>(
    part: &Part,
    what: &str,
    (limit, enough): (usize, usize),
    keep: impl Fn(&T) -> bool,
    read: F,
) -> Vec<T>
where
    F: Fn(PageRequest) -> Fut,
    Fut: Future<Output = Result<Page<T>, StoreError>>,
{
    let mut kept = Vec::new();
    let mut request = PageRequest::first(limit);
    for _ in 0..100_000 {
        let page = part.ok(what, read(request.clone()).await);
        assert!(
            page.items.len() <= limit,
            "{part}: {what}: a page of {} items for a limit of {limit}",
            page.items.len()
        );
        let count = page.items.len();
        kept.extend(page.items.into_iter().filter(|item| keep(item)));
        match page.next {
            Some(_) if kept.len() >= enough => return kept,
            Some(next) => {
                assert_eq!(
                    count, limit,
                    "{part}: {what}: a page before the last is full"
                );
                request = PageRequest::after(next, limit);
            }
            None => return kept,
        }
    }
    panic!("{part}: {what}: the listing never ends");
}

#[track_caller]
fn invalid<T: std::fmt::Debug>(part: &Part, doing: &str, result: Result<T, StoreError>) {
    match result {
        Err(StoreError::Invalid(message)) => assert!(!message.is_empty()),
        other => panic!("{part}: {doing} must be refused with StoreError::Invalid, got {other:?}"),
    }
}

/// Limits of 0 and above [`MAX_PAGE_LIMIT`], a cursor of another listing and one that no
/// listing made are refused, by each listing.
async fn limits(part: &Part, store: &dyn Store) {
    let all_turns = TurnFilter::default();
    let all_tasks = TaskFilter::default();
    for limit in [0, MAX_PAGE_LIMIT + 1] {
        let page = PageRequest::first(limit);
        invalid(
            part,
            "a limit out of range",
            store.list_sessions(&page).await,
        );
        invalid(
            part,
            "a limit out of range",
            store.list_turns(&all_turns, &page).await,
        );
        invalid(
            part,
            "a limit out of range",
            store.list_tasks(&all_tasks, &page).await,
        );
    }
    let session = part.id("limits");
    for n in 0..2 {
        let id = part.id(&format!("limits-{n}"));
        let record = turn(&id, &session, TurnStatus::Active, &[]);
        part.ok("writing a turn", store.put_turn(&record, None).await);
    }
    let mine = TurnFilter::default().session(&session);
    let first = part.ok(
        "listing one turn",
        store.list_turns(&mine, &PageRequest::first(1)).await,
    );
    assert_eq!(first.items.len(), 1, "{part}: the first page holds one");
    let turns_cursor = first.next.expect("a second turn follows");
    invalid(
        part,
        "a cursor of the turn listing given to the session listing",
        store
            .list_sessions(&PageRequest::after(turns_cursor.clone(), 10))
            .await,
    );
    invalid(
        part,
        "a cursor of the turn listing given to the task listing",
        store
            .list_tasks(&all_tasks, &PageRequest::after(turns_cursor, 10))
            .await,
    );
    let made_up = PageRequest::after(Cursor::new("not a cursor"), 10);
    invalid(
        part,
        "a made-up cursor",
        store.list_turns(&mine, &made_up).await,
    );
    invalid(
        part,
        "a made-up cursor",
        store.list_sessions(&made_up).await,
    );
}

/// Turns of two sessions in several statuses: each filter lists what it selects, most
/// recently written first, with their columns; a rewrite moves a turn to the top.
async fn turns(part: &Part, store: &dyn Store) {
    let (a, b) = (part.id("turns-a"), part.id("turns-b"));
    let statuses = [
        TurnStatus::Waiting,
        TurnStatus::Completed,
        TurnStatus::Waiting,
        TurnStatus::Active,
        TurnStatus::Waiting,
    ];
    let mut written = Vec::new();
    for (n, status) in statuses.into_iter().enumerate() {
        for session in [&a, &b] {
            let id = format!("{session}-{n}");
            let record = turn(&id, session, status, &[]);
            part.ok("writing a turn", store.put_turn(&record, None).await);
            written.push((id, session.clone(), status));
        }
    }
    let newest_first = |session: Option<&str>, status: Option<TurnStatus>| -> Vec<String> {
        written
            .iter()
            .rev()
            .filter(|(_, s, t)| session.is_none_or(|x| x == s) && status.is_none_or(|x| x == *t))
            .map(|(id, _, _)| id.clone())
            .collect()
    };
    let ours = |id: &str| id.starts_with(&a) || id.starts_with(&b);
    for (session, status) in [
        (Some(a.as_str()), None),
        (Some(a.as_str()), Some(TurnStatus::Waiting)),
        (None, Some(TurnStatus::Waiting)),
        (None, Some(TurnStatus::Active)),
        (None, None),
    ] {
        let filter = TurnFilter {
            session_id: session.map(str::to_owned),
            status,
        };
        let expected = newest_first(session, status);
        let enough = if session.is_some() {
            usize::MAX
        } else {
            expected.len()
        };
        for limit in [1, 2, 3, MAX_PAGE_LIMIT] {
            let listed = every_page(
                part,
                "listing turns",
                (limit, enough),
                |t: &crate::store::TurnSummary| ours(&t.id),
                |page| {
                    let filter = filter.clone();
                    async move { store.list_turns(&filter, &page).await }
                },
            )
            .await;
            let ids: Vec<String> = listed.iter().map(|t| t.id.clone()).collect();
            assert_eq!(
                ids, expected,
                "{part}: turns of {session:?} in {status:?}, {limit} a page, newest first"
            );
            assert!(
                listed.windows(2).all(|w| w[0].position > w[1].position),
                "{part}: positions fall down the listing: {listed:?}"
            );
            for summary in &listed {
                let (_, s, t) = written.iter().find(|(id, _, _)| *id == summary.id).unwrap();
                assert_eq!(
                    (&summary.session_id, summary.status, summary.version),
                    (s, *t, 1),
                    "{part}: the columns of {summary:?}"
                );
            }
        }
    }
    // A rewrite is a write: the turn goes to the top, with its new version and status.
    let oldest = format!("{a}-0");
    let record = turn(&oldest, &a, TurnStatus::Cancelled, &[]);
    part.ok("rewriting a turn", store.put_turn(&record, Some(1)).await);
    let top = part.ok(
        "listing turns",
        store
            .list_turns(&TurnFilter::default().session(&a), &PageRequest::first(1))
            .await,
    );
    let top = &top.items[0];
    assert_eq!(
        (top.id.as_str(), top.status, top.version),
        (oldest.as_str(), TurnStatus::Cancelled, 2),
        "{part}: the rewritten turn lists first"
    );
}

/// Paging through a session's turns while turns are written between pages: a new turn, a
/// rewrite of one already listed, a rewrite of one not listed yet. Every turn left alone
/// throughout is listed exactly once, and no turn twice.
async fn turns_written_between_pages(part: &Part, store: &dyn Store) {
    let session = part.id("between");
    let ids: Vec<String> = (0..9).map(|n| format!("{session}-{n}")).collect();
    for id in &ids {
        let record = turn(id, &session, TurnStatus::Waiting, &[]);
        part.ok("writing a turn", store.put_turn(&record, None).await);
    }
    let filter = TurnFilter::default().session(&session);
    let mut listed: Vec<String> = Vec::new();
    let mut request = PageRequest::first(2);
    let mut touched = BTreeSet::new();
    for round in 0.. {
        let page = part.ok("listing turns", store.list_turns(&filter, &request).await);
        listed.extend(page.items.iter().map(|t| t.id.clone()));
        let Some(next) = page.next else { break };
        // Between pages: a new turn, and rewrites of the last listed and of the oldest.
        let new = format!("{session}-new-{round}");
        let record = turn(&new, &session, TurnStatus::Waiting, &[]);
        part.ok("writing a turn", store.put_turn(&record, None).await);
        touched.insert(new);
        for id in [listed.last().unwrap().clone(), ids[round % 3].clone()] {
            let (record, version) = part.ok("reading a turn", store.turn(&id).await).unwrap();
            part.ok(
                "rewriting a turn",
                store.put_turn(&record, Some(version)).await,
            );
            touched.insert(id);
        }
        request = PageRequest::after(next, 2);
    }
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "{part}: a turn listed twice: {listed:?}"
    );
    for id in ids.iter().filter(|id| !touched.contains(*id)) {
        assert!(
            listed.contains(id),
            "{part}: turn {id}, written before the listing and not since, was skipped: {listed:?}"
        );
    }
}

/// An answer recorded beside a turn ([`Store::settle_request`]) is a write: the turn goes to
/// the top of the listing, with its new version.
async fn an_answer_is_a_write(part: &Part, store: &dyn Store) {
    let session = part.id("answered");
    let (asked, later) = (format!("{session}-asked"), format!("{session}-later"));
    let request = format!("{session}-question");
    let parked = turn(&asked, &session, TurnStatus::Waiting, &[&request]);
    part.ok("writing a turn", store.put_turn(&parked, None).await);
    let record = turn(&later, &session, TurnStatus::Waiting, &[]);
    part.ok("writing a turn", store.put_turn(&record, None).await);
    let filter = TurnFilter::default().session(&session);
    let listed = || {
        let filter = filter.clone();
        async move {
            let page = store.list_turns(&filter, &PageRequest::first(10)).await;
            part.ok("listing turns", page)
                .items
                .into_iter()
                .map(|t| (t.id, t.version))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed().await,
        [(later.clone(), 1), (asked.clone(), 1)],
        "{part}: newest first"
    );
    let mut settled = parked.pending.as_ref().unwrap().requests[0].clone();
    settled.status = RequestStatus::Settled {
        decision: Decision::Approved,
        responder: None,
        note: None,
    };
    let patch = StepPatch {
        step: 0,
        request: settled,
        calls: Vec::new(),
    };
    part.ok(
        "recording an answer",
        store.settle_request(&asked, &patch, 1).await,
    );
    assert_eq!(
        listed().await,
        [(asked, 2), (later, 1)],
        "{part}: the answered turn lists first"
    );
}

/// Tasks of two sessions: newest created first, each filter, their statuses (a sleeping
/// task's end too), and a rewrite keeps a task's place.
async fn tasks(part: &Part, store: &dyn Store) {
    let (a, b) = (part.id("tasks-a"), part.id("tasks-b"));
    let statuses = [
        TaskStatus::Running,
        TaskStatus::Finished,
        TaskStatus::Sleeping {
            until_ms: 1_700_000_000_123,
        },
        TaskStatus::Cancelled,
        TaskStatus::Waiting,
    ];
    let mut written = Vec::new();
    for (n, status) in statuses.into_iter().enumerate() {
        for session in [&a, &b] {
            let id = format!("{session}-{n}");
            let mut record = minimal_task(&id, session);
            record.status = status;
            part.ok("writing a task", store.put_task(&record, None).await);
            written.push((id, session.clone(), status));
        }
    }
    // A rewrite changes the task's status and version, not its place.
    let first = format!("{a}-0");
    let mut record = minimal_task(&first, &a);
    record.status = TaskStatus::Idle;
    part.ok("rewriting a task", store.put_task(&record, Some(1)).await);
    written[0].2 = TaskStatus::Idle;
    let ours = |id: &str| id.starts_with(&a) || id.starts_with(&b);
    for (session, open) in [
        (Some(a.as_str()), false),
        (Some(a.as_str()), true),
        (None, true),
        (None, false),
    ] {
        let filter = TaskFilter {
            session_id: session.map(str::to_owned),
            open,
        };
        let expected: Vec<(String, String, TaskStatus, u64)> = written
            .iter()
            .rev()
            .filter(|(_, s, t)| session.is_none_or(|x| x == s) && (!open || !t.is_over()))
            .map(|(id, s, t)| (id.clone(), s.clone(), *t, if *id == first { 2 } else { 1 }))
            .collect();
        let enough = if session.is_some() {
            usize::MAX
        } else {
            expected.len()
        };
        for limit in [1, 2, MAX_PAGE_LIMIT] {
            let listed = every_page(
                part,
                "listing tasks",
                (limit, enough),
                |t: &crate::store::TaskSummary| ours(&t.id),
                |page| {
                    let filter = filter.clone();
                    async move { store.list_tasks(&filter, &page).await }
                },
            )
            .await;
            let got: Vec<(String, String, TaskStatus, u64)> = listed
                .into_iter()
                .map(|t| (t.id, t.session_id, t.status, t.version))
                .collect();
            assert_eq!(
                got, expected,
                "{part}: tasks of {session:?}, open only: {open}, {limit} a page"
            );
        }
    }
}

/// Sessions: most recently written first, with their version and time; a rewrite moves one
/// to the top.
async fn sessions(part: &Part, store: &dyn Store) {
    let ids: Vec<String> = (0..3).map(|n| part.id(&format!("session-{n}"))).collect();
    for id in &ids {
        part.ok(
            "writing a session",
            store
                .put_session(&SessionRecord::new(id.clone()), None)
                .await,
        );
        // The order is the write time's, in milliseconds.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let ours = |id: &str| ids.iter().any(|mine| mine == id);
    let listed = |limit| {
        every_page(
            part,
            "listing sessions",
            (limit, ids.len()),
            |s: &crate::store::SessionSummary| ours(&s.id),
            |page| async move { store.list_sessions(&page).await },
        )
    };
    for limit in [1, 2, MAX_PAGE_LIMIT] {
        let got: Vec<(String, u64)> = listed(limit)
            .await
            .into_iter()
            .map(|s| {
                assert!(s.updated_ms.is_some(), "{part}: {s:?} has its write time");
                (s.id, s.version)
            })
            .collect();
        let expected: Vec<(String, u64)> = ids.iter().rev().map(|id| (id.clone(), 1)).collect();
        assert_eq!(
            got, expected,
            "{part}: sessions newest first, {limit} a page"
        );
    }
    part.ok(
        "rewriting a session",
        store
            .put_session(&SessionRecord::new(ids[0].clone()), Some(1))
            .await,
    );
    let got: Vec<(String, u64)> = listed(2)
        .await
        .into_iter()
        .map(|s| (s.id, s.version))
        .collect();
    assert_eq!(
        got,
        [
            (ids[0].clone(), 2),
            (ids[2].clone(), 1),
            (ids[1].clone(), 1)
        ],
        "{part}: the rewritten session lists first"
    );
}
