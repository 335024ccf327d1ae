//! A crash harness: the runtime runs in child processes that die at randomized points, and fresh
//! processes drive every run to completion. Unix only: it SIGKILLs its children.
//!
//! Each run starts one turn with two calls in one step: `ship`, a workflow (`workflow =
//! execute`) with four steps, one `ctx.ask` and one `ctx.sleep`, and `provision`, a durable plain
//! tool with three steps. Every step appends `<step> <pid>` to a shared effects file (its side
//! effect, one `write`) and returns `<step>@<pid>`, so the recorded value names the process whose
//! run was recorded. A seeded xorshift picks the crash points of each run, and every child
//! process gets the ones not yet reached:
//!
//! - `inside:<step>`: `process::exit(9)` after the step's side effect, before its record;
//! - `after:<step>`: exit right after the step returned (recorded);
//! - `parked:ask` / `parked:sleep`: exit once the child's action parked the turn on the question
//!   or the timer;
//! - `journal:sleep`: exit right after the sleep's end was journaled, before the turn parks;
//! - `journal:answer`: exit right after an answer was journaled, before the turn records it;
//! - `claim:answer` / `claim:wake`: exit right after answering or waking claimed the turn
//!   (`running`), before the body runs again;
//! - `closed`: exit right after the store write that closed the resumed step, before the child
//!   hands its results on;
//! - kill points (at most one per run, about one crash in five): `kill:before:<step>`,
//!   `kill:inside:<step>` and `kill:after:<step>` (before the step's side effect, between it and
//!   the record, right after the record while later steps run), `kill:parked:ask`,
//!   `kill:parked:sleep` and `kill:closed`. The child records the point, says so on its stdout
//!   and waits there; the parent SIGKILLs it (`Child::kill`) while it waits
//!   (`support::crash::run_child`). The RNG picks where a kill lands, never when: it lands
//!   exactly at its point however busy the machine is.
//!
//! Every point is recorded by the child (written beside its file, then renamed) before it exits
//! or waits: the parent reads a kill point's record once the child says it waits there, and
//! everything else (exit records, the effects file, the store) once the child is gone. A child
//! that does not reach a point leaves it armed for the next child.
//!
//! A child does one thing, chosen from the store: start the turn, `recover()` it when it was left
//! `running`, answer the pending question (`respond`), or `wake_due()` it with its manual clock
//! (kept in a file: each child is a new process with a new `Runtime` on the same SQLite file).
//!
//! After every child the parent reads the effects file, the turn record and the journals: a
//! crash before, inside or after a step left it unrun, run and unrecorded, or recorded; a crash
//! elsewhere left the turn where that point is (parked, claimed, closed); a side effect without
//! a record comes only from a crash inside its step, or inside the other call's while it was in
//! that window. Once the store closed the step (the last child reported the results, or died
//! right after the close) it checks the run: every step's side effect happened once, plus once
//! for every crash that fell between that step's side effect and its record; every recorded
//! value stayed as recorded; the results kept in the turn record (`Turn::last_results`) and
//! those the last child reported, if it lived to, carry the recorded values; the journals hold
//! every step once; every planned point was reached. It prints the counts: crashes by kind, where
//! the SIGKILLs landed, the steps run twice and why, the runs whose last child died right after
//! the close, and the anomalies (there must be none). `TOOLWRIGHT_CRASH_RUNS` sets the number of
//! runs (default 200), `TOOLWRIGHT_CRASH_SEED` the seed, `TOOLWRIGHT_CRASH_JOBS` how many runs go
//! at once (default 2).
//!
//! The last two tests arm two windows on their own, as regression tests of the runtime: `closed`
//! (the closed step's results stay in the turn record) and `journal:answer` followed by a
//! different answer (the answer on record settles the question and the body resumes with it).

#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::{
    CallResult, CallState, EntryKind, InputResponse, JournalEntry, RequestKind, RespondOutcome,
    Runtime, SessionSpec, SqliteStore, StepOutcome, Store, ToolCall, TurnRecord, TurnStatus,
};
use toolwright::{Caller, OptionStyle};

mod support;

use support::clock::ManualClock;
use support::crash::{self, ChildEnd, Crash, CrashPoints, CrashStore};
use support::{alice, builder};

/// The run directory of a child process; unset in the parent.
const CHILD: &str = "TOOLWRIGHT_CRASH_CHILD";
/// The crash points the child is armed with, comma-separated.
const PLAN: &str = "TOOLWRIGHT_CRASH_PLAN";
const RUNS: &str = "TOOLWRIGHT_CRASH_RUNS";
const SEED: &str = "TOOLWRIGHT_CRASH_SEED";
const JOBS: &str = "TOOLWRIGHT_CRASH_JOBS";

const DEFAULT_RUNS: usize = 200;
const DEFAULT_SEED: u64 = 0x5EED_C0DE_2026;

/// The workflow's steps, in order, and where each sits in its journal (the question is at 2,
/// the sleep at 4).
const SHIP_STEPS: [&str; 4] = ["build", "test", "publish", "verify"];
/// The durable tool's steps, in order.
const PROVISION_STEPS: [&str; 3] = ["tenant", "quota", "welcome"];
const RELEASE: &str = "v1.2.3";
/// The manual clock's start, and how long the workflow sleeps.
const CLOCK_START_MS: u64 = 1_000_000;
const SLEEP_MS: u64 = 60_000;
/// More child processes than this in one run means the run is stuck.
const MAX_PROCESSES: usize = 16;

