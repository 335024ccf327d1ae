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
    Claim, ConversationEntry, InputResponse, JournalEntry, Lease, LeaseKind, PinRecord,
    RespondOutcome, SessionRecord, SqliteStore, StepOutcome, StepPatch, StepSince, Store,
    StoreError, TaskRecord, TurnRecord, Written,
};

use crate::support::{alice, builder, call, completed, turn_in, waiting};

/// Store calls per method name.
type Counts = BTreeMap<&'static str, u64>;

/// The real store, counting the calls of each method and the bytes of the turns and answers
/// written (as JSON, under the key `bytes`).
struct Counting {
    inner: SqliteStore,
    counts: Arc<Mutex<Counts>>,
}

impl Counting {
    fn new(counts: &Arc<Mutex<Counts>>) -> Self {
        Counting {
            inner: SqliteStore::in_memory().unwrap(),
            counts: Arc::clone(counts),
        }
    }

    fn count(&self, method: &'static str) {
        *self.counts.lock().unwrap().entry(method).or_default() += 1;
    }

    fn wrote(&self, bytes: usize) {
        *self.counts.lock().unwrap().entry("bytes").or_default() += bytes as u64;
    }
}

type Fut<'a, T> = BoxFuture<'a, Result<T, StoreError>>;

/// The methods both wrappers delegate to the real store, counting each call.
macro_rules! delegate_counting {
    () => {
        fn session(&self, id: &str) -> Fut<'_, Option<(SessionRecord, u64)>> {
            self.count("session");
            self.inner.session(id)
        }
        fn put_session<'a>(
            &'a self,
            record: &'a SessionRecord,
            expected: Option<u64>,
        ) -> Fut<'a, u64> {
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
            self.wrote(serde_json::to_vec(record).unwrap().len());
            self.inner.write_turn(record, expected, claim)
        }
        fn step_since(&self, turn: (&str, u64), session: (&str, u64)) -> Fut<'_, StepSince> {
            self.count("step_since");
            self.inner.step_since(turn, session)
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
        fn conversation(&self, session_id: &str) -> Fut<'_, Vec<ConversationEntry>> {
            self.count("conversation");
            self.inner.conversation(session_id)
        }
        fn append_conversation<'a>(
            &'a self,
            session_id: &'a str,
            turn_id: &'a str,
            first: u64,
            messages: &'a [serde_json::Value],
        ) -> Fut<'a, ()> {
            self.count("append_conversation");
            self.inner
                .append_conversation(session_id, turn_id, first, messages)
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
    };
}

impl Store for Counting {
    delegate_counting!();

    fn settle_request<'a>(
        &'a self,
        turn_id: &'a str,
        patch: &'a StepPatch,
        expected: u64,
    ) -> Fut<'a, u64> {
        self.count("settle_request");
        self.wrote(serde_json::to_vec(patch).unwrap().len());
        self.inner.settle_request(turn_id, patch, expected)
    }
}

/// The real store without its own `settle_request`: a third-party store written before
/// answers were patches gets the trait's default, which rewrites the turn.
struct Rewriting(Counting);

impl std::ops::Deref for Rewriting {
    type Target = Counting;
    fn deref(&self) -> &Counting {
        &self.0
    }
}

impl Store for Rewriting {
    delegate_counting!();
}

