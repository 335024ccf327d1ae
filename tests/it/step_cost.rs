//! What a step writes, counted by SQLite's own commit hook on a store file
//! ([`SqliteStore::commits`]): a step of `read` calls is one synced commit (the write that
//! closes or parks it, with the conversation's messages), any other step at most two (recorded
//! as running before its calls run, then closed or parked).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    Permission, Runtime, SqliteStore, StepOptions, StepOutcome, Turn, TurnStatus,
};
use toolwright::{Effect, ErrorCode};

use crate::support::{alice, builder, call, completed, turn_in};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Query {
    /// What to look up.
    q: String,
}

/// Looks `q` up.
#[tool(effect = read)]
async fn lookup(args: Query) -> Result<String, ToolError> {
    Ok(format!("found {}", args.q))
}

/// Notes `q` down.
#[tool(effect = write)]
async fn note(args: Query) -> Result<String, ToolError> {
    Ok(format!("noted {}", args.q))
}

/// Pays for `q`, once a person approved.
#[tool(effect = money, approval = always)]
async fn settle(args: Query) -> Result<String, ToolError> {
    Ok(format!("paid {}", args.q))
}

/// A runtime on a store file, a turn in it that took its first step, and the store to count
/// its commits.
async fn on_a_file() -> (tempfile::TempDir, SqliteStore, Runtime, Turn) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("steps.db")).unwrap();
    let rt = builder([lookup::TOOL, note::TOOL, settle::TOOL])
        .store(store.clone())
        .build()
        .unwrap();
    let turn = turn_in(&rt, "steps", Some(alice())).await;
    // A session's first step for an audience also records which tools that audience was
    // shown (the tools that may come and go are announced against it): once a session.
    let (first, _) = commits_of(&store, &turn, &["lookup"], StepOptions::new()).await;
    assert_eq!(first, 2, "the first step of a session");
    (dir, store, rt, turn)
}

fn calls(names: &[&str]) -> Vec<toolwright::runtime::ToolCall> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| call(&format!("c{i}"), name, json!({ "q": format!("q{i}") })))
        .collect()
}

/// The commits `turn`'s step of `names` made, and its outcome.
async fn commits_of(
    store: &SqliteStore,
    turn: &Turn,
    names: &[&str],
    options: StepOptions,
) -> (u64, StepOutcome) {
    let before = store.commits();
    let outcome = turn.step_with(calls(names), options).await.unwrap();
    (store.commits() - before, outcome)
}

#[tokio::test]
async fn a_step_of_reads_is_one_commit_and_any_other_step_at_most_two() {
    let (_dir, store, _rt, turn) = on_a_file().await;

    let (one, outcome) = commits_of(&store, &turn, &["lookup"], StepOptions::new()).await;
    assert_eq!(one, 1, "one read call");
    assert_eq!(completed(outcome)[0].output, json!("found q0"));

    let ten = ["lookup"; 10];
    let (commits, outcome) = commits_of(&store, &turn, &ten, StepOptions::new()).await;
    assert_eq!(commits, 1, "ten read calls");
    assert!(completed(outcome).iter().all(|r| !r.is_error));

    // The conversation's messages go in the same commit.
    let conversation = StepOptions::new().conversation(0, vec![json!({"role": "assistant"})]);
    let (commits, _) = commits_of(&store, &turn, &["lookup"], conversation).await;
    assert_eq!(commits, 1, "a read call with the model's message");

    let (commits, _) = commits_of(&store, &turn, &["note"], StepOptions::new()).await;
    assert_eq!(commits, 2, "a write call: running, then closed");
    let (commits, _) = commits_of(&store, &turn, &["lookup", "note"], StepOptions::new()).await;
    assert_eq!(commits, 2, "reads beside a write are recorded with it");
    let record = turn.record().await.unwrap();
    assert_eq!(record.status, TurnStatus::Active);
    assert_eq!(record.steps, 6);
}