fn all_steps() -> impl Iterator<Item = &'static str> {
    SHIP_STEPS.into_iter().chain(PROVISION_STEPS)
}

/// The call a step belongs to.
fn call_of(step: &str) -> &'static str {
    if SHIP_STEPS.contains(&step) {
        "ship"
    } else {
        "provision"
    }
}

// ---------------------------------------------------------------------------------------------
// The child: tools, crash points, one action.

/// The state tools see: where side effects go and when to die.
struct Harness {
    crash: Arc<Crash>,
    pid: u32,
}

impl Harness {
    /// The side effect of `step`: one line appended with one `write` (whole, whatever kills the
    /// process), between the kill points before and inside the step.
    async fn side_effect(&self, step: &str) -> Result<String, ToolError> {
        self.crash.hold(&format!("kill:before:{step}"));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.crash.dir.join("effects"))?;
        file.write_all(format!("{step} {}\n", self.pid).as_bytes())?;
        self.crash.point(&format!("inside:{step}"));
        self.crash.hold(&format!("kill:inside:{step}"));
        Ok(format!("{step}@{}", self.pid))
    }

    /// Called right after step `step` returned: its value is recorded.
    fn after(&self, step: &str) {
        self.crash.point(&format!("after:{step}"));
        self.crash.hold(&format!("kill:after:{step}"));
    }
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ShipArgs {
    /// The release to ship.
    release: String,
}

#[derive(Serialize, JsonSchema)]
struct Shipped {
    release: String,
    steps: Vec<String>,
    answer: String,
}

/// Ships a release: builds and tests it, asks before publishing, publishes, waits a minute and
/// verifies.
#[tool(effect = write, workflow = execute)]
async fn ship(
    args: ShipArgs,
    ctx: WorkflowContext,
    harness: State<Harness>,
) -> Result<Shipped, ToolError> {
    let mut steps = Vec::new();
    for name in &SHIP_STEPS[..2] {
        let value: String = ctx.step(name, harness.side_effect(name)).await?;
        harness.after(name);
        steps.push(value);
    }
    let answer = ctx
        .ask(
            AskRequest::new(format!("Publish {}?", args.release))
                .display(AskDisplay::Confirmation)
                .option(AskOption::new("go", "Publish").style(OptionStyle::Primary))
                .option(AskOption::new("stop", "Hold").style(OptionStyle::Danger)),
        )
        .await?;
    if !answer.chose("go") {
        return Ok(Shipped {
            release: args.release,
            steps,
            answer: "stop".into(),
        });
    }
    let published: String = ctx.step("publish", harness.side_effect("publish")).await?;
    harness.after("publish");
    steps.push(published);
    ctx.sleep(Duration::from_millis(SLEEP_MS)).await?;
    let verified: String = ctx.step("verify", harness.side_effect("verify")).await?;
    harness.after("verify");
    steps.push(verified);
    Ok(Shipped {
        release: args.release,
        steps,
        answer: "go".into(),
    })
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ProvisionArgs {
    /// The customer to provision.
    customer: String,
}

#[derive(Serialize, JsonSchema)]
struct Provisioned {
    customer: String,
    items: Vec<String>,
}

/// Provisions a customer: tenant, quota, welcome mail.
#[tool(effect = write, durable)]
async fn provision(
    args: ProvisionArgs,
    ctx: DurableContext,
    harness: State<Harness>,
) -> Result<Provisioned, ToolError> {
    let mut items = Vec::new();
    for name in PROVISION_STEPS {
        let value: String = ctx.step(name, harness.side_effect(name)).await?;
        harness.after(name);
        items.push(value);
    }
    Ok(Provisioned {
        customer: args.customer,
        items,
    })
}

fn read_clock(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("clock"))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(CLOCK_START_MS)
}

/// Where the store dies, right after a write of the runtime's.
const POINTS: CrashPoints = CrashPoints {
    write_turn: turn_written,
    record_journal: journal_recorded,
    ..CrashPoints::NONE
};

fn turn_written(crash: &Crash, record: &TurnRecord) {
    // Answering or waking writes `running` once: the claim, before the body runs again.
    if record.status == TurnStatus::Running {
        match crash.action() {
            "answer" => crash.point("claim:answer"),
            "wake" => crash.point("claim:wake"),
            _ => {}
        }
    }
    // The resumed step closed (in the store); its results exist only in this process.
    if record.pending.is_none()
        && record.status == TurnStatus::Active
        && matches!(crash.action(), "answer" | "wake" | "recover")
    {
        crash.point("closed");
        crash.hold("kill:closed");
    }
}

fn journal_recorded(crash: &Crash, entry: &JournalEntry) {
    match entry.kind {
        EntryKind::Sleep => crash.point("journal:sleep"),
        EntryKind::Ask => crash.point("journal:answer"),
        EntryKind::Step | EntryKind::Patch => {}
        other => panic!("the harness does not know journal entries of kind {other:?}"),
    }
}

