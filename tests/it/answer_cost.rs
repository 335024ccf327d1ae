//! Answering a big step is linear: each answer makes the same store calls whether the step
//! parked 10 calls or 1,000. A `Store` wrapper counts the calls per method around the real
//! SQLite store; the answers' counts are compared between the two steps and between answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::context::StoreWork;
use toolwright::prelude::*;
use toolwright::runtime::{
    Claim, InputResponse, JournalEntry, Lease, LeaseKind, PinRecord, RespondOutcome, SessionRecord,
    SqliteStore, Store, StoreError, TaskRecord, TurnRecord, Written,
};

use crate::support::{alice, builder, call, turn_in, waiting};

/// Store calls per method name.
type Counts = BTreeMap<&'static str, u64>;

/// The real store, counting the calls of each method.
struct Counting {
    inner: SqliteStore,
    counts: Arc<Mutex<Counts>>,
}

impl Counting {
    fn count(&self, method: &'static str) {
        *self.counts.lock().unwrap().entry(method).or_default() += 1;
    }
}

type Fut<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

impl Store for Counting {
    fn session(&self, id: &str) -> Fut<'_, Option<(SessionRecord, u64)>> {
        self.count("session");
        self.inner.session(id)
    }
    fn put_session<'a>(&'a self, record: &'a SessionRecord, expected: Option<u64>) -> Fut<'a, u64> {
        self.count("put_session");
        self.inner.put_session(record, expected)
    }
    fn turn(&self, id: &str) -> Fut<'_, Option<(TurnRecord, u64)>> {
        self.count("turn");
        self.inner.turn(id)
    }
    fn write_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> Fut<'a, Written> {
        self.count("write_turn");
        self.inner.write_turn(record, expected, claim)
    }
    fn turn_of_request(&self, request_id: &str) -> Fut<'_, Option<String>> {
        self.count("turn_of_request");
        self.inner.turn_of_request(request_id)
    }
    fn waiting_turns(&self) -> Fut<'_, Vec<String>> {
        self.count("waiting_turns");
        self.inner.waiting_turns()
    }
    fn running_turns(&self) -> Fut<'_, Vec<String>> {
        self.count("running_turns");
        self.inner.running_turns()
    }
    fn journal(&self, run_id: &str) -> Fut<'_, Vec<JournalEntry>> {
        self.count("journal");
        self.inner.journal(run_id)
    }
    fn record_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
        fence: Option<&'a Lease>,
    ) -> Fut<'a, ()> {
        self.count("record_journal");
        self.inner.record_journal(run_id, entry, fence)
    }
    fn journal_in_transaction<'a>(
        &'a self,
        run_id: &'a str,
        position: u32,
        name: &'a str,
        fence: Option<&'a Lease>,
        work: StoreWork,
    ) -> Fut<'a, Result<serde_json::Value, ToolError>> {
        self.count("journal_in_transaction");
        self.inner
            .journal_in_transaction(run_id, position, name, fence, work)
    }
    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
        key: &'a str,
    ) -> Fut<'a, ()> {
        self.count("remember_approval");
        self.inner.remember_approval(session_id, requester, key)
    }
    fn approvals<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
    ) -> Fut<'a, BTreeSet<String>> {
        self.count("approvals");
        self.inner.approvals(session_id, requester)
    }
    fn pins(&self, connection: &str) -> Fut<'_, Vec<PinRecord>> {
        self.count("pins");
        self.inner.pins(connection)
    }
    fn pin<'a>(&'a self, pin: &'a PinRecord, replacing: Option<&'a str>) -> Fut<'a, bool> {
        self.count("pin");
        self.inner.pin(pin, replacing)
    }
    fn task(&self, id: &str) -> Fut<'_, Option<(TaskRecord, u64)>> {
        self.count("task");
        self.inner.task(id)
    }
    fn write_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> Fut<'a, Written> {
        self.count("write_task");
        self.inner.write_task(record, expected, claim)
    }
    fn task_of_request(&self, request_id: &str) -> Fut<'_, Option<String>> {
        self.count("task_of_request");
        self.inner.task_of_request(request_id)
    }
    fn session_tasks(&self, session_id: &str) -> Fut<'_, Vec<String>> {
        self.count("session_tasks");
        self.inner.session_tasks(session_id)
    }
    fn open_tasks(&self) -> Fut<'_, Vec<String>> {
        self.count("open_tasks");
        self.inner.open_tasks()
    }
    fn renew_leases<'a>(&'a self, held: &'a [Lease], ttl: Duration) -> Fut<'a, Vec<Lease>> {
        self.count("renew_leases");
        self.inner.renew_leases(held, ttl)
    }
    fn expired_leases(&self) -> Fut<'_, Vec<(LeaseKind, String)>> {
        self.count("expired_leases");
        self.inner.expired_leases()
    }
    fn due_turns(&self, now_ms: u64) -> Fut<'_, Vec<String>> {
        self.count("due_turns");
        self.inner.due_turns(now_ms)
    }
    fn due_tasks(&self, now_ms: u64) -> Fut<'_, Vec<String>> {
        self.count("due_tasks");
        self.inner.due_tasks(now_ms)
    }
    fn changed(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        self.count("changed");
        self.inner.changed(timeout)
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PayArgs {
    /// Cents to pay.
    cents: u64,
}

/// Pays; each amount is approved on its own (`once`, keyed by the input), so every answer
/// completes a grant.
#[tool(
    effect = money,
    approval(request = once, prompt = "Pay {cents} cents?"),
    approval_key = input
)]
async fn cost_pay(args: PayArgs) -> u64 {
    args.cents
}