#[tokio::test]
async fn a_step_of_reads_that_waits_for_a_person_is_one_commit() {
    let (_dir, store, _rt, turn) = on_a_file().await;
    let (commits, outcome) =
        commits_of(&store, &turn, &["lookup", "settle"], StepOptions::new()).await;
    assert_eq!(
        commits, 1,
        "the read ran, and the write that parks is the step's one"
    );
    let StepOutcome::Waiting {
        results, requests, ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(results[0].output, json!("found q0"));
    assert_eq!(requests.len(), 1);
    let record = turn.record().await.unwrap();
    assert_eq!(record.status, TurnStatus::Waiting, "{record:?}");
}

/// Says it started, then reads until its turn is cancelled.
#[tool(effect = read)]
async fn watch(
    _args: Query,
    ctx: ToolContext,
    started: State<tokio::sync::mpsc::UnboundedSender<()>>,
) -> Result<String, ToolError> {
    let _ = started.send(());
    ctx.cancelled().await;
    Err(ToolError::with_code(ErrorCode::Cancelled, "cancelled"))
}

#[tokio::test]
async fn a_cancel_that_wins_over_a_step_of_reads_keeps_the_models_message() {
    let dir = tempfile::tempdir().unwrap();
    let (started, mut heard) = tokio::sync::mpsc::unbounded_channel::<()>();
    let rt = builder([watch::TOOL])
        .store(SqliteStore::open(dir.path().join("steps.db")).unwrap())
        .state(started)
        .build()
        .unwrap();
    let turn = turn_in(&rt, "cancelled", Some(alice())).await;
    let message = json!({"role": "assistant", "calls": ["c0"]});
    let options = StepOptions::new().conversation(0, vec![message.clone()]);
    let stepping = {
        let turn = turn.clone();
        tokio::spawn(async move { turn.step_with(calls(&["watch"]), options).await })
    };
    heard.recv().await.unwrap();
    turn.cancel().await.unwrap();
    let outcome = stepping.await.unwrap().unwrap();
    let StepOutcome::Completed { ends_turn, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(!ends_turn);
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Cancelled);
    let kept = rt.store().conversation("cancelled").await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].message, message);
}

/// Says it started, then reads once the test opens the gate.
#[tool(effect = read)]
async fn gated(
    _args: Query,
    started: State<tokio::sync::mpsc::UnboundedSender<()>>,
    gate: State<std::sync::Arc<tokio::sync::Semaphore>>,
) -> Result<String, ToolError> {
    let _ = started.send(());
    let _permit = gate.acquire().await.unwrap();
    Ok("read".into())
}

#[tokio::test]
async fn two_handles_stepping_reads_at_once_record_one_step() {
    let (started, mut heard) = tokio::sync::mpsc::unbounded_channel::<()>();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let rt = builder([gated::TOOL])
        .state(started)
        .state(std::sync::Arc::clone(&gate))
        .build()
        .unwrap();
    let turn = turn_in(&rt, "twice", Some(alice())).await;
    let other = rt.turn(turn.id()).await.unwrap();
    let step = |turn: Turn| tokio::spawn(async move { turn.step(calls(&["gated"])).await });
    let (first, second) = (step(turn.clone()), step(other));
    heard.recv().await.unwrap();
    heard.recv().await.unwrap();
    gate.add_permits(2);
    let outcomes = [first.await.unwrap(), second.await.unwrap()];
    // Reads may run twice; the turn records one step, and the other handle learns its step
    // was not recorded.
    let recorded = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(recorded, 1, "{outcomes:?}");
    let refused = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
    assert!(refused.to_string().contains("another writer"), "{refused}");
    let record = turn.record().await.unwrap();
    assert_eq!(record.steps, 1, "{record:?}");
    assert_eq!(record.status, TurnStatus::Active);
}

// A runtime keeps the turns its steps wrote, with their sessions, and checks their versions at
// the next step instead of reading them: whatever another runtime (another process) or another
// handle wrote meanwhile must be seen exactly as when the step read the store.

