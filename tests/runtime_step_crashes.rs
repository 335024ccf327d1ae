//! What a killed process leaves of a step, with real processes: a step of `read` calls records
//! nothing before its calls run, so a crash leaves the turn as it was and the step runs again;
//! a step with a `write` call is recorded as running first, and recovery settles every call of
//! it (its `read` calls with it) as "result unknown", running none of them again.
//!
//! The parent test re-runs this test executable as a child (`--exact child_entry`), which opens
//! the SQLite file, begins a turn, writes its id down and steps it with the calls it is told;
//! the parent SIGKILLs it once the slow call has started (the tools append their side effects
//! to a file every process shares), then looks at the file with a runtime of its own.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use toolwright::prelude::*;
use toolwright::runtime::{
    CallState, Runtime, SessionSpec, SqliteStore, StepOutcome, Store, ToolCall, TurnStatus,
};
use toolwright::{Caller, ErrorCode};

mod support;

use support::builder;
use support::effects::EffectLog;

/// Names the calls a child steps (`reads` or `mixed`); unset in the parent.
const CHILD: &str = "TOOLWRIGHT_STEP_CHILD";
/// The SQLite store file every process opens.
const DB: &str = "TOOLWRIGHT_DB";
/// The side-effect file tools append to.
const EFFECTS: &str = "TOOLWRIGHT_EFFECTS";
/// Where the child writes the id of the turn it stepped.
const TURN: &str = "TOOLWRIGHT_TURN";

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Empty {}

/// Reads at once, recording that it ran.
#[tool(effect = read)]
async fn quick_read(
    _args: Empty,
    ctx: ToolContext,
    log: State<EffectLog>,
) -> Result<String, ToolError> {
    log.append(&format!("ran {} {}", ctx.call_id(), std::process::id()))?;
    Ok("read".into())
}

/// Records that it started, then reads far longer than any test waits.
#[tool(effect = read)]
async fn slow_read(
    _args: Empty,
    ctx: ToolContext,
    log: State<EffectLog>,
) -> Result<String, ToolError> {
    log.append(&format!("started {} {}", ctx.call_id(), std::process::id()))?;
    tokio::time::sleep(Duration::from_secs(300)).await;
    Ok("read slowly".into())
}

/// Records that it started, then writes far longer than any test waits.
#[tool(effect = write)]
async fn slow_write(
    _args: Empty,
    ctx: ToolContext,
    log: State<EffectLog>,
) -> Result<String, ToolError> {
    log.append(&format!("started {} {}", ctx.call_id(), std::process::id()))?;
    tokio::time::sleep(Duration::from_secs(300)).await;
    Ok("written".into())
}

fn runtime(db: &Path, effects: &Path) -> Runtime {
    builder([quick_read::TOOL, slow_read::TOOL, slow_write::TOOL])
        .store(SqliteStore::open(db).unwrap())
        .state(EffectLog(effects.to_owned()))
        .build()
        .unwrap()
}

fn calls(mode: &str) -> Vec<ToolCall> {
    let slow = if mode == "reads" {
        "slow_read"
    } else {
        "slow_write"
    };
    vec![
        ToolCall::new("c1", "quick_read", "{}"),
        ToolCall::new("c2", slow, "{}"),
    ]
}

/// The entry point of every child process; a no-op in the parent's own test run.
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let env = |key: &str| PathBuf::from(std::env::var_os(key).unwrap_or_else(|| panic!("{key}")));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        let runtime = runtime(&env(DB), &env(EFFECTS));
        let session = runtime.open_session(SessionSpec::new("s")).await.unwrap();
        let turn = session.begin_turn(None, Caller::Model).await.unwrap();
        std::fs::write(env(TURN), turn.id()).unwrap();
        // Killed while its slow call runs.
        let outcome = turn.step(calls(&mode)).await;
        panic!("the step was to be killed, and it came to {outcome:?}");
    });
}

struct Dirs {
    _dir: tempfile::TempDir,
    db: PathBuf,
    effects: PathBuf,
    turn: PathBuf,
}