/// How many answers are counted one by one, before a message revokes the rest.
const COUNTED: usize = 5;

/// What each of the first answers to a step of `calls` parked calls cost, and what the message
/// revoking the rest cost.
async fn answer_costs(calls: usize) -> (Vec<Counts>, Counts) {
    let counts = Arc::new(Mutex::new(Counts::new()));
    let store = Counting {
        inner: SqliteStore::in_memory().unwrap(),
        counts: Arc::clone(&counts),
    };
    let rt = builder([cost_pay::TOOL]).store(store).build().unwrap();
    let turn = turn_in(&rt, &format!("s-cost-{calls}"), Some(alice())).await;
    let batch = (0..calls)
        .map(|n| call(&format!("c{n}"), "cost_pay", json!({ "cents": n + 1 })))
        .collect();
    let (_, requests) = waiting(turn.step(batch).await.unwrap());
    assert_eq!(requests.len(), calls);
    let taken = || std::mem::take(&mut *counts.lock().unwrap());
    taken();
    let mut answers = Vec::new();
    for request in &requests[..COUNTED] {
        let answer = InputResponse::approve(&request.request_id, Some(alice()));
        let outcome = rt.respond(answer).await.unwrap();
        assert!(
            matches!(outcome, RespondOutcome::Settled { .. }),
            "{outcome:?}"
        );
        answers.push(taken());
    }
    let grants = rt
        .approvals(turn.session_id(), Some(&alice()))
        .await
        .unwrap();
    assert_eq!(grants.len(), COUNTED, "one grant per approved amount");
    taken();
    let outcome = turn.message("never mind the rest").await.unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");
    (answers, taken())
}

#[tokio::test]
async fn an_answer_costs_the_same_store_calls_for_10_or_1000_parked_calls() {
    let (small, small_revoke) = answer_costs(10).await;
    let (large, large_revoke) = answer_costs(1000).await;
    for (n, answer) in small.iter().enumerate() {
        assert_eq!(answer, &small[0], "answer {n} of 10 against the first");
    }
    assert_eq!(small, large, "the answers to a step of 10 and of 1,000");
    assert!(
        small[0].get("remember_approval") == Some(&1),
        "each answer writes its one grant: {:?}",
        small[0]
    );
    assert_eq!(
        small_revoke, large_revoke,
        "the message that revokes the rest, and resumes the step"
    );
}
