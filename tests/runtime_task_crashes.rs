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
//! (exit after the record), `kill:<step>` (a real SIGKILL at a random delay around the side
//! effect), `parked:ask`, `claim:answer` (exit right after an answer is claimed on the task),
//! `journal:answer` (right after it is journaled), `claim:cancel` (right after a cancel of the
//! parked task is recorded). After the last child the parent checks: the task ended as planned
//! (finished with the applied output, or cancelled), its result reached the turn once, every
//! planned step ran once — or more, by at most the crashes that fell between its side effect and
//! its record — and no unplanned step ran. `TOOLWRIGHT_TASK_CRASH_RUNS` sets the number of runs
//! (default 200).

#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
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

use support::crash::{Crash, CrashPoints, CrashStore};
use support::{alice, builder};

const CHILD: &str = "TOOLWRIGHT_TASK_CRASH_CHILD";
const PLAN: &str = "TOOLWRIGHT_TASK_CRASH_PLAN";
const CANCEL: &str = "TOOLWRIGHT_TASK_CRASH_CANCEL";
const RUNS: &str = "TOOLWRIGHT_TASK_CRASH_RUNS";
const SEED: u64 = 0x7A5C_C0DE_2026;
const STEPS: [&str; 5] = ["prepare", "apply", "verify", "undo", "notify"];
const KILL_WINDOW: Duration = Duration::from_millis(3);

// ---------------------------------------------------------------------------------------------
// The child.

struct Harness(Arc<Crash>);

