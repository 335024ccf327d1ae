//! A parked turn outlives its process, tested with real processes.
//!
//! The parent test re-runs this test executable as a child (`--exact child_entry`) with
//! `TOOLWRIGHT_CHILD` naming what the child does: park turns and exit, answer requests, or look
//! at a turn after another process was killed. Each child opens the same SQLite file. Tools record
//! their side effect by appending one line to a file shared by every process, so "exactly once"
//! is counted across processes, not inside one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    CallState, Decision, InputResponse, RequestStatus, RespondOutcome, Runtime, RuntimeError,
    SessionSpec, SqliteStore, StepOutcome, Store, ToolCall, TurnStatus,
};
use toolwright::{Caller, ErrorCode};

mod support;

use support::effects::EffectLog;
use support::{alice, bob, builder};

/// Names what a child process does; unset in the parent.
const CHILD: &str = "TOOLWRIGHT_CHILD";
/// The SQLite store file every process opens.
const DB: &str = "TOOLWRIGHT_DB";
/// The side-effect file tools append to.
const EFFECTS: &str = "TOOLWRIGHT_EFFECTS";
/// Where `park` writes (and `answer` reads) one `n turn_id request_id` line per parked turn.
const IDS: &str = "TOOLWRIGHT_IDS";
/// Where an answering child writes what each answer came to.
const REPORT: &str = "TOOLWRIGHT_REPORT";
/// The tool the parked calls use.
const TOOL: &str = "TOOLWRIGHT_TOOL";
/// How many turns to park.
const COUNT: &str = "TOOLWRIGHT_COUNT";
/// The seed of the answering order.
const SEED: &str = "TOOLWRIGHT_SEED";

// ---------------------------------------------------------------------------------------------
// Tools

#[derive(Deserialize, JsonSchema, ToolInput)]
struct EffectArgs {
    /// Which parked turn this call belongs to.
    n: u64,
}

#[derive(Serialize, JsonSchema)]
struct Effected {
    n: u64,
}

/// Records one side effect. Always asks first.
#[tool(effect = write, approval = always)]
async fn record_effect(
    args: EffectArgs,
    ctx: ToolContext,
    sink: State<EffectLog>,
) -> Result<Effected, ToolError> {
    sink.append(&format!(
        "done {} {} {} {}",
        args.n,
        ctx.call_id(),
        ctx.turn_id(),
        std::process::id()
    ))?;
    Ok(Effected { n: args.n })
}

/// Records that it started, then works far longer than any test waits (its process is killed
/// meanwhile). Always asks first.
#[tool(effect = write, approval = always)]
async fn slow_effect(
    args: EffectArgs,
    ctx: ToolContext,
    sink: State<EffectLog>,
) -> Result<Effected, ToolError> {
    sink.append(&format!(
        "started {} {} {} {}",
        args.n,
        ctx.call_id(),
        ctx.turn_id(),
        std::process::id()
    ))?;
    tokio::time::sleep(Duration::from_secs(300)).await;
    sink.append(&format!("finished {} {}", args.n, ctx.call_id()))?;
    Ok(Effected { n: args.n })
}

/// Records that it started, works a little, then records that it finished. Always asks first.
#[tool(effect = write, approval = always)]
async fn paused_effect(
    args: EffectArgs,
    ctx: ToolContext,
    sink: State<EffectLog>,
) -> Result<Effected, ToolError> {
    sink.append(&format!(
        "started {} {} {} {}",
        args.n,
        ctx.call_id(),
        ctx.turn_id(),
        std::process::id()
    ))?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    sink.append(&format!("finished {} {}", args.n, ctx.call_id()))?;
    Ok(Effected { n: args.n })
}

fn runtime(db: &Path, effects: &Path) -> Runtime {
    builder([record_effect::TOOL, slow_effect::TOOL, paused_effect::TOOL])
        .store(SqliteStore::open(db).unwrap())
        .state(EffectLog(effects.to_owned()))
        .build()
        .unwrap()
}

/// A tiny deterministic generator (xorshift64*), so no `rand` dependency is needed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// One parked turn as the parking process wrote it down.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Parked {
    n: u64,
    turn_id: String,
    request_id: String,
}