/// Counts the calls it ran.
#[tool(effect = read)]
async fn counted(args: Query, ran: State<Arc<AtomicUsize>>) -> Result<String, ToolError> {
    ran.fetch_add(1, Ordering::SeqCst);
    Ok(format!("counted {}", args.q))
}

/// What two runtimes sharing a store file (as two processes do) step, and what they share.
struct Shared {
    _dir: tempfile::TempDir,
    ran: Arc<AtomicUsize>,
    started: tokio::sync::mpsc::UnboundedReceiver<()>,
    gate: Arc<tokio::sync::Semaphore>,
    here: Runtime,
    there: Runtime,
    /// A turn `here` took a step of, so it keeps it.
    turn: Turn,
}

/// Two runtimes on one store file, and a turn the first took a step of.
async fn two_runtimes() -> Shared {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("steps.db");
    let ran = Arc::new(AtomicUsize::new(0));
    let (sender, started) = tokio::sync::mpsc::unbounded_channel::<()>();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let runtime = || {
        builder([counted::TOOL, gated::TOOL, note::TOOL])
            .store(SqliteStore::open(&path).unwrap())
            .state(Arc::clone(&ran))
            .state(sender.clone())
            .state(Arc::clone(&gate))
            .build()
            .unwrap()
    };
    let (here, there) = (runtime(), runtime());
    let turn = turn_in(&here, "shared", Some(alice())).await;
    let first = conversing(&turn, &["counted"], 0).await.unwrap();
    assert_eq!(completed(first).len(), 1);
    Shared {
        _dir: dir,
        ran,
        started,
        gate,
        here,
        there,
        turn,
    }
}

/// `turn`'s step of `names`, appending the model's message at position `at`.
async fn conversing(
    turn: &Turn,
    names: &[&str],
    at: u64,
) -> Result<StepOutcome, toolwright::runtime::RuntimeError> {
    let message = json!({"role": "assistant", "at": at});
    let options = StepOptions::new().conversation(at, vec![message]);
    turn.step_with(calls(names), options).await
}