impl Harness {
    async fn effect(&self, step: &str) -> Result<String, ToolError> {
        let crash = &self.0;
        let kill = crash.armed(&format!("kill:{step}"));
        if kill {
            crash.mark(step)?;
            tokio::time::sleep(KILL_WINDOW).await;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(crash.dir.join("effects"))?;
        file.write_all(format!("{step} {}\n", std::process::id()).as_bytes())?;
        crash.point(&format!("inside:{step}"));
        if kill {
            tokio::time::sleep(KILL_WINDOW).await;
        }
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
    }
    println!("OUTCOME {}", json!({ "status": format!("{status:?}") }));
}

// ---------------------------------------------------------------------------------------------
// The parent.

struct XorShift(u64);

impl XorShift {
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

fn points(cancel: bool) -> Vec<String> {
    let steps: &[&str] = if cancel {
        &["prepare", "undo", "notify"]
    } else {
        &["prepare", "apply", "verify"]
    };
    let mut points = vec!["parked:ask".to_owned()];
    for step in steps {
        for kind in ["inside", "after", "kill"] {
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

#[derive(Default)]
struct Totals {
    runs: usize,
    cancelled_runs: usize,
    crashes: BTreeMap<String, usize>,
    repeated: usize,
    anomalies: Vec<String>,
}

fn run_child(dir: &Path, plan: &[String], cancel: bool, delay: Duration) -> Result<String, String> {
    let _ = std::fs::remove_file(dir.join("marker"));
    let _ = std::fs::remove_file(dir.join("fired"));
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .env(PLAN, plan.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if cancel {
        command.env(CANCEL, "1");
    }
    let mut child = command.spawn().unwrap();
    let mut kill = plan.iter().find(|p| p.starts_with("kill:")).cloned();
    let mut killed = false;
    let started = Instant::now();
    // A child that runs this long is stuck: an anomaly, not a hang of the suite.
    let mut stuck = false;
    loop {
        if kill.is_some() && dir.join("marker").exists() {
            // With several kill points armed, the marker names the step that is running: the
            // kill is that step's, not the first one in the plan.
            if let Ok(step) = std::fs::read_to_string(dir.join("marker"))
                && !step.is_empty()
            {
                kill = Some(format!("kill:{step}"));
            }
            std::thread::sleep(delay);
            killed = child.kill().is_ok();
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            stuck = child.kill().is_ok();
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    if stuck {
        return Err(format!(
            "a child with plan {plan:?} ran for a minute and was killed"
        ));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    match output.status.code() {
        Some(0) => match stdout
            .lines()
            .find_map(|l| l.split_once("OUTCOME ").map(|(_, rest)| rest))
        {
            Some(outcome) if !outcome.contains("unexpected") => Ok("normal".into()),
            _ => Err(format!("child: {stdout}")),
        },
        Some(9) => std::fs::read_to_string(dir.join("fired")).map_err(|_| {
            format!(
                "exit 9 without a point: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        }),
        None if killed => Ok(kill.unwrap_or_default()),
        _ => Err(format!(
            "{}: {stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )),
    }
}

fn run_one(index: usize, rng: &mut XorShift, totals: &mut Totals, tokio: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let cancel = rng.below(2) == 0;
    let mut remaining = points(cancel);
    // Two to four crash points per run, in the order the run may reach them.
    let mut plan = Vec::new();
    for _ in 0..2 + rng.below(3) {
        let point = remaining.remove(rng.below(remaining.len()));
        plan.push(point);
    }
    let mut crashes_at: BTreeMap<String, usize> = BTreeMap::new();
    // What each child did, for the anomaly report.
    let mut history = Vec::new();
    let mut done = false;
    for _ in 0..16 {
        let delay = Duration::from_micros(u64::try_from(rng.below(6000)).unwrap());
        let ended = run_child(dir.path(), &plan, cancel, delay);
        history.push(format!("{:?}", ended.as_ref().map(String::as_str)));
        match ended {
            Ok(point) if point == "normal" => {}
            Ok(point) => {
                *totals
                    .crashes
                    .entry(point.split(':').next().unwrap().to_owned())
                    .or_default() += 1;
                if let Some(step) = point.split_once(':').map(|(_, s)| s.to_owned()) {
                    *crashes_at.entry(step).or_default() += 1;
                }
                plan.retain(|p| *p != point);
            }
            Err(error) => {
                totals.anomalies.push(format!("run {index}: {error}"));
                return;
            }
        }
        let store = SqliteStore::open(dir.path().join("db")).unwrap();
        let task = tokio.block_on(async {
            let ids = store.session_tasks("crash").await.unwrap();
            match ids.first() {
                Some(id) => store.task(id).await.unwrap().map(|(t, _)| t),
                None => None,
            }
        });
        if task.as_ref().is_some_and(|t| t.status.is_over()) {
            done = true;
            break;
        }
    }
    totals.runs += 1;
    totals.cancelled_runs += usize::from(cancel);
    if !done {
        totals
            .anomalies
            .push(format!("run {index}: the task never ended"));
        return;
    }
    let effects = std::fs::read_to_string(dir.path().join("effects")).unwrap_or_default();
    let count = |step: &str| {
        effects
            .lines()
            .filter(|l| l.split(' ').next() == Some(step))
            .count()
    };
    let planned: &[&str] = if cancel {
        &["prepare", "undo", "notify"]
    } else {
        &["prepare", "apply", "verify"]
    };
    for step in STEPS {
        let n = count(step);
        let allowed = 1 + crashes_at.get(step).copied().unwrap_or_default();
        if planned.contains(&step) {
            if n == 0 || n > allowed {
                totals.anomalies.push(format!(
                    "run {index}: `{step}` ran {n} times (allowed 1..={allowed}); children: {}; effects: {}",
                    history.join(", "),
                    effects.replace('\n', "; ")
                ));
            }
            totals.repeated += n.saturating_sub(1);
        } else if n != 0 {
            totals
                .anomalies
                .push(format!("run {index}: unplanned `{step}` ran {n} times"));
        }
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
                "run {index}: ended {:?} with {} results delivered (planned {expected:?})",
                task.status,
                results.len()
            ));
            return;
        }
        let output = &results[0].result.output;
        if !cancel && *output != json!({ "service": "api", "steps": ["prepare-done", "apply-done", "verify-done"] }) {
            totals.anomalies.push(format!("run {index}: output {output}"));
        }
        if cancel && results[0].result.error.as_ref().map(|e| e.code().as_str()) != Some("CANCELLED") {
            totals.anomalies.push(format!("run {index}: a cancelled task reported {output}"));
        }
        if !turn.task_results().await.unwrap().is_empty() {
            totals.anomalies.push(format!("run {index}: a result was delivered twice"));
        }
    });
}

#[test]
fn tasks_survive_crashes_at_randomized_points_including_their_cancellation() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runs = std::env::var(RUNS)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200usize);
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let mut rng = XorShift(SEED);
    let mut totals = Totals::default();
    for index in 0..runs {
        run_one(index, &mut rng, &mut totals, &tokio);
    }
    // To the real stderr: libtest captures `println!` of passing tests, and the counts are
    // meant to be read in CI logs.
    let _ = writeln!(
        std::io::stderr(),
        "task crash harness: {} runs ({} cancelled while parked), crashes {:?}, steps run twice {}, anomalies {}",
        totals.runs,
        totals.cancelled_runs,
        totals.crashes,
        totals.repeated,
        totals.anomalies.len()
    );
    assert!(totals.anomalies.is_empty(), "{:#?}", totals.anomalies);
    assert!(
        totals.crashes.get("kill").copied().unwrap_or_default() > 0
            && totals.crashes.get("claim").copied().unwrap_or_default() > 0
            && totals.crashes.get("inside").copied().unwrap_or_default() > 0,
        "the harness never reached some kinds of crash: {:?}",
        totals.crashes
    );
}