fn read_parked(path: &Path) -> Vec<Parked> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let parked = Parked {
                n: parts.next().unwrap().parse().unwrap(),
                turn_id: parts.next().unwrap().to_owned(),
                request_id: parts.next().unwrap().to_owned(),
            };
            assert!(parts.next().is_none(), "{line}");
            parked
        })
        .collect()
}

/// One line of the side-effect file.
#[derive(Clone, Debug)]
struct EffectLine {
    kind: String,
    n: u64,
    call_id: String,
    turn_id: String,
    pid: u32,
}

fn read_effects(path: &Path) -> Vec<EffectLine> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|line| !line.starts_with("finished"))
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 5, "{line}");
            EffectLine {
                kind: parts[0].to_owned(),
                n: parts[1].parse().unwrap(),
                call_id: parts[2].to_owned(),
                turn_id: parts[3].to_owned(),
                pid: parts[4].parse().unwrap(),
            }
        })
        .collect()
}

fn count_finished(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter(|l| l.starts_with("finished")).count())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// The child side

/// The entry point of every child process; a no-op in the parent's own test run.
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let env = |key: &str| PathBuf::from(std::env::var_os(key).unwrap_or_else(|| panic!("{key}")));
    let (db, effects) = (env(DB), env(EFFECTS));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let runtime = runtime(&db, &effects);
        match mode.as_str() {
            "park" => child_park(&runtime, &env(IDS)).await,
            "answer" => child_answer(&runtime, &env(IDS), &env(REPORT), false).await,
            "race" => child_answer(&runtime, &env(IDS), &env(REPORT), true).await,
            "inspect" => child_inspect(&runtime, &env(IDS), &env(REPORT)).await,
            "answer_once" => child_answer_once(&runtime, &env(IDS), &env(REPORT)).await,
            other => panic!("unknown child mode {other}"),
        }
    });
    // Leave without shutting anything down: whatever the store holds now is all a later
    // process gets.
    std::process::exit(0);
}

/// Parks `COUNT` turns of one session, each on one `always` call of `TOOL`, writes their ids
/// and exits.
async fn child_park(runtime: &Runtime, ids: &Path) {
    let count: u64 = std::env::var(COUNT).unwrap().parse().unwrap();
    let tool = std::env::var(TOOL).unwrap();
    let session = runtime
        .open_session(SessionSpec::new("s-park").initiator(alice()))
        .await
        .unwrap();
    let mut lines = String::new();
    for n in 0..count {
        let turn = session
            .begin_turn(Some(alice()), Caller::Model)
            .await
            .unwrap();
        let outcome = turn
            .step(vec![ToolCall::new(
                format!("c{n}"),
                &tool,
                json!({ "n": n }).to_string(),
            )])
            .await
            .unwrap();
        let StepOutcome::Waiting {
            results, requests, ..
        } = outcome
        else {
            panic!("turn {n} did not park: {outcome:?}");
        };
        assert!(results.is_empty(), "{results:?}");
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0].turn_id, turn.id());
        lines.push_str(&format!("{n} {} {}\n", turn.id(), requests[0].request_id));
    }
    std::fs::write(ids, lines).unwrap();
}