/// A third-party store written before attachments (and before answers were patches): the real
/// store behind only the methods of that time, the rest left to the trait's defaults.
pub(crate) fn store_of_an_earlier_release() -> impl Store {
    Rewriting(Counting::new(&Arc::default()))
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

/// What each of the first answers to a step of `calls` parked calls cost (store calls, and
/// bytes written under `bytes`), and what the message revoking the rest cost, on `store`.
async fn answer_costs(
    calls: usize,
    store: impl Store,
    counts: &Arc<Mutex<Counts>>,
) -> (Vec<Counts>, Counts) {
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
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(results.len(), calls);
    assert!(
        results[..COUNTED].iter().all(|r| !r.is_error),
        "the approved amounts ran: {:?}",
        &results[..COUNTED]
    );
    assert!(
        results[COUNTED..].iter().all(|r| r.is_error),
        "the rest were revoked"
    );
    (answers, taken())
}

/// The bytes an answer wrote, taken out of its counts.
fn bytes(answer: &mut Counts) -> u64 {
    answer.remove("bytes").unwrap_or_default()
}

async fn patched_costs(calls: usize) -> (Vec<Counts>, Counts) {
    let counts = Arc::new(Mutex::new(Counts::new()));
    answer_costs(calls, Counting::new(&counts), &counts).await
}

#[tokio::test]
async fn an_answer_costs_the_same_store_calls_and_bytes_for_10_or_1000_parked_calls() {
    let (mut small, mut small_revoke) = patched_costs(10).await;
    let (mut large, mut large_revoke) = patched_costs(1000).await;
    let small_bytes: Vec<u64> = small.iter_mut().map(bytes).collect();
    let large_bytes: Vec<u64> = large.iter_mut().map(bytes).collect();
    assert_eq!(
        small[0].get("turn"),
        Some(&1),
        "the first answer reads the turn: {:?}",
        small[0]
    );
    for (n, answer) in small.iter().enumerate().skip(1) {
        assert_eq!(answer, &small[1], "answer {n} of 10 against the second");
        assert_eq!(
            answer.get("turn"),
            None,
            "answer {n} starts from what the answer before it wrote: {answer:?}"
        );
        assert_eq!(
            answer.get("write_turn"),
            None,
            "answer {n} writes its patch, not the turn: {answer:?}"
        );
    }
    assert_eq!(small, large, "the answers to a step of 10 and of 1,000");
    assert!(
        small[1].get("remember_approval") == Some(&1),
        "each answer writes its one grant: {:?}",
        small[1]
    );
    for (n, (small, large)) in small_bytes.iter().zip(&large_bytes).enumerate() {
        assert!(
            *large <= small + 64 && *small < 4096,
            "answer {n} wrote {small} bytes in a step of 10 and {large} in a step of 1,000"
        );
    }
    bytes(&mut small_revoke);
    bytes(&mut large_revoke);
    assert_eq!(
        small_revoke, large_revoke,
        "the message that revokes the rest, and resumes the step"
    );
}

/// A store without its own `settle_request` (one written before answers were patches) still
/// answers correctly, through the trait's default: it reads and rewrites the turn.
#[tokio::test]
async fn a_store_without_answer_patches_rewrites_the_turn_and_answers_alike() {
    let counts = Arc::new(Mutex::new(Counts::new()));
    let (answers, _) = answer_costs(10, Rewriting(Counting::new(&counts)), &counts).await;
    for (n, answer) in answers.iter().enumerate() {
        assert_eq!(answer.get("settle_request"), None);
        assert!(
            answer.get("write_turn") == Some(&1) && answer.get("turn") >= Some(&1),
            "answer {n}: {answer:?}"
        );
    }
    toolwright::runtime::conformance::answers(&Rewriting(Counting::new(&counts))).await;
}

/// A copy kept by an answer is only a starting point: once the step it was kept for has
/// closed and another parked, an answer to the new step's request reads the store rather than
/// taking the copy's word that the request does not exist.
#[tokio::test]
async fn an_answer_to_a_later_step_does_not_trust_an_old_copy() {
    let rt = builder([cost_pay::TOOL]).build().unwrap();
    let turn = turn_in(&rt, "s-later-step", Some(alice())).await;
    let batch = (0..2)
        .map(|n| call(&format!("c{n}"), "cost_pay", json!({ "cents": 100 + n })))
        .collect();
    let (_, first) = waiting(turn.step(batch).await.unwrap());
    let outcome = rt
        .respond(InputResponse::approve(&first[0].request_id, Some(alice())))
        .await
        .unwrap();
    assert!(
        matches!(outcome, RespondOutcome::Settled { .. }),
        "{outcome:?}"
    );
    let outcome = turn.message("skip the other").await.unwrap();
    assert!(matches!(outcome, RespondOutcome::Resumed(_)), "{outcome:?}");

    let next = vec![call("c9", "cost_pay", json!({ "cents": 900 }))];
    let (_, second) = waiting(turn.step(next).await.unwrap());
    let outcome = rt
        .respond(InputResponse::approve(&second[0].request_id, Some(alice())))
        .await
        .unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("the new step's only answer resumes it: {outcome:?}")
    };
    assert_eq!(results[0].output, json!(900), "{results:?}");
}