/// The positions of the model's messages in session `shared`'s conversation.
async fn conversation(rt: &Runtime) -> Vec<u64> {
    let stored = rt.store().conversation("shared").await.unwrap();
    stored
        .iter()
        .map(|m| m.message["at"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_step_after_another_runtime_stepped_the_turn_starts_from_its_write() {
    let shared = two_runtimes().await;
    let theirs = shared.there.turn(shared.turn.id()).await.unwrap();
    conversing(&theirs, &["counted"], 1).await.unwrap();
    // The copy `here` kept is a step behind: the step reads the turn again and goes on.
    let outcome = conversing(&shared.turn, &["counted"], 2).await.unwrap();
    assert_eq!(completed(outcome).len(), 1);
    let record = shared.turn.record().await.unwrap();
    assert_eq!((record.steps, record.status), (3, TurnStatus::Active));
    assert_eq!(record.last_step.unwrap().index, 2);
    assert_eq!(
        conversation(&shared.here).await,
        [0, 1, 2],
        "no message lost"
    );
    assert_eq!(shared.ran.load(Ordering::SeqCst), 3, "each call ran once");
}

#[tokio::test]
async fn a_cancel_by_another_runtime_between_steps_is_honoured() {
    let shared = two_runtimes().await;
    let theirs = shared.there.turn(shared.turn.id()).await.unwrap();
    theirs.cancel().await.unwrap();
    let refused = shared.turn.step(calls(&["counted"])).await.unwrap_err();
    assert!(
        matches!(
            refused,
            toolwright::runtime::RuntimeError::TurnState {
                status: TurnStatus::Cancelled,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(shared.ran.load(Ordering::SeqCst), 1, "nothing ran again");
    let record = shared.turn.record().await.unwrap();
    assert_eq!((record.steps, record.status), (1, TurnStatus::Cancelled));
}

#[tokio::test]
async fn a_turn_another_handle_completed_takes_no_step() {
    let shared = two_runtimes().await;
    let other = shared.here.turn(shared.turn.id()).await.unwrap();
    other.complete().await.unwrap();
    let refused = shared.turn.step(calls(&["counted"])).await.unwrap_err();
    assert!(
        matches!(
            refused,
            toolwright::runtime::RuntimeError::TurnState {
                status: TurnStatus::Completed,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(shared.ran.load(Ordering::SeqCst), 1, "nothing ran again");
}

#[tokio::test]
async fn a_session_another_runtime_changed_between_steps_is_read_again() {
    let shared = two_runtimes().await;
    let session = shared.there.session("shared").await.unwrap();
    session
        .set_permission(Effect::Write, Permission::Ask)
        .await
        .unwrap();
    let outcome = shared.turn.step(calls(&["note"])).await.unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("the session now asks before writes: {outcome:?}");
    };
    assert_eq!(requests.len(), 1);
}

#[tokio::test]
async fn a_step_that_lost_to_another_runtimes_step_is_refused_then_the_next_reads_again() {
    let mut shared = two_runtimes().await;
    // This runtime's step checks its copy, then waits in its call while the other runtime
    // steps the turn: its write is refused.
    let stepping = {
        let turn = shared.turn.clone();
        tokio::spawn(async move { conversing(&turn, &["gated"], 1).await })
    };
    shared.started.recv().await.unwrap();
    let theirs = shared.there.turn(shared.turn.id()).await.unwrap();
    conversing(&theirs, &["counted"], 1).await.unwrap();
    shared.gate.add_permits(1);
    let refused = stepping.await.unwrap().unwrap_err();
    assert!(refused.to_string().contains("another writer"), "{refused}");
    // The next step starts from the store, not from a copy of the step that lost.
    conversing(&shared.turn, &["counted"], 2).await.unwrap();
    let record = shared.turn.record().await.unwrap();
    assert_eq!((record.steps, record.status), (3, TurnStatus::Active));
    assert_eq!(conversation(&shared.here).await, [0, 1, 2]);
    assert_eq!(shared.ran.load(Ordering::SeqCst), 3);
}

// Where a step runs: a step of plain reads on the caller's task, without a hand-off (stopped
// before its close, it leaves the turn as it was); any other step on a task of its own, which
// runs to its close whoever waits for it.

/// The thread it ran on.
#[tool(effect = read)]
async fn thread_of_read(_args: Query) -> Result<String, ToolError> {
    Ok(format!("{:?}", std::thread::current().id()))
}

/// The thread it ran on, as a write.
#[tool(effect = write)]
async fn thread_of_write(_args: Query) -> Result<String, ToolError> {
    Ok(format!("{:?}", std::thread::current().id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_reads_runs_on_the_callers_task_any_other_on_a_task_of_its_own() {
    let rt = builder([thread_of_read::TOOL, thread_of_write::TOOL])
        .build()
        .unwrap();
    let turn = turn_in(&rt, "where", Some(alice())).await;
    // The test's body runs on the test's thread, none of the runtime's workers.
    let here = json!(format!("{:?}", std::thread::current().id()));
    let read = completed(turn.step(calls(&["thread_of_read"])).await.unwrap());
    assert_eq!(read[0].output, here, "{read:?}");
    let write = completed(turn.step(calls(&["thread_of_write"])).await.unwrap());
    assert!(!write[0].is_error, "{write:?}");
    assert_ne!(write[0].output, here, "{write:?}");
}

/// Tells when it starts and when it is dropped; waits on the gate, then returns.
async fn held(
    said: &tokio::sync::mpsc::UnboundedSender<&'static str>,
    gate: &tokio::sync::Semaphore,
) -> Result<String, ToolError> {
    struct Dropped(tokio::sync::mpsc::UnboundedSender<&'static str>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send("dropped");
        }
    }
    let _dropped = Dropped(said.clone());
    let _ = said.send("started");
    let _permit = gate.acquire().await.unwrap();
    let _ = said.send("returned");
    Ok("held".into())
}

/// A read held at the gate.
#[tool(effect = read)]
async fn held_read(
    _args: Query,
    said: State<tokio::sync::mpsc::UnboundedSender<&'static str>>,
    gate: State<Arc<tokio::sync::Semaphore>>,
) -> Result<String, ToolError> {
    held(&said, &gate).await
}

/// A write held at the gate.
#[tool(effect = write)]
async fn held_write(
    _args: Query,
    said: State<tokio::sync::mpsc::UnboundedSender<&'static str>>,
    gate: State<Arc<tokio::sync::Semaphore>>,
) -> Result<String, ToolError> {
    held(&said, &gate).await
}

/// A runtime on a store file with the held tools, a turn in it, and what they say.
async fn holding() -> (
    tempfile::TempDir,
    SqliteStore,
    Turn,
    tokio::sync::mpsc::UnboundedReceiver<&'static str>,
    Arc<tokio::sync::Semaphore>,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("steps.db")).unwrap();
    let (said, heard) = tokio::sync::mpsc::unbounded_channel();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let rt = builder([held_read::TOOL, held_write::TOOL, lookup::TOOL])
        .store(store.clone())
        .state(said)
        .state(Arc::clone(&gate))
        .build()
        .unwrap();
    let turn = turn_in(&rt, "held", Some(alice())).await;
    (dir, store, turn, heard, gate)
}

/// Steps `turn` with `names` until the first call says it started, then stops waiting.
async fn stop_waiting(
    turn: &Turn,
    names: &[&str],
    heard: &mut tokio::sync::mpsc::UnboundedReceiver<&'static str>,
) {
    let step = turn.step(calls(names));
    tokio::select! {
        outcome = step => panic!("the gate is closed, yet the step ended: {outcome:?}"),
        said = heard.recv() => assert_eq!(said, Some("started")),
    }
}

#[tokio::test]
async fn a_step_of_reads_whose_caller_stops_waiting_leaves_the_turn_as_it_was() {
    let (_dir, store, turn, mut heard, gate) = holding().await;
    // (A session's first step also records which tools it was shown: a step before.)
    completed(turn.step(calls(&["lookup"])).await.unwrap());
    let before = (store.commits(), turn.record().await.unwrap());
    stop_waiting(&turn, &["held_read"], &mut heard).await;
    // The call stopped with its step: dropped at once, nothing written.
    assert_eq!(heard.try_recv(), Ok("dropped"));
    gate.add_permits(1);
    assert_eq!((store.commits(), turn.record().await.unwrap()), before);
    // The turn takes the next step as if the stopped one had never been sent.
    let results = completed(turn.step(calls(&["lookup"])).await.unwrap());
    assert_eq!(results[0].output, json!("found q0"));
    let record = turn.record().await.unwrap();
    assert_eq!((record.steps, record.status), (2, TurnStatus::Active));
}

#[tokio::test]
async fn a_step_with_a_write_whose_caller_stops_waiting_runs_to_its_close() {
    let (_dir, _store, turn, mut heard, gate) = holding().await;
    stop_waiting(&turn, &["held_write"], &mut heard).await;
    assert!(heard.try_recv().is_err(), "the call goes on");
    assert_eq!(turn.record().await.unwrap().status, TurnStatus::Running);
    gate.add_permits(1);
    assert_eq!(heard.recv().await, Some("returned"));
    assert_eq!(heard.recv().await, Some("dropped"));
    // The close follows the body's return on the step's own task.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let record = turn.record().await.unwrap();
            if record.status != TurnStatus::Running {
                return record;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the step closes");
    assert_eq!((closed.steps, closed.status), (1, TurnStatus::Active));
    let step = closed.last_step.unwrap();
    assert_eq!(step.results[0].output, json!("held"), "{step:?}");
}