/// Runs a child stepping `mode`'s calls and SIGKILLs it once its quick call `c1` ran and its
/// slow call `c2` started.
/// Returns the files it left and the id of its turn.
fn step_and_kill(mode: &str) -> (Dirs, String) {
    let dir = tempfile::tempdir().unwrap();
    let dirs = Dirs {
        db: dir.path().join("store.db"),
        effects: dir.path().join("effects.log"),
        turn: dir.path().join("turn.txt"),
        _dir: dir,
    };
    let mut child: Child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env(DB, &dirs.db)
        .env(EFFECTS, &dirs.effects)
        .env(TURN, &dirs.turn)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let both = |lines: Vec<String>| {
        lines.iter().any(|l| l.starts_with("ran c1 "))
            && lines.iter().any(|l| l.starts_with("started c2 "))
    };
    while !both(effects(&dirs.effects)) {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            panic!(
                "the child exited ({status}) before its calls started\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        // Only turns a hang into a failure.
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the calls never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    let turn = std::fs::read_to_string(&dirs.turn).unwrap();
    (dirs, turn)
}

fn effects(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// How many side-effect lines start with `prefix`.
fn count(path: &Path, prefix: &str) -> usize {
    effects(path)
        .iter()
        .filter(|l| l.starts_with(prefix))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_reads_cut_by_a_crash_leaves_the_turn_as_it_was_and_runs_again() {
    let (dirs, turn_id) = step_and_kill("reads");

    let store = SqliteStore::open(&dirs.db).unwrap();
    let (record, _) = store.turn(&turn_id).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Active, "{record:?}");
    assert!(record.pending.is_none(), "{record:?}");
    assert_eq!(record.steps, 0, "{record:?}");
    assert!(store.running_turns().await.unwrap().is_empty());

    // Nothing to recover; the step runs again, every call of it, in this process.
    let rt = runtime(&dirs.db, &dirs.effects);
    assert!(rt.recover().await.unwrap().is_empty());
    let turn = rt.turn(&turn_id).await.unwrap();
    let outcome = turn
        .step(vec![
            ToolCall::new("c1", "quick_read", "{}"),
            ToolCall::new("c3", "quick_read", "{}"),
        ])
        .await
        .unwrap();
    let StepOutcome::Completed { results, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(results.iter().all(|r| !r.is_error), "{results:?}");
    assert_eq!(results[0].output, json!("read"));
    let here = std::process::id();
    assert_eq!(count(&dirs.effects, &format!("ran c1 {here}")), 1);
    assert_eq!(count(&dirs.effects, "started c2 "), 1);
    let (record, _) = store.turn(&turn_id).await.unwrap().unwrap();
    assert_eq!(record.steps, 1, "{record:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_with_a_write_cut_by_a_crash_settles_its_reads_with_it() {
    let (dirs, turn_id) = step_and_kill("mixed");

    let store = SqliteStore::open(&dirs.db).unwrap();
    let (record, _) = store.turn(&turn_id).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Running, "{record:?}");
    let step = record
        .pending
        .as_ref()
        .expect("recorded before its calls ran");
    let states: Vec<_> = step.calls.iter().map(|c| c.state.clone()).collect();
    assert_eq!(states, [CallState::Running, CallState::Running], "{step:?}");

    let rt = runtime(&dirs.db, &dirs.effects);
    let recovered = rt.recover().await.unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let StepOutcome::Completed { results, .. } = &recovered[0].1 else {
        panic!("{recovered:?}");
    };
    let codes: Vec<_> = results
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.code()))
        .collect();
    assert_eq!(
        codes,
        [
            Some(ErrorCode::ResultUnknown),
            Some(ErrorCode::ResultUnknown)
        ],
        "{results:?}"
    );
    // Neither ran again: the read ran once (in the killed process), the write started once.
    assert_eq!(count(&dirs.effects, "ran c1 "), 1);
    assert_eq!(count(&dirs.effects, "started c2 "), 1);
    let (record, _) = store.turn(&turn_id).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Active, "{record:?}");
    assert!(record.pending.is_none(), "{record:?}");
}