/// Answers every parked request (in a shuffled order) as Alice. With `race`, another process
/// answers the same requests at the same time, so an answer may also be dropped.
async fn child_answer(runtime: &Runtime, ids: &Path, report: &Path, race: bool) {
    let seed: u64 = std::env::var(SEED).unwrap().parse().unwrap();
    let mut parked = read_parked(ids);
    XorShift(seed | 1).shuffle(&mut parked);
    let (mut resumed, mut dropped) = (0usize, 0usize);
    for p in &parked {
        if !race {
            // Wrong answerers first: neither may settle, and nothing runs.
            for principal in [Some(bob()), None] {
                let outcome = runtime
                    .respond(InputResponse::approve(&p.request_id, principal))
                    .await
                    .unwrap();
                assert!(
                    matches!(outcome, RespondOutcome::Rejected { .. }),
                    "{outcome:?}"
                );
            }
        }
        let outcome = runtime
            .respond(InputResponse::approve(&p.request_id, Some(alice())))
            .await
            .unwrap();
        match outcome {
            RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) => {
                assert_eq!(results.len(), 1, "{results:?}");
                assert!(!results[0].is_error, "{results:?}");
                assert_eq!(results[0].call_id, format!("c{}", p.n));
                assert_eq!(results[0].output, json!({ "n": p.n }));
                resumed += 1;
            }
            RespondOutcome::Dropped => dropped += 1,
            other => panic!("answer to turn {} came to {other:?}", p.n),
        }
        if !race {
            let record = runtime
                .turn(&p.turn_id)
                .await
                .unwrap()
                .record()
                .await
                .unwrap();
            assert_eq!(record.id, p.turn_id);
            assert_eq!(record.status, TurnStatus::Active);
            assert_eq!(record.steps, 1);
            assert!(record.pending.is_none());
        }
    }
    if !race {
        assert_eq!(dropped, 0);
    }
    std::fs::write(report, format!("{resumed} {dropped}\n")).unwrap();
}

/// Answers the first parked request as Alice and writes down what the answer came to, error or
/// not.
async fn child_answer_once(runtime: &Runtime, ids: &Path, report: &Path) {
    let parked = read_parked(ids);
    let outcome = runtime
        .respond(InputResponse::approve(&parked[0].request_id, Some(alice())))
        .await;
    let text = match outcome {
        Ok(outcome) => format!("ok {outcome:?}"),
        Err(error) => format!("err {error}"),
    };
    std::fs::write(report, text).unwrap();
}

/// A fresh process looks at a turn whose answering process was killed while its tool ran.
async fn child_inspect(runtime: &Runtime, ids: &Path, report: &Path) {
    let parked = read_parked(ids);
    let p = &parked[0];
    let mut notes = Vec::new();

    // The turn is claimed: a second approval is dropped, not run again.
    let again = runtime
        .respond(InputResponse::approve(&p.request_id, Some(alice())))
        .await
        .unwrap();
    assert_eq!(again, RespondOutcome::Dropped);
    notes.push("answer:dropped".to_owned());

    // It takes no step, and it is not listed as waiting.
    let turn = runtime.turn(&p.turn_id).await.unwrap();
    assert_eq!(turn.id(), p.turn_id);
    match turn
        .step(vec![ToolCall::new(
            "c-next",
            "record_effect",
            r#"{"n": 99}"#,
        )])
        .await
    {
        Err(RuntimeError::TurnState { status, .. }) => {
            assert_eq!(status, TurnStatus::Running);
            notes.push("step:refused".to_owned());
        }
        other => panic!("a claimed turn took a step: {other:?}"),
    }
    assert!(!runtime.waiting_turns().await.unwrap().contains(&p.turn_id));
    let record = turn.record().await.unwrap();
    assert_eq!(record.status, TurnStatus::Running);
    let step = record.pending.as_ref().expect("the claimed step is kept");
    assert_eq!(step.calls.len(), 1);
    assert_eq!(step.calls[0].state, CallState::Running);

    // Recovery settles the claimed call as "result unknown" without running it again, and hands
    // the turn back to the model.
    let recovered = runtime.recover().await.unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let (turn_id, outcome) = &recovered[0];
    assert_eq!(turn_id, &p.turn_id);
    let StepOutcome::Completed { results, .. } = outcome else {
        panic!("recovery came to {outcome:?}");
    };
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error, "{results:?}");
    assert_eq!(results[0].call_id, "c0");
    assert_eq!(
        results[0].error.as_ref().map(|e| e.code()),
        Some(ErrorCode::ResultUnknown),
        "{results:?}"
    );
    notes.push(format!("recovered:{:?}", results[0].model()));
    let record = turn.record().await.unwrap();
    assert_eq!(record.id, p.turn_id);
    assert_eq!(record.status, TurnStatus::Active, "{record:?}");
    assert!(record.pending.is_none(), "{record:?}");
    // Nothing left to recover, and the old approval still resumes nothing.
    assert!(runtime.recover().await.unwrap().is_empty());
    let late = runtime
        .respond(InputResponse::approve(&p.request_id, Some(alice())))
        .await
        .unwrap();
    assert_eq!(late, RespondOutcome::Dropped);
    // Give a wrongly scheduled re-run time to show up in the effects file.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(report, notes.join("\n")).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The parent side