fn runtime(store: impl Store, crash: Arc<Crash>, now_ms: u64) -> Runtime {
    builder([ship::TOOL, provision::TOOL])
        .store(store)
        .state(Harness {
            crash,
            pid: std::process::id(),
        })
        // A clock fixed for the life of the process, read from the run's clock file.
        .options(ManualClock::at(now_ms).options())
        .build()
        .unwrap()
}

fn calls() -> Vec<ToolCall> {
    vec![
        ToolCall::new("ship", "ship", json!({ "release": RELEASE }).to_string()),
        ToolCall::new(
            "provision",
            "provision",
            json!({ "customer": "acme" }).to_string(),
        ),
    ]
}

/// Results as the parent compares them: call id, output, whether an error.
fn results_json(results: &[Arc<CallResult>]) -> Value {
    results
        .iter()
        .map(|r| json!({ "call_id": r.call_id, "output": r.output, "is_error": r.is_error }))
        .collect()
}

fn step_json(outcome: &StepOutcome) -> Value {
    let results = results_json;
    match outcome {
        StepOutcome::Completed { results: r, .. } => json!({ "completed": results(r) }),
        StepOutcome::Waiting {
            results: r,
            requests,
            ..
        } => json!({
            "waiting": results(r),
            "questions": requests
                .iter()
                .filter(|q| q.kind == RequestKind::Question)
                .map(|q| q.request_id.clone())
                .collect::<Vec<_>>(),
        }),
    }
}

/// The pending question of a parked turn.
fn pending_question(record: &TurnRecord) -> Option<String> {
    record
        .pending
        .iter()
        .flat_map(|step| &step.requests)
        .find(|r| r.kind == RequestKind::Question && r.is_pending())
        .map(|r| r.request_id.clone())
}

/// One child process: does the one thing the store says comes next, crashing where armed.
#[tokio::test]
async fn child_entry() {
    let Some(dir) = std::env::var_os(CHILD).map(PathBuf::from) else {
        return;
    };
    let crash = Arc::new(Crash::new(dir.clone(), Crash::plan_from_env(PLAN), "start"));
    let store = CrashStore::new(
        SqliteStore::open(dir.join("db")).unwrap(),
        crash.clone(),
        POINTS,
    );
    let rt = runtime(store, crash.clone(), read_clock(&dir));
    let turn_file = dir.join("turn");
    let outcome = match std::fs::read_to_string(&turn_file) {
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
            step_json(&turn.step(calls()).await.unwrap())
        }
        Ok(turn_id) => {
            let (record, _) = rt.store().turn(&turn_id).await.unwrap().expect("the turn");
            match (record.status, pending_question(&record)) {
                (TurnStatus::Running, _) => {
                    crash.set_action("recover");
                    let recovered = rt.recover().await.unwrap();
                    match recovered.iter().find(|(id, _)| *id == turn_id) {
                        Some((_, outcome)) => step_json(outcome),
                        None => json!({ "unexpected": "recover found nothing to recover" }),
                    }
                }
                (TurnStatus::Waiting, Some(question)) => {
                    crash.set_action("answer");
                    let answer = InputResponse::choose(question, Some(alice()), "go");
                    match rt.respond(answer).await.unwrap() {
                        RespondOutcome::Resumed(outcome) => step_json(&outcome),
                        other => json!({ "unexpected": format!("answering: {other:?}") }),
                    }
                }
                (TurnStatus::Waiting, None) => {
                    crash.set_action("wake");
                    let woken = rt.wake_due().await.unwrap();
                    match woken.iter().find(|(id, _)| *id == turn_id) {
                        Some((_, outcome)) => step_json(outcome),
                        None => json!({ "unexpected": "wake_due woke nothing" }),
                    }
                }
                (status, _) => json!({ "unexpected": format!("the turn is {status:?}") }),
            }
        }
    };
    // Parked: die before telling anyone (the turn lives in the store alone).
    if outcome.get("waiting").is_some() {
        let asked = outcome["questions"]
            .as_array()
            .is_some_and(|q| !q.is_empty());
        let parked = if asked { "parked:ask" } else { "parked:sleep" };
        crash.point(parked);
        crash.hold(&format!("kill:{parked}"));
    }
    println!("OUTCOME {outcome}");
}

// ---------------------------------------------------------------------------------------------
// The parent: plans, children, observation, accounting.

