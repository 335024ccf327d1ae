//! A crash harness for workflow tasks (`workflow = task`): child processes that die at randomized
//! points — around each step's side effect, while the task is parked on its question, right
//! after an answer or a cancel is recorded, and during the cleanup of a cancelled task — and fresh
//! processes that drive every run to its end. Unix only: it SIGKILLs its children.
//!
//! Each run starts one `rollout` task: step `prepare`, a question, then either (answered `go`)
//! steps `apply` and `verify`, or (cancelled while parked) the cleanup steps `undo` and `notify`.
//! Every step appends `<step> <pid>` to an effects file. A child does one thing, chosen from the
//! store: start the turn; `recover()` a task (or turn) a dead process left running or cancelling;
//! answer the question; or cancel the task. It then waits for the task to park or end.
//!
//! Crash points: `inside:<step>` (exit after the side effect, before its record), `after:<step>`
//! (exit after the record), `parked:ask`, `claim:answer` (exit right after an answer is claimed
//! on the task), `journal:answer` (right after it is journaled), `claim:cancel` (right after a
//! cancel of the parked task is recorded), and the kill points `kill:before:<step>`,
//! `kill:inside:<step>`, `kill:after:<step>` (before the side effect, between it and the record,
//! after the record) and `kill:parked:ask`: there the child records the point, says so on its
//! stdout and waits, and the parent SIGKILLs it while it waits (`support::crash::run_child`).
//! The seeded RNG picks where a kill lands, never when, so it lands exactly at its point however
//! busy the machine is. Every point is recorded by the child (written beside its file, then
//! renamed) before it exits or waits, and read by the parent only when the child says it waits
//! there or is gone; a child that does not reach a point leaves it armed for the next one, and
//! a point no child reaches is passed.
//!
//! After every child, once it is gone, the parent reads the effects file, the task and its
//! journal: a crash before, inside or after a step left it unrun, run and unrecorded, or
//! recorded; a crash while parked or right after a claim left the task there; a side effect
//! without a record comes only from a crash inside its step. After the last child it checks:
//! the task ended as planned (finished with the applied output, or cancelled), its result
//! reached the turn once, every planned step ran exactly once plus once per crash inside it, and
//! no unplanned step ran. `TOOLWRIGHT_TASK_CRASH_RUNS` sets the number of runs (default 200),
//! `TOOLWRIGHT_TASK_CRASH_JOBS` how many go at once (default 2).

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright::Caller;
use toolwright::prelude::*;
use toolwright::runtime::{
    EntryKind, InputResponse, JournalEntry, Runtime, SessionSpec, SqliteStore, Store, TaskRecord,
    TaskStatus, ToolCall,
};

mod support;

use support::crash::{self, ChildEnd, Crash, CrashPoints, CrashStore};
use support::{alice, builder};

const CHILD: &str = "TOOLWRIGHT_TASK_CRASH_CHILD";
const PLAN: &str = "TOOLWRIGHT_TASK_CRASH_PLAN";
const CANCEL: &str = "TOOLWRIGHT_TASK_CRASH_CANCEL";
const RUNS: &str = "TOOLWRIGHT_TASK_CRASH_RUNS";
const JOBS: &str = "TOOLWRIGHT_TASK_CRASH_JOBS";
const SEED: u64 = 0x7A5C_C0DE_2026;
const STEPS: [&str; 5] = ["prepare", "apply", "verify", "undo", "notify"];

// ---------------------------------------------------------------------------------------------
// The child.

struct Harness(Arc<Crash>);