struct Dirs {
    _dir: tempfile::TempDir,
    db: PathBuf,
    effects: PathBuf,
    ids: PathBuf,
}

fn dirs() -> Dirs {
    let dir = tempfile::tempdir().unwrap();
    Dirs {
        db: dir.path().join("store.db"),
        effects: dir.path().join("effects.log"),
        ids: dir.path().join("ids.txt"),
        _dir: dir,
    }
}

fn child(mode: &str, dirs: &Dirs, extra: &[(&str, OsString)]) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env(DB, &dirs.db)
        .env(EFFECTS, &dirs.effects)
        .env(IDS, &dirs.ids)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in extra {
        command.env(key, value);
    }
    command
}

fn finish(what: &str, output: Output) -> Output {
    assert!(
        output.status.success(),
        "child `{what}` failed with {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn run(what: &str, mut command: Command) -> Output {
    finish(what, command.output().unwrap())
}

fn park(dirs: &Dirs, tool: &str, count: u64) -> Vec<Parked> {
    run(
        "park",
        child(
            "park",
            dirs,
            &[(TOOL, tool.into()), (COUNT, count.to_string().into())],
        ),
    );
    let parked = read_parked(&dirs.ids);
    assert_eq!(parked.len() as u64, count);
    parked
}

fn answerer(mode: &str, dirs: &Dirs, report: &Path, seed: u64) -> Command {
    child(
        mode,
        dirs,
        &[(REPORT, report.into()), (SEED, seed.to_string().into())],
    )
}

/// `resumed dropped` as an answering child reported them.
fn read_report(path: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut parts = text.split_whitespace().map(|p| p.parse().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Checks that every parked call ran exactly once, in its own turn, in a process other than the
/// one that parked it.
fn assert_each_ran_once(effects: &[EffectLine], parked: &[Parked], parker: Option<u32>) {
    let mut runs: HashMap<&str, Vec<&EffectLine>> = HashMap::new();
    for effect in effects {
        runs.entry(effect.call_id.as_str())
            .or_default()
            .push(effect);
    }
    let mut missing = Vec::new();
    for p in parked {
        let call_id = format!("c{}", p.n);
        match runs.get(call_id.as_str()).map(Vec::as_slice) {
            Some([effect]) => {
                assert_eq!(effect.n, p.n);
                assert_eq!(
                    effect.turn_id, p.turn_id,
                    "the turn id changed across processes"
                );
                if let Some(parker) = parker {
                    assert_ne!(effect.pid, parker, "the parking process ran the tool");
                }
            }
            Some(many) => panic!("{call_id} ran {} times: {many:?}", many.len()),
            None => missing.push(call_id),
        }
    }
    assert!(
        missing.is_empty(),
        "{} calls never ran: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(
        effects.len(),
        parked.len(),
        "side effects beyond the parked calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_parked_by_one_process_runs_once_when_another_answers() {
    let dirs = dirs();
    let parked = park(&dirs, "record_effect", 1);
    let p = parked[0].clone();

    // The parking process is gone; the turn lives in the file alone.
    {
        let store = SqliteStore::open(&dirs.db).unwrap();
        assert_eq!(
            store.waiting_turns().await.unwrap(),
            vec![p.turn_id.clone()]
        );
        let (record, _) = store.turn(&p.turn_id).await.unwrap().unwrap();
        assert_eq!(record.status, TurnStatus::Waiting);
        assert_eq!(record.current, Some(alice()));
        let request = record
            .request(&p.request_id)
            .expect("the request is stored");
        assert_eq!(request.status, RequestStatus::Pending);
        assert_eq!(
            store
                .turn_of_request(&p.request_id)
                .await
                .unwrap()
                .as_deref(),
            Some(p.turn_id.as_str())
        );
    }
    assert!(
        read_effects(&dirs.effects).is_empty(),
        "ran before approval"
    );

    // A second process answers (after Bob and an anonymous answer are rejected).
    let report = dirs.db.with_extension("report");
    let answered = answerer("answer", &dirs, &report, 7).spawn().unwrap();
    let answerer_pid = answered.id();
    finish("answer", answered.wait_with_output().unwrap());
    assert_eq!(read_report(&report), (1, 0));

    let effects = read_effects(&dirs.effects);
    assert_each_ran_once(&effects, &parked, None);
    assert_eq!(
        effects[0].pid, answerer_pid,
        "the tool ran in the answering process"
    );
    assert_eq!(effects[0].turn_id, p.turn_id);

    // A third process answering again changes nothing.
    let report3 = dirs.db.with_extension("report3");
    let third = answerer("race", &dirs, &report3, 9);
    run("answer again", third);
    assert_eq!(read_report(&report3), (0, 1));
    assert_each_ran_once(&read_effects(&dirs.effects), &parked, None);

    let store = SqliteStore::open(&dirs.db).unwrap();
    let (record, _) = store.turn(&p.turn_id).await.unwrap().unwrap();
    assert_eq!(record.id, p.turn_id);
    assert_eq!(record.status, TurnStatus::Active);
    assert!(record.pending.is_none());
    assert!(store.waiting_turns().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_while_its_tool_runs_is_recovered_without_running_it_again() {
    let dirs = dirs();
    let parked = park(&dirs, "slow_effect", 1);
    let p = parked[0].clone();

    let report = dirs.db.with_extension("report");
    let mut answering: Child = answerer("answer", &dirs, &report, 3).spawn().unwrap();
    let started = Instant::now();
    while read_effects(&dirs.effects).is_empty() {
        if let Some(status) = answering.try_wait().unwrap() {
            let output = answering.wait_with_output().unwrap();
            panic!(
                "the answering child exited ({status}) before its tool started\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A real kill (SIGKILL on Unix) while the tool is inside its call.
    answering.kill().unwrap();
    let status = answering.wait().unwrap();
    assert!(!status.success(), "{status}");

    // What a fresh reader finds: claimed, the call running, the approval settled by Alice.
    {
        let store = SqliteStore::open(&dirs.db).unwrap();
        let (record, _) = store.turn(&p.turn_id).await.unwrap().unwrap();
        assert_eq!(record.status, TurnStatus::Running, "{record:?}");
        let step = record.pending.as_ref().unwrap();
        assert_eq!(step.calls[0].state, CallState::Running);
        assert!(matches!(
            &step.requests[0].status,
            RequestStatus::Settled { decision: Decision::Approved, responder: Some(who), .. } if who.same_as(&alice())
        ));
        assert!(!store.waiting_turns().await.unwrap().contains(&p.turn_id));
    }

    // A fresh process answers again, tries a step, and recovers the stuck turn: the tool never
    // runs a second time.
    let inspect_report = dirs.db.with_extension("inspect");
    run(
        "inspect",
        child("inspect", &dirs, &[(REPORT, inspect_report.clone().into())]),
    );
    let notes = std::fs::read_to_string(&inspect_report).unwrap();
    eprintln!("after the kill, a fresh process saw:\n{notes}");

    let effects = read_effects(&dirs.effects);
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(effects[0].kind, "started");
    assert_eq!(effects[0].turn_id, p.turn_id);
    assert_eq!(count_finished(&dirs.effects), 0);
}

/// Parks turns in one process, then answers each in a shuffled order in another.
async fn park_then_answer(count: u64) {
    let dirs = dirs();
    let started = Instant::now();
    let parked = park(&dirs, "record_effect", count);
    let parked_in = started.elapsed();

    {
        let store = SqliteStore::open(&dirs.db).unwrap();
        let waiting = store.waiting_turns().await.unwrap();
        assert_eq!(waiting.len() as u64, count);
        let ids: HashSet<&str> = parked.iter().map(|p| p.turn_id.as_str()).collect();
        assert_eq!(ids.len() as u64, count, "turn ids repeat");
        assert!(waiting.iter().all(|id| ids.contains(id.as_str())));
    }
    assert!(read_effects(&dirs.effects).is_empty());

    let started = Instant::now();
    let report = dirs.db.with_extension("report");
    run("answer", answerer("race", &dirs, &report, 0x5eed));
    let answered_in = started.elapsed();
    assert_eq!(read_report(&report), (count as usize, 0));

    assert_each_ran_once(&read_effects(&dirs.effects), &parked, None);
    let store = SqliteStore::open(&dirs.db).unwrap();
    assert!(store.waiting_turns().await.unwrap().is_empty());
    eprintln!("parked {count} turns in {parked_in:?}, answered them in {answered_in:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_parked_turns_answered_in_random_order_by_a_fresh_process() {
    park_then_answer(10_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_racing_on_the_same_answers_run_each_tool_once() {
    const TURNS: u64 = 300;
    let dirs = dirs();
    let parked = park(&dirs, "record_effect", TURNS);
    let reports: Vec<PathBuf> = (0..2)
        .map(|i| dirs.db.with_extension(format!("race{i}")))
        .collect();
    let children: Vec<Child> = reports
        .iter()
        .enumerate()
        .map(|(i, report)| {
            answerer("race", &dirs, report, 11 + i as u64)
                .spawn()
                .unwrap()
        })
        .collect();
    let mut pids = BTreeMap::new();
    for (i, child) in children.into_iter().enumerate() {
        pids.insert(child.id(), i);
        finish("race", child.wait_with_output().unwrap());
    }
    let (a, b) = (read_report(&reports[0]), read_report(&reports[1]));
    assert_eq!(
        a.0 + b.0,
        TURNS as usize,
        "each request resumes exactly once: {a:?} {b:?}"
    );
    assert_eq!(
        a.1 + b.1,
        TURNS as usize,
        "and is dropped once: {a:?} {b:?}"
    );

    let effects = read_effects(&dirs.effects);
    assert_each_ran_once(&effects, &parked, None);
    let by_process = effects.iter().fold(BTreeMap::new(), |mut m, e| {
        *m.entry(pids[&e.pid]).or_insert(0usize) += 1;
        m
    });
    eprintln!("resumed per process: {a:?} {b:?}; side effects per process: {by_process:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cancelled_by_another_process_while_its_tool_runs_keeps_the_result() {
    let dirs = dirs();
    let parked = park(&dirs, "paused_effect", 1);
    let p = parked[0].clone();

    let report = dirs.db.with_extension("report");
    let answering = child("answer_once", &dirs, &[(REPORT, report.clone().into())])
        .spawn()
        .unwrap();
    let started = Instant::now();
    while read_effects(&dirs.effects).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // While the tool runs in the child, this process cancels the turn.
    let runtime = runtime(&dirs.db, &dirs.effects);
    runtime
        .turn(&p.turn_id)
        .await
        .unwrap()
        .cancel()
        .await
        .unwrap();
    finish("answer_once", answering.wait_with_output().unwrap());

    let answer = std::fs::read_to_string(&report).unwrap();
    eprintln!("the answering process got: {answer}");
    assert_eq!(
        count_finished(&dirs.effects),
        1,
        "the tool ran to its end once"
    );
    assert_eq!(read_effects(&dirs.effects).len(), 1);
    let record = runtime
        .turn(&p.turn_id)
        .await
        .unwrap()
        .record()
        .await
        .unwrap();
    assert_eq!(record.status, TurnStatus::Cancelled, "{record:?}");
    // The answering process ran the tool; its answer must not fail because the turn was
    // cancelled meanwhile, and the call must not stay `running` forever.
    assert!(
        answer.starts_with("ok "),
        "the answer that ran the tool failed: {answer}"
    );
    let stuck: Vec<_> = record
        .pending
        .iter()
        .flat_map(|step| &step.calls)
        .filter(|call| call.state == CallState::Running)
        .collect();
    assert!(
        stuck.is_empty(),
        "calls left running in a cancelled turn: {stuck:?}"
    );
}