/// Two runtimes answer the same parked step in turns on one store file: each starts from its
/// own copy, which the other's answers have made stale. The store refuses a patch written from
/// a stale copy, the answer starts again from the store, and no answer is lost.
#[tokio::test]
async fn answers_from_two_runtimes_on_one_store_all_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("answers.db");
    let open = || {
        builder([cost_pay::TOOL])
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap()
    };
    let (a, b) = (open(), open());
    let turn = turn_in(&a, "s-two-runtimes", Some(alice())).await;
    let batch = (0..6)
        .map(|n| call(&format!("c{n}"), "cost_pay", json!({ "cents": n + 1 })))
        .collect();
    let (_, requests) = waiting(turn.step(batch).await.unwrap());
    let mut last = None;
    for (n, request) in requests.iter().enumerate() {
        let rt = if n % 2 == 0 { &a } else { &b };
        last = Some(
            rt.respond(InputResponse::approve(&request.request_id, Some(alice())))
                .await
                .unwrap(),
        );
        if n + 1 < requests.len() {
            let Some(RespondOutcome::Settled { pending }) = &last else {
                panic!("answer {n}: {last:?}")
            };
            assert_eq!(pending.len(), requests.len() - n - 1, "answer {n}");
        }
    }
    let Some(RespondOutcome::Resumed(StepOutcome::Completed { results, .. })) = last else {
        panic!("the last answer resumes the step: {last:?}")
    };
    let paid: Vec<_> = results.iter().map(|r| r.output.clone()).collect();
    assert_eq!(paid, (1..=6).map(|n| json!(n)).collect::<Vec<_>>());
    let grants = b
        .approvals(turn.session_id(), Some(&alice()))
        .await
        .unwrap();
    assert_eq!(grants.len(), 6, "every answer's grant: {grants:?}");
}

#[tokio::test]
async fn a_step_after_an_answer_resumed_the_turn_starts_from_what_the_resume_wrote() {
    let counts = Arc::new(Mutex::new(Counts::new()));
    let rt = builder([cost_pay::TOOL])
        .store(Counting::new(&counts))
        .build()
        .unwrap();
    let turn = turn_in(&rt, "s-resumed", Some(alice())).await;
    let pay = |id: &str| vec![call(id, "cost_pay", json!({ "cents": 7 }))];
    let (_, requests) = waiting(turn.step(pay("c0")).await.unwrap());
    let answer = InputResponse::approve(&requests[0].request_id, Some(alice()));
    let outcome = rt.respond(answer).await.unwrap();
    let RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(results[0].output, json!(7));
    counts.lock().unwrap().clear();
    // The amount was approved `once`: the next step pays it again without asking, starting
    // from the turn and session the resume wrote, checked by their versions, not read again.
    let results = completed(turn.step(pay("c1")).await.unwrap());
    assert_eq!(results[0].output, json!(7), "{results:?}");
    let counted = std::mem::take(&mut *counts.lock().unwrap());
    assert_eq!(counted.get("step_since"), Some(&1), "{counted:?}");
    assert_eq!(counted.get("turn"), None, "{counted:?}");
    assert_eq!(counted.get("session"), None, "{counted:?}");
    let record = turn.record().await.unwrap();
    assert_eq!(record.steps, 2, "{record:?}");
}
