//! The 100,000-turn listing test the SQLite and Postgres binaries share: the parked turns'
//! records (real [`TurnRecord`]s, encoded as the stores encode them) and the walk through
//! their pages. Included with `#[path]`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use toolwright_core::Caller;
use toolwright_runtime::{PageRequest, PendingStep, Store, TurnFilter, TurnRecord, TurnStatus};

/// How many parked turns the listing test writes.
pub(crate) const PARKED: usize = 100_000;
/// How many turns a page of the walk holds.
pub(crate) const PAGE: usize = 100;
/// The session the parked turns belong to.
pub(crate) const SESSION: &str = "inbox";

/// The id of the `n`th parked turn (written `n`th, so listed `PARKED - n`th).
pub(crate) fn parked_id(n: usize) -> String {
    format!("parked-{n:06}")
}

/// The record of the `n`th parked turn, as JSON: a turn of [`SESSION`] waiting on one
/// question, the way a store stores it.
pub(crate) fn parked_json(n: usize) -> String {
    let id = parked_id(n);
    let record = TurnRecord {
        id: id.clone(),
        session_id: SESSION.to_owned(),
        current: None,
        caller: Caller::Model,
        structured_output: false,
        tainted_by: None,
        status: TurnStatus::Waiting,
        steps: 1,
        last_step: None,
        pending: Some(PendingStep {
            index: 0,
            input: None,
            calls: Vec::new(),
            requests: vec![crate::records::question(
                format!("question-{n:06}"),
                SESSION,
                &id,
            )],
        }),
    };
    serde_json::to_string(&record).expect("a turn record encodes")
}

/// Pages through the waiting turns of `store` ([`PAGE`] a page, with and without the
/// session), checking each page is bounded and every parked turn is listed exactly once,
/// most recently written first; reads a few back whole. Returns how long the walk took and
/// the slowest page.
pub(crate) async fn walk_the_inbox(store: &dyn Store) -> (Duration, Duration) {
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for filter in [
        TurnFilter::default().status(TurnStatus::Waiting),
        TurnFilter::default()
            .session(SESSION)
            .status(TurnStatus::Waiting),
    ] {
        let mut listed = Vec::with_capacity(PARKED);
        let mut request = PageRequest::first(PAGE);
        let mut last_position = u64::MAX;
        loop {
            let asked = Instant::now();
            let page = store.list_turns(&filter, &request).await.unwrap();
            slowest = slowest.max(asked.elapsed());
            assert!(page.items.len() <= PAGE, "a page of {}", page.items.len());
            for turn in &page.items {
                assert!(turn.position < last_position, "out of order at {}", turn.id);
                last_position = turn.position;
                assert_eq!(
                    (turn.status, turn.version, turn.session_id.as_str()),
                    (TurnStatus::Waiting, 1, SESSION)
                );
            }
            listed.extend(page.items.into_iter().map(|turn| turn.id));
            match page.next {
                Some(next) => {
                    assert_eq!(listed.len() % PAGE, 0, "a page before the last is full");
                    request = PageRequest::after(next, PAGE);
                }
                None => break,
            }
        }
        assert_eq!(listed.len(), PARKED, "every parked turn, once");
        let unique: BTreeSet<&String> = listed.iter().collect();
        assert_eq!(unique.len(), PARKED, "no turn listed twice");
        let expected: Vec<String> = (0..PARKED).rev().map(parked_id).collect();
        assert!(listed == expected, "most recently written first");
    }
    for n in [0, PARKED / 2, PARKED - 1] {
        let (turn, version) = store.turn(&parked_id(n)).await.unwrap().unwrap();
        assert_eq!(
            (turn.status, version, turn.id),
            (TurnStatus::Waiting, 1, parked_id(n))
        );
    }
    (started.elapsed(), slowest)
}