/// xorshift64*: deterministic, seeded per run.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        let mut rng = XorShift((seed ^ 0x9E37_79B9_7F4A_7C15) | 1);
        for _ in 0..4 {
            rng.next();
        }
        rng
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        // xorshift64*: the multiply mixes the weak low bits.
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`, from the high bits.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The exit points a plan picks from (kills are picked apart).
fn exit_points() -> Vec<String> {
    let mut points: Vec<String> = all_steps()
        .flat_map(|s| [format!("inside:{s}"), format!("after:{s}")])
        .collect();
    points.extend(
        [
            "parked:ask",
            "parked:sleep",
            "journal:sleep",
            "journal:answer",
            "claim:answer",
            "claim:wake",
            "closed",
        ]
        .map(str::to_owned),
    );
    points
}

/// The kill points a plan picks from: before a step's side effect, between it and the step's
/// record, right after the record (while later steps run); once the turn parked; right after
/// the resumed step closed.
fn kill_points() -> Vec<String> {
    let mut points: Vec<String> = all_steps()
        .flat_map(|s| ["before", "inside", "after"].map(|phase| format!("kill:{phase}:{s}")))
        .collect();
    points.extend(["kill:parked:ask", "kill:parked:sleep", "kill:closed"].map(str::to_owned));
    points
}

/// The step a crash point is in or around, if any.
fn step_of(point: &str) -> Option<&str> {
    let point = point.strip_prefix("kill:").unwrap_or(point);
    let (phase, step) = point.split_once(':')?;
    matches!(phase, "before" | "inside" | "after").then_some(step)
}

/// What a crash point is about: its step, or the point without `kill:` (`parked:ask`,
/// `closed`, ...).
fn subject(point: &str) -> &str {
    step_of(point).unwrap_or_else(|| point.strip_prefix("kill:").unwrap_or(point))
}

/// The crash points of one run: one to three, distinct, at most one per subject (the turn parks
/// on each and closes once, so two points there would pass one), at most one kill (about one
/// crash in five).
fn plan(rng: &mut XorShift) -> Vec<String> {
    let count = match rng.below(100) {
        0..55 => 1,
        55..85 => 2,
        _ => 3,
    };
    let exits = exit_points();
    let kills = kill_points();
    let mut plan: Vec<String> = Vec::new();
    while plan.len() < count {
        let point = if rng.below(5) == 0 && !plan.iter().any(|p| p.starts_with("kill:")) {
            kills[rng.below(kills.len() as u64) as usize].clone()
        } else {
            exits[rng.below(exits.len() as u64) as usize].clone()
        };
        if !plan.iter().any(|p| subject(p) == subject(&point)) {
            plan.push(point);
        }
    }
    plan
}

/// What the parent sees in a run's files once a child is gone.
#[derive(Default)]
struct Seen {
    status: Option<TurnStatus>,
    sleeping_until: Option<u64>,
    /// The provision call's result, once the parked step holds it.
    provision_result: Option<Value>,
    /// The results of the last closed step, as the turn record keeps them
    /// (`Turn::last_results`).
    last_results: Option<Value>,
    journals: BTreeMap<&'static str, Vec<JournalEntry>>,
    counts: BTreeMap<String, usize>,
    last_pid: BTreeMap<String, String>,
}

impl Seen {
    fn count(&self, step: &str) -> usize {
        self.counts.get(step).copied().unwrap_or(0)
    }

    fn recorded(&self, step: &str) -> Option<&JournalEntry> {
        self.journals
            .get(call_of(step))?
            .iter()
            .find(|e| e.kind == EntryKind::Step && e.name == step)
    }
}

fn observe(store_rt: &tokio::runtime::Runtime, dir: &Path) -> Seen {
    let mut seen = Seen::default();
    for line in std::fs::read_to_string(dir.join("effects"))
        .unwrap_or_default()
        .lines()
    {
        let (step, pid) = line.split_once(' ').unwrap_or((line, ""));
        *seen.counts.entry(step.to_owned()).or_insert(0) += 1;
        seen.last_pid.insert(step.to_owned(), pid.to_owned());
    }
    let Ok(turn_id) = std::fs::read_to_string(dir.join("turn")) else {
        return seen;
    };
    store_rt.block_on(async {
        let store = SqliteStore::open(dir.join("db")).unwrap();
        if let Some((record, _)) = store.turn(&turn_id).await.unwrap() {
            seen.status = Some(record.status);
            seen.last_results = record
                .last_step
                .as_ref()
                .map(|step| results_json(&step.results));
            for call in record.pending.iter().flat_map(|p| &p.calls) {
                match &call.state {
                    CallState::Sleeping { until_ms } => seen.sleeping_until = Some(*until_ms),
                    CallState::Finished { result } if call.call_id == "provision" => {
                        seen.provision_result = Some(result.output.clone());
                    }
                    _ => {}
                }
            }
        }
        for call in ["ship", "provision"] {
            let journal = store.journal(&format!("{turn_id}/{call}")).await.unwrap();
            seen.journals.insert(call, journal);
        }
    });
    seen
}

/// The journal each call ends with: (kind, name) by position.
fn expected_journal(call: &str) -> Vec<(EntryKind, String)> {
    if call == "provision" {
        return PROVISION_STEPS
            .iter()
            .map(|s| (EntryKind::Step, (*s).to_owned()))
            .collect();
    }
    vec![
        (EntryKind::Step, "build".into()),
        (EntryKind::Step, "test".into()),
        (EntryKind::Ask, "ask#2".into()),
        (EntryKind::Step, "publish".into()),
        (EntryKind::Sleep, "sleep#4".into()),
        (EntryKind::Step, "verify".into()),
    ]
}

/// How a child ended.
#[derive(Debug)]
enum Ended {
    /// It finished its action and printed its outcome.
    Normal(Value),
    /// It died at an exit point.
    Exited(String),
    /// It waited at a kill point, and the parent SIGKILLed it there.
    Killed(String),
    /// Anything else: a panic, a strange status, a child stuck for two minutes.
    Failed(String),
}

/// Totals over every run.
#[derive(Default)]
struct Totals {
    runs: usize,
    processes: usize,
    /// Crash points reached, by kind (`inside`, `after`, `kill`, `parked:ask`, ...).
    crashes: BTreeMap<String, usize>,
    /// Where the SIGKILLs landed.
    kills: BTreeMap<&'static str, usize>,
    /// Steps run twice because a crash fell between their side effect and their record, by the
    /// reason: the exit or the kill was inside the step, or the crash hit while another call's
    /// step was in that window.
    twice: BTreeMap<&'static str, usize>,
    /// Runs whose last child died right after the store closed their step: their results were
    /// read from the turn record.
    closed_then_died: usize,
    anomalies: Vec<String>,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.runs += other.runs;
        self.processes += other.processes;
        for (k, v) in other.crashes {
            *self.crashes.entry(k).or_insert(0) += v;
        }
        for (k, v) in other.kills {
            *self.kills.entry(k).or_insert(0) += v;
        }
        for (k, v) in other.twice {
            *self.twice.entry(k).or_insert(0) += v;
        }
        self.closed_then_died += other.closed_then_died;
        self.anomalies.extend(other.anomalies);
    }
}

/// Runs one child armed with `plan` to its end; SIGKILLs it where it waits at a kill point.
fn run_child(dir: &Path, plan: &[String]) -> Ended {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .env(PLAN, plan.join(","));
    match crash::run_child(dir, &mut command, Duration::from_secs(120)) {
        ChildEnd::Normal(stdout) => match stdout
            .lines()
            .find_map(|l| l.split_once("OUTCOME ").map(|(_, rest)| rest))
            .and_then(|l| serde_json::from_str(l).ok())
        {
            Some(outcome) => Ended::Normal(outcome),
            None => Ended::Failed(format!("no outcome:\n{stdout}")),
        },
        ChildEnd::Exited(point) => Ended::Exited(point),
        ChildEnd::Killed(point) => Ended::Killed(point),
        ChildEnd::Failed(why) => Ended::Failed(why),
    }
}

/// The kind of a crash point, for the totals: `inside`, `after`, `kill`, or the point itself.
fn kind_of(point: &str) -> String {
    if point.starts_with("kill:") {
        "kill".to_owned()
    } else if step_of(point).is_some() {
        point.split_once(':').map(|(k, _)| k.to_owned()).unwrap()
    } else {
        point.to_owned()
    }
}

/// Where a kill at `point` landed, for the totals.
fn landed(point: &str) -> &'static str {
    match point.strip_prefix("kill:").and_then(|p| p.split_once(':')) {
        Some(("before", _)) => "before the side effect",
        Some(("inside", _)) => "between the side effect and the record",
        Some(("after", _)) => "after the record, while later steps ran",
        Some(("parked", _)) => "after the turn parked",
        _ => "after the resumed step closed",
    }
}

/// The results the run owes the model, made of the recorded values.
fn expected_results(seen: &Seen) -> Value {
    let value = |step: &str| {
        seen.recorded(step)
            .map(|e| e.value.clone())
            .unwrap_or_default()
    };
    json!([
        {
            "call_id": "ship",
            "output": {
                "release": RELEASE,
                "steps": SHIP_STEPS.map(value),
                "answer": "go",
            },
            "is_error": false,
        },
        {
            "call_id": "provision",
            "output": { "customer": "acme", "items": PROVISION_STEPS.map(value) },
            "is_error": false,
        },
    ])
}

/// Drives run `index` to completion through child processes and checks it.
fn run_one(index: usize, seed: u64, store_rt: &tokio::runtime::Runtime) -> Totals {
    let mut totals = Totals {
        runs: 1,
        ..Totals::default()
    };
    let mut rng =
        XorShift::new(seed.wrapping_add((index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)));
    let plan_at_start = plan(&mut rng);
    let mut armed = plan_at_start.clone();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let label = format!("run {index} (plan {plan_at_start:?})");
    let anomaly = |totals: &mut Totals, what: String| {
        totals.anomalies.push(format!("{label}: {what}"));
    };

    let mut prev = Seen::default();
    // Side effects that happened without a record, per step: each adds one run.
    let mut lost: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut provision_result: Option<Value> = None;
    // How the last child ended, once the store closed the run's step.
    let mut closed: Option<Ended> = None;
    for _ in 0..MAX_PROCESSES {
        if let Some(until) = prev.sleeping_until {
            // The timer is due: move the clock the next process reads.
            if read_clock(dir) < until {
                std::fs::write(dir.join("clock"), until.to_string()).unwrap();
            }
        }
        let ended = run_child(dir, &armed);
        totals.processes += 1;
        let seen = observe(store_rt, dir);

        // Which crash point was reached, if any. One the child did not reach stays armed for
        // the next.
        let point = match &ended {
            Ended::Exited(point) | Ended::Killed(point) => Some(point.clone()),
            _ => None,
        };
        let killed = matches!(ended, Ended::Killed(_));
        if let Some(point) = &point {
            armed.retain(|p| p != point);
            *totals.crashes.entry(kind_of(point)).or_insert(0) += 1;
        }
        if let Ended::Failed(why) = &ended {
            anomaly(&mut totals, format!("a child failed: {why}"));
            break;
        }
        if let Some(point) = point.as_deref().filter(|_| killed) {
            *totals.kills.entry(landed(point)).or_insert(0) += 1;
        }
        // Where the turn is after a crash that is not in a step.
        let status_at = match point.as_deref().map(subject) {
            Some("parked:ask" | "parked:sleep") => Some(TurnStatus::Waiting),
            Some("claim:answer" | "claim:wake") => Some(TurnStatus::Running),
            Some("closed") => Some(TurnStatus::Active),
            _ => seen.status,
        };
        if seen.status != status_at {
            anomaly(
                &mut totals,
                format!(
                    "the child ended at {point:?}, the turn is {:?}",
                    seen.status
                ),
            );
        }

        // Journals only grow, and what they recorded stays as recorded.
        for (call, journal) in &seen.journals {
            let expected = expected_journal(call);
            let shape: Vec<(EntryKind, String)> =
                journal.iter().map(|e| (e.kind, e.name.clone())).collect();
            let positions_ok = journal
                .iter()
                .enumerate()
                .all(|(i, e)| e.position as usize == i);
            if !positions_ok || !expected.starts_with(&shape) {
                anomaly(&mut totals, format!("the {call} journal is {shape:?}"));
            }
            let before = prev.journals.get(call).map(Vec::as_slice).unwrap_or(&[]);
            if !journal.starts_with(before) {
                anomaly(
                    &mut totals,
                    format!(
                        "the {call} journal changed a recorded entry: {before:?} -> {journal:?}"
                    ),
                );
            }
        }
        if let (Some(before), Some(now)) = (&provision_result, &seen.provision_result)
            && before != now
        {
            anomaly(
                &mut totals,
                format!("provision's stored result changed: {before} -> {now}"),
            );
        }
        if provision_result.is_none() {
            provision_result.clone_from(&seen.provision_result);
        }

        // Side effects: at most one per step per process, none for a recorded step, and one
        // without a record only when this process died between them.
        let mut windows: BTreeMap<&str, usize> = BTreeMap::new();
        for step in all_steps() {
            let (before, after) = (prev.count(step), seen.count(step));
            let ran = after.saturating_sub(before);
            let was_recorded = prev.recorded(step).is_some();
            let recorded = seen.recorded(step).is_some();
            if after < before || ran > 1 {
                anomaly(
                    &mut totals,
                    format!("`{step}` ran {before} then {after} times"),
                );
            }
            if was_recorded && ran > 0 {
                anomaly(
                    &mut totals,
                    format!("`{step}` ran again after it was recorded"),
                );
            }
            // The crash point in or around this step, without `kill:`.
            let at = point
                .as_deref()
                .filter(|p| step_of(p) == Some(step))
                .map(|p| p.strip_prefix("kill:").unwrap_or(p));
            let phase = at.and_then(|p| p.split_once(':')).map(|(phase, _)| phase);
            let as_expected = match phase {
                Some("before") => ran == 0 && !recorded,
                Some("inside") => ran == 1 && !recorded,
                Some("after") => recorded,
                _ => true,
            };
            if !as_expected {
                anomaly(
                    &mut totals,
                    format!(
                        "the child ended at {point:?} with `{step}` run {ran} time(s) in it, recorded: {recorded}"
                    ),
                );
            }
            if ran == 1 && !recorded {
                let Some(point) = point.as_deref() else {
                    anomaly(
                        &mut totals,
                        format!(
                            "`{step}` ran without a record in a process that did not crash ({ended:?})"
                        ),
                    );
                    continue;
                };
                // A call runs its steps one at a time: one of them at most is caught between
                // its side effect and its record.
                let in_window = windows.entry(call_of(step)).or_insert(0);
                *in_window += 1;
                if *in_window > 1 {
                    anomaly(
                        &mut totals,
                        format!(
                            "`{}` had two steps without a record at {point}",
                            call_of(step)
                        ),
                    );
                }
                let why = if phase == Some("inside") && killed {
                    "SIGKILL while waiting between the side effect and the record"
                } else if phase == Some("inside") {
                    "exit inside the step, after its side effect"
                } else if !matches!(subject(point), "parked:ask" | "parked:sleep" | "closed")
                    && step_of(point).is_none_or(|s| call_of(s) != call_of(step))
                {
                    // Both calls run in one process: the other one may be past a side effect,
                    // its record not yet written.
                    "crash while the other call's step was in that window"
                } else {
                    anomaly(
                        &mut totals,
                        format!("`{step}` ran without a record at crash point {point}"),
                    );
                    continue;
                };
                *lost.entry(step).or_insert(0) += 1;
                *totals.twice.entry(why).or_insert(0) += 1;
            }
        }

        match &ended {
            Ended::Normal(outcome) if outcome.get("unexpected").is_some() => {
                anomaly(
                    &mut totals,
                    format!("a child found {}", outcome["unexpected"]),
                );
            }
            Ended::Normal(outcome) => {
                // Parked: the provision result it reports is the one on record.
                if let Some(result) = outcome["waiting"]
                    .as_array()
                    .and_then(|r| r.iter().find(|r| r["call_id"] == "provision"))
                    && Some(&result["output"]) != seen.provision_result.as_ref()
                {
                    anomaly(
                        &mut totals,
                        format!(
                            "a parked step reported {result}, the store holds {:?}",
                            seen.provision_result
                        ),
                    );
                }
            }
            _ => {}
        }
        prev = seen;
        // The step closed in the store: the run is over, whether or not its child lived to
        // report the results.
        if prev.status == Some(TurnStatus::Active) {
            closed = Some(ended);
            break;
        }
    }

    let Some(last) = closed else {
        let processes = totals.processes;
        anomaly(
            &mut totals,
            format!(
                "did not complete after {} processes; the turn is {:?}, crash points left {armed:?}",
                processes, prev.status
            ),
        );
        return totals;
    };
    if !armed.is_empty() {
        anomaly(
            &mut totals,
            format!("crash points never reached: {armed:?}"),
        );
    }

    // Every step's side effect: once, plus once per crash between it and its record; the
    // recorded value is from the last run, the one that was recorded.
    for step in all_steps() {
        let expected = 1 + lost.get(step).copied().unwrap_or(0);
        if prev.count(step) != expected {
            anomaly(
                &mut totals,
                format!(
                    "`{step}` ran {} times, expected {expected}",
                    prev.count(step)
                ),
            );
        }
        let value = prev.recorded(step).map(|e| e.value.clone());
        let last = prev
            .last_pid
            .get(step)
            .map(|pid| json!(format!("{step}@{pid}")));
        if value.is_none() || value != last {
            anomaly(
                &mut totals,
                format!("`{step}` recorded {value:?}, its last run was {last:?}"),
            );
        }
    }
    // The journals hold every step once, in order.
    for (call, journal) in &prev.journals {
        let shape: Vec<(EntryKind, String)> =
            journal.iter().map(|e| (e.kind, e.name.clone())).collect();
        if shape != expected_journal(call) {
            anomaly(
                &mut totals,
                format!("the final {call} journal is {shape:?}"),
            );
        }
    }
    // The sleep ends where its first run put it, however late and often it was replayed.
    let until = prev.journals["ship"]
        .iter()
        .find(|e| e.kind == EntryKind::Sleep)
        .map(|e| e.value["until_ms"].clone());
    if until != Some(json!(CLOCK_START_MS + SLEEP_MS)) {
        anomaly(
            &mut totals,
            format!("the sleep was recorded to end at {until:?}"),
        );
    }
    // The results carry the recorded values: in the turn record, which a host restarted after
    // the close hands to the model, and in what the last child reported if it lived to.
    let expected = expected_results(&prev);
    if prev.last_results.as_ref() != Some(&expected) {
        anomaly(
            &mut totals,
            format!(
                "the turn record holds the results {:?}, expected {expected}",
                prev.last_results
            ),
        );
    }
    match &last {
        Ended::Normal(outcome) if outcome["completed"] != expected => anomaly(
            &mut totals,
            format!(
                "the run ended with {}, expected {expected}",
                outcome["completed"]
            ),
        ),
        Ended::Normal(_) => {}
        Ended::Exited(point) | Ended::Killed(point) if subject(point) == "closed" => {
            totals.closed_then_died += 1;
        }
        other => anomaly(
            &mut totals,
            format!("the step closed, and its child ended {other:?}"),
        ),
    }
    if let Some(result) = &provision_result
        && *result != expected[1]["output"]
    {
        anomaly(
            &mut totals,
            format!("provision's recorded result {result} was lost"),
        );
    }
    totals
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Kills the runtime at randomized points, restarts it in fresh processes until every run
/// completes, and checks what each side effect and each record came to.
#[test]
fn runs_survive_crashes_at_randomized_points() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let runs = env_number(RUNS).map_or(DEFAULT_RUNS, |n| n as usize);
    let seed = env_number(SEED).unwrap_or(DEFAULT_SEED);
    let jobs = env_number(JOBS).map_or(2, |n| n.max(1) as usize);
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let totals = Mutex::new(Totals::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let store_rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= runs {
                        break;
                    }
                    let run = run_one(index, seed, &store_rt);
                    totals.lock().unwrap().add(run);
                }
            });
        }
    });
    let totals = totals.into_inner().unwrap();
    let crashes: usize = totals.crashes.values().sum();
    let twice: usize = totals.twice.values().sum();
    // To the real stderr: libtest captures `println!` of passing tests, and the counts are
    // meant to be read in CI logs.
    let _ = writeln!(
        std::io::stderr(),
        "crash harness: {} runs (seed {seed:#x}, {jobs} at once), {} child processes, {:.1} s",
        totals.runs,
        totals.processes,
        started.elapsed().as_secs_f64()
    );
    let _ = writeln!(std::io::stderr(), "crashes: {crashes}");
    for (kind, n) in &totals.crashes {
        let _ = writeln!(std::io::stderr(), "  {kind}: {n}");
    }
    let _ = writeln!(std::io::stderr(), "SIGKILLs landed:");
    for (landed, n) in &totals.kills {
        let _ = writeln!(std::io::stderr(), "  {landed}: {n}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "steps run twice (expected, the crash fell between side effect and record): {twice}"
    );
    for (why, n) in &totals.twice {
        let _ = writeln!(std::io::stderr(), "  {why}: {n}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "runs whose last child died right after the store closed their step (results read from the turn record): {}",
        totals.closed_then_died
    );
    let _ = writeln!(std::io::stderr(), "anomalies: {}", totals.anomalies.len());
    for anomaly in totals.anomalies.iter().take(20) {
        let _ = writeln!(std::io::stderr(), "  {anomaly}");
    }
    assert_eq!(totals.runs, runs);
    assert!(
        totals.anomalies.is_empty(),
        "{} anomalies; the first: {}",
        totals.anomalies.len(),
        totals.anomalies[0]
    );
    if runs >= 100 {
        // The sample covers every kind of crash point, and the window between side effect and
        // record was hit both ways.
        for kind in [
            "inside",
            "after",
            "kill",
            "parked:ask",
            "parked:sleep",
            "journal:sleep",
        ] {
            assert!(
                totals.crashes.get(kind).is_some_and(|n| *n > 0),
                "no {kind} crash"
            );
        }
        for kind in ["journal:answer", "claim:answer", "claim:wake", "closed"] {
            assert!(
                totals.crashes.get(kind).is_some_and(|n| *n > 0),
                "no {kind} crash"
            );
        }
        for kind in ["before", "inside", "after", "parked"] {
            let landed = landed(&format!("kill:{kind}:x"));
            assert!(
                totals.kills.get(landed).is_some_and(|n| *n > 0),
                "no SIGKILL {landed}"
            );
        }
        assert!(twice > 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Two windows armed on their own: each was a runtime defect, and each test keeps it fixed.

fn store_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs one unarmed child and expects it to park.
fn park(dir: &Path) -> Value {
    let ended = run_child(dir, &[]);
    match ended {
        Ended::Normal(outcome) if outcome.get("waiting").is_some() => outcome,
        other => panic!("expected the child to park: {other:?}"),
    }
}

/// A child that wakes a turn dies right after the store write that closed the step, before it
/// handed the results to anyone. The turn record keeps them with the close (`last_step`): a
/// host restarted here hands them to the model through `Turn::last_results`. The randomized runs
/// arm the same window (`closed`, `kill:closed`) among their points.
#[test]
fn a_step_closed_just_before_a_crash_keeps_its_results() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store_rt = store_runtime();
    park(dir); // start: parks on the question
    park(dir); // answer: parks on the timer
    let until = observe(&store_rt, dir)
        .sleeping_until
        .expect("the workflow sleeps");
    std::fs::write(dir.join("clock"), until.to_string()).unwrap();
    let ended = run_child(dir, &["closed".to_owned()]);
    assert!(
        matches!(&ended, Ended::Exited(point) if point == "closed"),
        "{ended:?}"
    );

    let seen = observe(&store_rt, dir);
    assert_eq!(seen.status, Some(TurnStatus::Active), "the step closed");
    for step in all_steps() {
        assert_eq!(seen.count(step), 1, "{step}");
        assert!(seen.recorded(step).is_some(), "{step}");
    }
    // A fresh runtime on the same file, as a restarted host has.
    let crash = Arc::new(Crash::new(dir.to_path_buf(), Vec::new(), "check"));
    let last = store_rt.block_on(async {
        let rt = runtime(
            SqliteStore::open(dir.join("db")).unwrap(),
            crash,
            read_clock(dir),
        );
        let turn_id = std::fs::read_to_string(dir.join("turn")).unwrap();
        let turn = rt.turn(&turn_id).await.unwrap();
        turn.last_results().await.unwrap()
    });
    // What the model is owed: both calls' outputs, made of the recorded values.
    let owed = expected_results(&seen);
    assert_eq!(
        last.map(|step| results_json(&step.results)),
        Some(owed),
        "the process died right after the store closed the resumed step: the turn record must \
         keep the results it owed the model"
    );
}

/// A child dies right after it journaled an answer (`go`), before it settled the question in
/// the turn. Whoever answers next, differently (`stop`), does not change it: the answer on
/// record settles the question and the body resumes with `go`, whatever answer comes next.
#[test]
fn an_answer_journaled_by_a_process_that_died_still_settles_its_question() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store_rt = store_runtime();
    let parked = park(dir);
    let question = parked["questions"][0].as_str().unwrap().to_owned();
    let ended = run_child(dir, &["journal:answer".to_owned()]);
    assert!(
        matches!(&ended, Ended::Exited(point) if point == "journal:answer"),
        "{ended:?}"
    );
    let seen = observe(&store_rt, dir);
    assert_eq!(seen.status, Some(TurnStatus::Waiting));
    assert!(
        seen.journals["ship"]
            .iter()
            .any(|e| e.kind == EntryKind::Ask),
        "the answer is journaled"
    );

    // A fresh runtime on the same file; the person answers again, differently.
    let crash = Arc::new(Crash::new(dir.to_path_buf(), Vec::new(), "answer"));
    let (outcome, record) = store_rt.block_on(async {
        let rt = runtime(
            SqliteStore::open(dir.join("db")).unwrap(),
            crash,
            read_clock(dir),
        );
        let outcome = rt
            .respond(InputResponse::choose(&question, Some(alice()), "stop"))
            .await
            .unwrap();
        let turn_id = std::fs::read_to_string(dir.join("turn")).unwrap();
        let (record, _) = rt.store().turn(&turn_id).await.unwrap().unwrap();
        (outcome, record)
    });
    let seen = observe(&store_rt, dir);
    assert!(
        pending_question(&record).as_deref() != Some(question.as_str()),
        "the answer `go` is journaled, yet the question is still pending after a second answer \
         came back {outcome:?} and the turn is {:?}: an answer that differs from the journaled \
         one must settle the request with the journaled answer, or the body never resumes",
        record.status
    );
    // The first answer on record wins: the body went on with `go`.
    assert_eq!(seen.count("publish"), 1, "{outcome:?}");
}