impl Harness {
    /// The side effect of `step`: one line appended with one `write` (whole, whatever kills the
    /// process), between the kill points before and inside the step.
    async fn effect(&self, step: &str) -> Result<String, ToolError> {
        let crash = &self.0;
        crash.hold(&format!("kill:before:{step}"));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(crash.dir.join("effects"))?;
        file.write_all(format!("{step} {}\n", std::process::id()).as_bytes())?;
        crash.point(&format!("inside:{step}"));
        crash.hold(&format!("kill:inside:{step}"));
        Ok(format!("{step}-done"))
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RolloutArgs {
    service: String,
}

#[derive(Serialize, JsonSchema)]
struct Rolled {
    service: String,
    steps: Vec<String>,
}

/// Rolls a service out after an operator confirms; undoes the preparation when cancelled.
#[tool(effect = write, workflow = task)]
async fn rollout(
    args: RolloutArgs,
    ctx: WorkflowContext,
    harness: State<Harness>,
) -> Result<Rolled, ToolError> {
    let mut steps = Vec::new();
    steps.push(run(&ctx, &harness, "prepare").await?);
    let answer = ctx
        .ask(
            AskRequest::new(format!("Roll {} out?", args.service))
                .option(AskOption::new("go", "Go")),
        )
        .await?;
    if matches!(answer, AskAnswer::Cancelled) {
        run(&ctx, &harness, "undo").await?;
        run(&ctx, &harness, "notify").await?;
        return Err(ToolError::new("cancelled"));
    }
    steps.push(run(&ctx, &harness, "apply").await?);
    steps.push(run(&ctx, &harness, "verify").await?);
    Ok(Rolled {
        service: args.service,
        steps,
    })
}

async fn run(ctx: &WorkflowContext, harness: &Harness, step: &str) -> Result<String, ToolError> {
    let value: String = ctx.step(step, harness.effect(step)).await?;
    harness.0.point(&format!("after:{step}"));
    harness.0.hold(&format!("kill:after:{step}"));
    Ok(value)
}

/// Where the store dies: right after the writes that journal and claim answers, and claim
/// cancels.
const POINTS: CrashPoints = CrashPoints {
    record_journal: journal_recorded,
    write_task: task_written,
    ..CrashPoints::NONE
};

fn journal_recorded(crash: &Crash, entry: &JournalEntry) {
    if entry.kind == EntryKind::Ask && crash.action() == "answer" {
        crash.point("journal:answer");
    }
}

fn task_written(crash: &Crash, record: &TaskRecord) {
    match (crash.action(), record.status) {
        ("answer", TaskStatus::Running) => crash.point("claim:answer"),
        ("cancel", TaskStatus::Cancelling) => crash.point("claim:cancel"),
        _ => {}
    }
}

fn runtime(store: impl Store, crash: Arc<Crash>) -> Runtime {
    builder([rollout::TOOL])
        .store(store)
        .state(Harness(crash))
        .build()
        .unwrap()
}

/// Waits until the task parks or ends; returns its status.
async fn settled(rt: &Runtime) -> Option<TaskStatus> {
    for _ in 0..3000 {
        if let Some(task) = rt.tasks("crash").await.unwrap().into_iter().next()
            && !matches!(task.status, TaskStatus::Running | TaskStatus::Cancelling)
        {
            return Some(task.status);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

#[tokio::test]
async fn child_entry() {
    let Some(dir) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return;
    };
    let cancel = std::env::var(CANCEL).is_ok();
    let crash = Arc::new(Crash::new(dir.clone(), Crash::plan_from_env(PLAN), "start"));
    let store = CrashStore::new(
        SqliteStore::open(dir.join("db")).unwrap(),
        crash.clone(),
        POINTS,
    );
    let rt = runtime(store, crash.clone());
    let turn_file = dir.join("turn");
    let set = |action: &'static str| crash.set_action(action);
    match std::fs::read_to_string(&turn_file) {
        Err(_) => {
            let session = rt
                .open_session(SessionSpec::new("crash").initiator(alice()))
                .await
                .unwrap();
            let turn = session
                .begin_turn(Some(alice()), Caller::Model)
                .await
                .unwrap();
            std::fs::write(&turn_file, turn.id()).unwrap();
            turn.step(vec![ToolCall::new("c1", "rollout", r#"{"service":"api"}"#)])
                .await
                .unwrap();
        }
        Ok(_) => {
            let task = rt.tasks("crash").await.unwrap().into_iter().next();
            match task.map(|t| (t.status, t)) {
                // Started by a process that died before its step closed, or left running.
                None | Some((TaskStatus::Running | TaskStatus::Cancelling, _)) => {
                    set("recover");
                    rt.recover().await.unwrap();
                }
                Some((TaskStatus::Waiting, task)) if cancel => {
                    set("cancel");
                    rt.cancel_task(&task.id).await.unwrap();
                }
                Some((TaskStatus::Waiting, task)) => {
                    set("answer");
                    let request = task.requests.iter().find(|r| r.is_pending()).unwrap();
                    rt.respond(InputResponse::choose(
                        &request.request_id,
                        Some(alice()),
                        "go",
                    ))
                    .await
                    .unwrap();
                }
                Some((status, _)) => {
                    println!("OUTCOME {}", json!({ "unexpected": format!("{status:?}") }));
                    return;
                }
            }
        }
    }
    let status = settled(&rt).await;
    if status == Some(TaskStatus::Waiting) {
        crash.point("parked:ask");
        crash.hold("kill:parked:ask");
    }
    println!("OUTCOME {}", json!({ "status": format!("{status:?}") }));
}

// ---------------------------------------------------------------------------------------------
// The parent.

struct XorShift(u64);

impl XorShift {
    /// The generator of run `index`: runs go in any order, on several threads.
    fn for_run(index: usize) -> Self {
        let mut rng = XorShift((SEED ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
        for _ in 0..4 {
            rng.next();
        }
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }
}

/// The steps a run plans: the applying ones, or (cancelled while parked) the cleanup.
fn planned(cancel: bool) -> [&'static str; 3] {
    if cancel {
        ["prepare", "undo", "notify"]
    } else {
        ["prepare", "apply", "verify"]
    }
}

fn points(cancel: bool) -> Vec<String> {
    let mut points = vec!["parked:ask".to_owned(), "kill:parked:ask".to_owned()];
    for step in planned(cancel) {
        for kind in [
            "inside",
            "after",
            "kill:before",
            "kill:inside",
            "kill:after",
        ] {
            points.push(format!("{kind}:{step}"));
        }
    }
    if cancel {
        points.push("claim:cancel".into());
    } else {
        points.extend(["claim:answer".into(), "journal:answer".into()]);
    }
    points
}

/// The kind of a crash point, for the totals: `kill:<phase>` for a kill, else its first part.
fn kind_of(point: &str) -> String {
    let mut parts = point.split(':');
    match (parts.next(), parts.next()) {
        (Some("kill"), Some(phase)) => format!("kill:{phase}"),
        (Some(kind), _) => kind.to_owned(),
        _ => String::new(),
    }
}

#[derive(Default)]
struct Totals {
    runs: usize,
    cancelled_runs: usize,
    processes: usize,
    crashes: BTreeMap<String, usize>,
    repeated: usize,
    anomalies: Vec<String>,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.runs += other.runs;
        self.cancelled_runs += other.cancelled_runs;
        self.processes += other.processes;
        for (kind, n) in other.crashes {
            *self.crashes.entry(kind).or_default() += n;
        }
        self.repeated += other.repeated;
        self.anomalies.extend(other.anomalies);
    }
}

/// What the parent sees in a run's files once a child is gone.
#[derive(Default)]
struct Seen {
    /// Side effects per step.
    counts: BTreeMap<String, usize>,
    /// The steps the task's journal recorded.
    recorded: BTreeSet<String>,
    task: Option<TaskRecord>,
}

impl Seen {
    fn count(&self, step: &str) -> usize {
        self.counts.get(step).copied().unwrap_or(0)
    }
}

fn observe(dir: &Path, tokio: &tokio::runtime::Runtime) -> Seen {
    let mut seen = Seen::default();
    for line in std::fs::read_to_string(dir.join("effects"))
        .unwrap_or_default()
        .lines()
    {
        let step = line.split(' ').next().unwrap_or_default();
        *seen.counts.entry(step.to_owned()).or_default() += 1;
    }
    let store = SqliteStore::open(dir.join("db")).unwrap();
    tokio.block_on(async {
        let ids = store.session_tasks("crash").await.unwrap();
        if let Some(id) = ids.first() {
            seen.task = store.task(id).await.unwrap().map(|(t, _)| t);
        }
        if let Some(task) = &seen.task {
            seen.recorded = store
                .journal(&task.run_id())
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.kind == EntryKind::Step)
                .map(|e| e.name)
                .collect();
        }
    });
    seen
}

/// Runs one child armed with `plan`: how it ended, or what went wrong.
fn run_child(dir: &Path, plan: &[String], cancel: bool) -> Result<ChildEnd, String> {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .env(PLAN, plan.join(","));
    if cancel {
        command.env(CANCEL, "1");
    }
    // A child that runs this long is stuck: an anomaly, not a hang of the suite.
    match crash::run_child(dir, &mut command, Duration::from_secs(60)) {
        ChildEnd::Normal(stdout) => match stdout
            .lines()
            .find_map(|l| l.split_once("OUTCOME ").map(|(_, rest)| rest))
        {
            Some(outcome) if !outcome.contains("unexpected") => Ok(ChildEnd::Normal(stdout)),
            _ => Err(format!("child: {stdout}")),
        },
        ChildEnd::Failed(why) => Err(why),
        ended => Ok(ended),
    }
}

fn run_one(index: usize, rng: &mut XorShift, totals: &mut Totals, tokio: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let cancel = rng.below(2) == 0;
    let mut remaining = points(cancel);
    // Two to four crash points per run, in the order the run may reach them. The task parks
    // once: one `parked` point at most.
    let mut plan: Vec<String> = Vec::new();
    for _ in 0..2 + rng.below(3) {
        let point = remaining.remove(rng.below(remaining.len()));
        if point.ends_with("parked:ask") {
            remaining.retain(|p| !p.ends_with("parked:ask"));
        }
        plan.push(point);
    }
    let label = format!("run {index} (plan {plan:?})");
    // Side effects that happened without a record, per step: each adds one run.
    let mut lost: BTreeMap<&'static str, usize> = BTreeMap::new();
    // What each child did, for the anomaly report.
    let mut history = Vec::new();
    let mut prev = Seen::default();
    let mut done = false;
    for _ in 0..16 {
        let ended = run_child(dir.path(), &plan, cancel);
        totals.processes += 1;
        let point = match &ended {
            Ok(ChildEnd::Exited(point) | ChildEnd::Killed(point)) => Some(point.clone()),
            Ok(_) => None,
            Err(error) => {
                totals.anomalies.push(format!("{label}: {error}"));
                return;
            }
        };
        history.push(point.clone().unwrap_or_else(|| "normal".into()));
        if let Some(point) = &point {
            *totals.crashes.entry(kind_of(point)).or_default() += 1;
            plan.retain(|p| p != point);
        }
        let seen = observe(dir.path(), tokio);
        let mut anomaly = |what: String| {
            totals
                .anomalies
                .push(format!("{label}: {what}; children: {}", history.join(", ")));
        };
        // Each step's side effect: once per process at most, never after its record, and
        // without a record only when the process died inside the step.
        for step in STEPS {
            let ran = seen.count(step).saturating_sub(prev.count(step));
            let recorded = seen.recorded.contains(step);
            if ran > 1 || seen.count(step) < prev.count(step) {
                anomaly(format!(
                    "`{step}` ran {} then {} times",
                    prev.count(step),
                    seen.count(step)
                ));
            }
            if ran > 0 && prev.recorded.contains(step) {
                anomaly(format!("`{step}` ran again after it was recorded"));
            }
            let at = |kind: &str| point.as_deref() == Some(format!("{kind}:{step}").as_str());
            if at("kill:before") && (ran != 0 || recorded) {
                anomaly(format!(
                    "killed before `{step}`: it ran {ran} time(s), recorded: {recorded}"
                ));
            }
            if (at("inside") || at("kill:inside")) && (ran != 1 || recorded) {
                anomaly(format!(
                    "died inside `{step}`: it ran {ran} time(s), recorded: {recorded}"
                ));
            }
            if (at("after") || at("kill:after")) && !recorded {
                anomaly(format!("died after `{step}`, which is not recorded"));
            }
            if ran == 1 && !recorded {
                if at("inside") || at("kill:inside") {
                    *lost.entry(step).or_default() += 1;
                } else {
                    anomaly(format!(
                        "`{step}` ran without a record, the child ended at {point:?}"
                    ));
                }
            }
        }
        let status = seen.task.as_ref().map(|t| t.status);
        let expected = match point.as_deref() {
            Some("kill:parked:ask" | "parked:ask") => Some(TaskStatus::Waiting),
            Some("claim:cancel") => Some(TaskStatus::Cancelling),
            Some("claim:answer") => Some(TaskStatus::Running),
            _ => status,
        };
        if status != expected {
            anomaly(format!(
                "the child ended at {point:?} with the task {status:?}"
            ));
        }
        prev = seen;
        if status.is_some_and(TaskStatus::is_over) {
            done = true;
            break;
        }
    }
    totals.runs += 1;
    totals.cancelled_runs += usize::from(cancel);
    if !done {
        totals
            .anomalies
            .push(format!("{label}: the task never ended"));
        return;
    }
    // Every planned step ran once, plus once per death between its side effect and its record;
    // no other step ran.
    for step in STEPS {
        let n = prev.count(step);
        let expected = if planned(cancel).contains(&step) {
            1 + lost.get(step).copied().unwrap_or_default()
        } else {
            0
        };
        if n != expected {
            totals.anomalies.push(format!(
                "{label}: `{step}` ran {n} times, expected {expected}; children: {}",
                history.join(", "),
            ));
        }
        totals.repeated += n.saturating_sub(1);
    }
    let rt = builder([rollout::TOOL])
        .store(SqliteStore::open(dir.path().join("db")).unwrap())
        .state(Harness(Arc::new(Crash::new(
            dir.path().to_owned(),
            Vec::new(),
            "check",
        ))))
        .build()
        .unwrap();
    tokio.block_on(async {
        let task = rt.tasks("crash").await.unwrap().remove(0);
        let turn_id = std::fs::read_to_string(dir.path().join("turn")).unwrap();
        let turn = rt.turn(&turn_id).await.unwrap();
        let results = turn.task_results().await.unwrap();
        let expected = if cancel { TaskStatus::Cancelled } else { TaskStatus::Finished };
        if task.status != expected || results.len() != 1 {
            totals.anomalies.push(format!(
                "{label}: ended {:?} with {} results delivered (planned {expected:?})",
                task.status,
                results.len()
            ));
            return;
        }
        let output = &results[0].result.output;
        if !cancel && *output != json!({ "service": "api", "steps": ["prepare-done", "apply-done", "verify-done"] }) {
            totals.anomalies.push(format!("{label}: output {output}"));
        }
        if cancel && results[0].result.error.as_ref().map(|e| e.code().as_str()) != Some("CANCELLED") {
            totals.anomalies.push(format!("{label}: a cancelled task reported {output}"));
        }
        if !turn.task_results().await.unwrap().is_empty() {
            totals.anomalies.push(format!("{label}: a result was delivered twice"));
        }
    });
}

#[test]
fn tasks_survive_crashes_at_randomized_points_including_their_cancellation() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let number = |var: &str| std::env::var(var).ok().and_then(|n| n.parse().ok());
    let runs = number(RUNS).unwrap_or(200usize);
    let jobs = number(JOBS).unwrap_or(2usize).max(1);
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= runs {
                        break;
                    }
                    let mut rng = XorShift::for_run(index);
                    let mut run = Totals::default();
                    run_one(index, &mut rng, &mut run, &tokio);
                    totals.lock().unwrap().add(run);
                }
            });
        }
    });
    let mut totals = totals.into_inner().unwrap();
    totals.anomalies.sort();
    // To the real stderr: libtest captures `println!` of passing tests, and the counts are
    // meant to be read in CI logs.
    let _ = writeln!(
        std::io::stderr(),
        "task crash harness: {} runs ({} cancelled while parked, {jobs} at once), {} child processes, {:.1} s, crashes {:?}, steps run twice {}, anomalies {}",
        totals.runs,
        totals.cancelled_runs,
        totals.processes,
        started.elapsed().as_secs_f64(),
        totals.crashes,
        totals.repeated,
        totals.anomalies.len()
    );
    assert_eq!(totals.runs, runs);
    assert!(totals.anomalies.is_empty(), "{:#?}", totals.anomalies);
    if runs >= 100 {
        for kind in [
            "kill:before",
            "kill:inside",
            "kill:after",
            "kill:parked",
            "claim",
            "inside",
        ] {
            assert!(
                totals.crashes.get(kind).is_some_and(|n| *n > 0),
                "the harness never reached crashes of kind {kind}: {:?}",
                totals.crashes
            );
        }
    }
}
