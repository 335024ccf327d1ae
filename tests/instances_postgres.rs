//! Several runtime instances on one PostgreSQL database, as separate processes.
//!
//! The parent test re-runs this test executable (`--exact child_entry`) as instances: each opens
//! the same database (a fresh one per test, created from `TOOLWRIGHT_TEST_POSTGRES_URL`), runs
//! [`Runtime::run_worker`] with a short lease, does its jobs and then keeps working until the
//! parent leaves a stop file. Tools append their side effects to a file shared by every process,
//! so "exactly once" is counted across processes. The parent kills (`SIGKILL`) and freezes
//! (`SIGSTOP`) instances and reads the outcome from the database.
//!
//! Without a database these tests fail in CI (`CI` set) and are skipped elsewhere; start one
//! with `scripts/postgres start`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright::prelude::*;
use toolwright::runtime::postgres_sql::{AssertSqlSafe, PgPool, query, query_scalar};
use toolwright::runtime::{
    Clock, InputResponse, Options, PgStep, PostgresStore, RespondOutcome, Runtime, SessionSpec,
    StepOutcome, Store, ToolCall, TurnStatus,
};
use toolwright::{Caller, Registry};

#[path = "../examples/seed/mod.rs"]
#[allow(dead_code)] // reason: only the deploy workflow is driven here
mod seed;
mod support;

use support::dana;
use support::effects::EffectLog;

/// Prints a test's counts to the real stderr: libtest captures `eprintln!` of passing tests,
/// and these counts are meant to be read in CI logs.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Set in a child: the jobs it runs, `;`-separated.
const JOBS: &str = "TOOLWRIGHT_PG_JOBS";
/// The database every instance of a test opens.
const URL: &str = "TOOLWRIGHT_PG_URL";
/// The directory shared by the processes of a test (effects, clock, reports, stop file).
const DIR: &str = "TOOLWRIGHT_PG_DIR";
/// The instance's name (its leases' owner).
const NAME: &str = "TOOLWRIGHT_PG_NAME";
/// How long an instance's lease lasts.
const LEASE: Duration = Duration::from_millis(1500);

// ---------------------------------------------------------------------------------------------
// Tools

#[derive(Deserialize, JsonSchema, ToolInput)]
struct EffectArgs {
    /// Which parked turn the call belongs to.
    n: u64,
}

/// Records one side effect; always asks first.
#[tool(effect = write, approval = always)]
async fn record_effect(args: EffectArgs, sink: State<EffectLog>) -> Result<u64, ToolError> {
    sink.append(&format!("done {} {}", args.n, std::process::id()))?;
    Ok(args.n)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RunArgs {
    /// The run's name in the effects file.
    run: String,
    /// How long each step works, in milliseconds.
    step_ms: u64,
}

/// Five durable steps; each records its start and end and returns the pid that ran it.
#[tool(effect = write, durable)]
async fn provision(
    args: RunArgs,
    ctx: DurableContext,
    sink: State<EffectLog>,
) -> Result<Vec<u32>, ToolError> {
    let mut pids = Vec::new();
    for k in 0..5 {
        let pid: u32 = ctx
            .step(format!("step-{k}"), async {
                let pid = std::process::id();
                sink.append(&format!("start {} {k} {pid}", args.run))?;
                tokio::time::sleep(Duration::from_millis(args.step_ms)).await;
                sink.append(&format!("end {} {k} {pid}", args.run))?;
                Ok(pid)
            })
            .await?;
        pids.push(pid);
    }
    Ok(pids)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct NapArgs {
    /// The run's name in the effects file.
    run: String,
}

/// A step, a durable sleep of two seconds, a step.
#[tool(effect = write, workflow = execute)]
async fn nap(
    args: NapArgs,
    ctx: WorkflowContext,
    sink: State<EffectLog>,
) -> Result<u32, ToolError> {
    ctx.step("before", async {
        sink.append(&format!("before {} {}", args.run, std::process::id()))
    })
    .await?;
    ctx.sleep(Duration::from_secs(2)).await?;
    ctx.step("after", async {
        sink.append(&format!("after {} {}", args.run, std::process::id()))?;
        Ok(std::process::id())
    })
    .await
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ChargeArgs {
    /// The order to charge.
    order: String,
}

/// Charges an order: the row goes into the store's own database in the transaction that
/// records the step. On its first attempt (no `hung` file yet) it hangs inside the transaction,
/// after its insert, so the test can kill it there.
#[tool(effect = write, durable)]
async fn charge(
    args: ChargeArgs,
    ctx: DurableContext,
    sink: State<EffectLog>,
) -> Result<i64, ToolError> {
    let hang = sink.0.0.with_file_name("hung");
    let effects = sink.0.0.clone();
    let order = args.order.clone();
    let id: i64 = ctx
        .pg_step("insert-charge", move |db| {
            Box::pin(async move {
                let id: i64 = query_scalar(
                    "INSERT INTO charges (order_id, pid) VALUES ($1, $2) RETURNING id",
                )
                .bind(&order)
                .bind(i64::from(std::process::id()))
                .fetch_one(&mut *db)
                .await
                .map_err(|e| ToolError::new(format!("charging failed: {e}")))?;
                EffectLog(effects).append(&format!("inserted {order} {}", std::process::id()))?;
                if !hang.exists() {
                    std::fs::write(&hang, "")?;
                    tokio::time::sleep(Duration::from_secs(300)).await;
                }
                Ok(id)
            })
        })
        .await?;
    sink.append(&format!("charged {} {}", args.order, std::process::id()))?;
    Ok(id)
}

/// The system clock plus an offset the parent writes to `clock` in the test directory, so that
/// the deploy's five-minute sleep passes at once.
struct FileClock(PathBuf);

impl Clock for FileClock {
    fn now_ms(&self) -> u64 {
        let offset: u64 = std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0);
        toolwright::runtime::SystemClock.now_ms() + offset
    }
}

// ---------------------------------------------------------------------------------------------
// The child: one instance

fn instance(url: &str, store: PostgresStore, dir: &Path, name: &str) -> Runtime {
    let _ = url;
    Runtime::builder(Registry::collect().expect("the test tools collect"))
        .store(store)
        .state(EffectLog(dir.join("effects")))
        .state(seed::ops::OpsBackend::default())
        .state(seed::release::Releases::default())
        .state(seed::treehole::Treehole::default())
        .state(seed::wallet::Wallet::default())
        .options(Options {
            clock: Arc::new(FileClock(dir.join("clock"))),
            instance: name.to_owned(),
            lease: LEASE,
            ..Default::default()
        })
        .build()
        .unwrap()
}

/// Writes `value` to `dir/file` atomically (a rename), so a reader never sees half of it.
fn publish(dir: &Path, file: &str, value: &Value) {
    let tmp = dir.join(format!("{file}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, value.to_string()).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_entry() {
    let Ok(jobs) = std::env::var(JOBS) else {
        return;
    };
    let url = std::env::var(URL).unwrap();
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let name = std::env::var(NAME).unwrap();
    let store = PostgresStore::connect(&url).await.unwrap();
    let rt = instance(&url, store, &dir, &name);
    let _worker = rt.run_worker(Duration::from_millis(100));
    for job in jobs.split(';').filter(|j| !j.is_empty()) {
        let (verb, arg) = job.split_once(':').unwrap_or((job, ""));
        match verb {
            "park" => park(&rt, &dir, arg.parse().unwrap()).await,
            "answer" => answer(&rt, &dir, &name, arg.parse().unwrap()).await,
            "runs" => start_runs(&rt, &dir, arg).await,
            "slow" => slow_run(&rt, &dir, &name).await,
            "deploy" => deploy(&rt, &dir).await,
            "respond" => respond(&rt, &dir, arg).await,
            "charge" => start_charge(&rt, &dir).await,
            other => panic!("unknown job {other}"),
        }
    }
    // Keep working (taking over, waking timers) until the parent is done.
    while !dir.join("stop").exists() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Parks `count` turns, each on the approval of one `record_effect` call.
async fn park(rt: &Runtime, dir: &Path, count: u64) {
    let session = rt.open_session(SessionSpec::new("parked")).await.unwrap();
    let mut parked = Vec::new();
    for n in 0..count {
        let turn = session.begin_turn(None, Caller::Model).await.unwrap();
        let outcome = turn
            .step(vec![ToolCall::new(
                "c1",
                "record_effect",
                json!({ "n": n }).to_string(),
            )])
            .await
            .unwrap();
        let StepOutcome::Waiting { requests, .. } = outcome else {
            panic!("expected the call to wait for approval: {outcome:?}")
        };
        parked.push(json!([n, turn.id(), requests[0].request_id]));
    }
    publish(dir, "parked", &Value::Array(parked));
}

/// Answers every parked request, in an order of its own.
async fn answer(rt: &Runtime, dir: &Path, name: &str, seed: u64) {
    let parked: Vec<(u64, String, String)> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("parked")).unwrap()).unwrap();
    let mut order: Vec<usize> = (0..parked.len()).collect();
    // A small xorshift shuffle: each instance answers in its own order.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let mut resumed = Vec::new();
    let mut lost = 0_u64;
    for index in order {
        let (_, turn_id, request_id) = &parked[index];
        match rt
            .respond(InputResponse::approve(request_id, Some(dana())))
            .await
            .unwrap()
        {
            RespondOutcome::Resumed(_) => resumed.push(turn_id.clone()),
            _ => lost += 1,
        }
    }
    publish(
        dir,
        &format!("answered-{name}"),
        &json!({ "resumed": resumed, "lost": lost }),
    );
}

/// Starts `runs` provision calls and `naps` nap calls, each in a turn of its own, without
/// waiting for them.
async fn start_runs(rt: &Runtime, dir: &Path, arg: &str) {
    let (runs, naps) = arg.split_once(',').unwrap();
    let (runs, naps): (u64, u64) = (runs.parse().unwrap(), naps.parse().unwrap());
    let session = rt.open_session(SessionSpec::new("runs")).await.unwrap();
    let mut turns = Vec::new();
    for n in 0..runs + naps {
        let turn = session.begin_turn(None, Caller::Model).await.unwrap();
        let call = if n < runs {
            ToolCall::new(
                "c1",
                "provision",
                json!({ "run": format!("run{n}"), "step_ms": 300 }).to_string(),
            )
        } else {
            ToolCall::new("c1", "nap", json!({ "run": format!("nap{n}") }).to_string())
        };
        turns.push(json!([n < runs, turn.id()]));
        tokio::spawn(async move {
            let _ = turn.step(vec![call]).await;
        });
    }
    publish(dir, "runs", &Value::Array(turns));
}

/// One provision call with slow steps; reports how its step ended.
async fn slow_run(rt: &Runtime, dir: &Path, name: &str) {
    let session = rt.open_session(SessionSpec::new("slow")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    publish(dir, "slow-turn", &json!(turn.id()));
    let outcome = turn
        .step(vec![ToolCall::new(
            "c1",
            "provision",
            json!({ "run": "slow", "step_ms": 800 }).to_string(),
        )])
        .await;
    let report = match outcome {
        Ok(outcome) => json!({ "ok": format!("{outcome:?}") }),
        Err(error) => json!({ "error": error.to_string() }),
    };
    publish(dir, &format!("slow-{name}"), &report);
}

/// Starts one `charge` call without waiting for it.
async fn start_charge(rt: &Runtime, dir: &Path) {
    let session = rt.open_session(SessionSpec::new("charge")).await.unwrap();
    let turn = session.begin_turn(None, Caller::Model).await.unwrap();
    publish(dir, "charge-turn", &json!(turn.id()));
    tokio::spawn(async move {
        let _ = turn
            .step(vec![ToolCall::new(
                "c1",
                "charge",
                json!({ "order": "order-1" }).to_string(),
            )])
            .await;
    });
}

/// Begins the seed's deploy and publishes the approval request.
async fn deploy(rt: &Runtime, dir: &Path) {
    let session = rt
        .open_session(SessionSpec::new("deploy").initiator(dana()))
        .await
        .unwrap();
    let turn = session
        .begin_turn(Some(dana()), Caller::Model)
        .await
        .unwrap();
    let arguments =
        json!({ "service": "search-api", "environment": "production", "version": "v9.9.9" });
    let outcome = turn
        .step(vec![ToolCall::new(
            "c1",
            "deploy_service",
            arguments.to_string(),
        )])
        .await
        .unwrap();
    let StepOutcome::Waiting { requests, .. } = outcome else {
        panic!("the deploy waits for approval first: {outcome:?}")
    };
    publish(dir, "deploy-turn", &json!(turn.id()));
    publish(dir, "request", &json!(requests[0].request_id));
}

/// Answers the published request (`approve`, or an option id) and publishes the next one, if
/// the run asked another question.
async fn respond(rt: &Runtime, dir: &Path, how: &str) {
    let request: String =
        serde_json::from_str(&std::fs::read_to_string(dir.join("request")).unwrap()).unwrap();
    let response = match how {
        "approve" => InputResponse::approve(&request, Some(dana())),
        option => InputResponse::choose(&request, Some(dana()), option),
    };
    let outcome = rt.respond(response).await.unwrap();
    let next = match &outcome {
        RespondOutcome::Resumed(StepOutcome::Waiting { requests, .. }) => requests
            .first()
            .map(|r| r.request_id.clone())
            .unwrap_or_default(),
        _ => String::new(),
    };
    publish(
        dir,
        &format!("responded-{how}"),
        &json!({ "pid": std::process::id(), "next": next, "outcome": format!("{outcome:?}") }),
    );
    if !next.is_empty() {
        publish(dir, "request", &json!(next));
    }
}

// ---------------------------------------------------------------------------------------------
// The parent

/// A fresh database on the test server for one test, or `None` (skipped) without a server
/// outside CI.
async fn database(test: &str) -> Option<String> {
    let Ok(base) = std::env::var("TOOLWRIGHT_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "TOOLWRIGHT_TEST_POSTGRES_URL is not set: start a server with `scripts/postgres start` \
             and export the URL it prints"
        );
        report!(
            "skipped: no TOOLWRIGHT_TEST_POSTGRES_URL (start one with `scripts/postgres start`)"
        );
        return None;
    };
    let name = format!(
        "tw_{test}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    );
    let pool = PgPool::connect(&base).await.expect("the test server");
    query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&pool)
        .await
        .expect("a test database");
    pool.close().await;
    let (prefix, _) = base.rsplit_once('/').expect("a URL with a database name");
    Some(format!("{prefix}/{name}"))
}

/// The processes of one test.
struct Cluster {
    url: String,
    dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
}

impl Cluster {
    async fn new(test: &str) -> Option<Cluster> {
        let url = database(test).await?;
        // Migrate once up front, so that instances starting together do not all wait on it.
        PostgresStore::connect(&url).await.unwrap();
        Some(Cluster {
            url,
            dir: tempfile::tempdir().unwrap(),
            children: Vec::new(),
        })
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts instance `name` running `jobs`.
    fn spawn(&mut self, name: &str, jobs: &str) -> u32 {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(JOBS, jobs)
            .env(URL, &self.url)
            .env(DIR, self.dir.path())
            .env(NAME, name)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push((name.to_owned(), child));
        pid
    }

    fn signal(&self, name: &str, signal: &str) {
        let (_, child) = self.children.iter().find(|(n, _)| n == name).unwrap();
        let status = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {name}");
    }

    /// Waits (up to `limit`) until `file` exists in the shared directory; returns its JSON.
    fn wait_file(&mut self, file: &str, limit: Duration) -> Value {
        let path = self.dir.path().join(file);
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(text) = std::fs::read_to_string(&path) {
                return serde_json::from_str(&text).unwrap();
            }
            for (name, child) in &mut self.children {
                if let Ok(Some(status)) = child.try_wait() {
                    assert!(
                        status.success(),
                        "instance {name} failed ({status}) before `{file}`"
                    );
                }
            }
            assert!(Instant::now() < deadline, "no `{file}` within {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn effects(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.path().join("effects"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').map(str::to_owned).collect())
            .collect()
    }

    /// Stops every instance still running and checks each exited cleanly (killed ones aside).
    fn stop(mut self, killed: &[&str]) {
        std::fs::write(self.dir.path().join("stop"), "").unwrap();
        for (name, child) in &mut self.children {
            let status = child.wait().unwrap();
            if !killed.contains(&name.as_str()) {
                assert!(status.success(), "instance {name} exited with {status}");
            }
        }
    }
}

/// Waits (up to `limit`) until every turn of `ids` is `active` (its step closed).
async fn settled(store: &PostgresStore, ids: &[String], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let mut open = Vec::new();
        for id in ids {
            let (turn, _) = store.turn(id).await.unwrap().unwrap();
            if turn.status != TurnStatus::Active {
                open.push((id.clone(), turn.status));
            }
        }
        if open.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} turns still open after {limit:?}: {open:?}",
            open.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The output of the one call of turn `id`'s closed step.
async fn output(store: &PostgresStore, id: &str) -> Value {
    let (turn, _) = store.turn(id).await.unwrap().unwrap();
    let step = turn.last_step.expect("a closed step");
    assert!(
        !step.results[0].is_error,
        "turn {id}: {:?}",
        step.results[0]
    );
    step.results[0].output.clone()
}

/// (a) 1,000 turns parked by one instance, every request answered by three instances at once
/// in different orders: each tool runs exactly once, and exactly one instance resumes each turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_turns_answered_through_three_instances_run_once() {
    const TURNS: u64 = 1_000;
    let Some(mut cluster) = Cluster::new("answers").await else {
        return;
    };
    cluster.spawn("parker", &format!("park:{TURNS}"));
    cluster.wait_file("parked", Duration::from_secs(300));
    for (n, name) in ["a", "b", "c"].into_iter().enumerate() {
        cluster.spawn(name, &format!("answer:{}", n + 1));
    }
    let mut resumed: HashMap<String, u32> = HashMap::new();
    let mut answers = 0;
    for name in ["a", "b", "c"] {
        let report = cluster.wait_file(&format!("answered-{name}"), Duration::from_secs(600));
        for turn in report["resumed"].as_array().unwrap() {
            *resumed
                .entry(turn.as_str().unwrap().to_owned())
                .or_default() += 1;
            answers += 1;
        }
    }
    let effects = cluster.effects();
    let mut runs: BTreeMap<u64, u32> = BTreeMap::new();
    for line in &effects {
        *runs.entry(line[1].parse().unwrap()).or_default() += 1;
    }
    report!(
        "{TURNS} parked turns, {} answers from 3 instances: {} resumptions, {} tool runs",
        3 * TURNS,
        answers,
        effects.len()
    );
    assert_eq!(resumed.len() as u64, TURNS, "every turn was resumed");
    assert!(resumed.values().all(|&n| n == 1), "by exactly one instance");
    assert_eq!(runs.len() as u64, TURNS, "every tool ran");
    assert!(runs.values().all(|&n| n == 1), "exactly once: {runs:?}");
    cluster.stop(&[]);
}

/// (b) An instance killed with SIGKILL in the middle of durable runs and timers: the other two
/// take its work over once its lease expires; no recorded step runs again, no result is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_runs_and_timers_are_finished_by_the_others() {
    const RUNS: u64 = 6;
    const NAPS: u64 = 6;
    let Some(mut cluster) = Cluster::new("killed").await else {
        return;
    };
    cluster.spawn("b", "");
    cluster.spawn("c", "");
    let victim = cluster.spawn("a", &format!("runs:{RUNS},{NAPS}"));
    let turns = cluster.wait_file("runs", Duration::from_secs(60));
    // Kill it once every run is past its second step and every nap is asleep.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let effects = cluster.effects();
        let past = effects
            .iter()
            .filter(|l| l[0] == "end" && l[2] == "1")
            .count();
        let napping = effects.iter().filter(|l| l[0] == "before").count();
        if past as u64 >= RUNS && napping as u64 >= NAPS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the runs did not get going: {effects:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    cluster.signal("a", "KILL");
    let killed_at = cluster.effects().len();

    let store = PostgresStore::connect(&cluster.url).await.unwrap();
    let ids: Vec<(bool, String)> = serde_json::from_value(turns).unwrap();
    let all: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    settled(&store, &all, Duration::from_secs(120)).await;

    let effects = cluster.effects();
    let mut rerun = 0;
    let mut taken_over = 0;
    for (is_run, id) in &ids {
        let value = output(&store, id).await;
        if *is_run {
            let pids: Vec<u32> = serde_json::from_value(value).unwrap();
            assert_eq!(pids.len(), 5, "turn {id}: every step has a value");
            let journal = store.journal(&format!("{id}/c1")).await.unwrap();
            assert_eq!(journal.len(), 5, "turn {id}: each step recorded once");
            let run = format!("run{}", ids.iter().position(|(_, t)| t == id).unwrap());
            for (k, pid) in pids.iter().enumerate() {
                // A step recorded by the killed instance never started again elsewhere.
                let started: Vec<&Vec<String>> = effects
                    .iter()
                    .filter(|l| l[0] == "start" && l[1] == run && l[2] == k.to_string())
                    .collect();
                if *pid == victim {
                    assert_eq!(started.len(), 1, "{run} step {k} ran again: {started:?}");
                } else {
                    taken_over += 1;
                    rerun += started.len().saturating_sub(1);
                }
            }
        } else {
            let pid: u32 = serde_json::from_value(value).unwrap();
            assert_ne!(pid, victim, "turn {id}: the nap woke after the kill");
        }
    }
    report!(
        "killed instance a after {killed_at} effects; {RUNS} runs and {NAPS} naps finished by b and c: \
         {taken_over} steps recorded after the take-over, {rerun} interrupted steps ran again, \
         0 recorded steps ran again"
    );
    cluster.stop(&["a"]);
}

/// (c) An instance frozen with SIGSTOP past its lease, then resumed: another instance has
/// finished its work meanwhile; its late writes are refused, nothing is recorded twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_instances_late_writes_are_refused() {
    let Some(mut cluster) = Cluster::new("frozen").await else {
        return;
    };
    cluster.spawn("b", "");
    let frozen = cluster.spawn("a", "slow");
    let turn: String =
        serde_json::from_value(cluster.wait_file("slow-turn", Duration::from_secs(60))).unwrap();
    // Freeze it in the middle of step 1.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster
        .effects()
        .iter()
        .any(|l| l[0] == "start" && l[2] == "1")
    {
        assert!(Instant::now() < deadline, "step 1 did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    cluster.signal("a", "STOP");
    let store = PostgresStore::connect(&cluster.url).await.unwrap();
    settled(
        &store,
        std::slice::from_ref(&turn),
        Duration::from_secs(120),
    )
    .await;
    let before = store.journal(&format!("{turn}/c1")).await.unwrap();
    let finished = output(&store, &turn).await;
    cluster.signal("a", "CONT");

    let report = cluster.wait_file("slow-a", Duration::from_secs(60));
    let error = report["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains("taken over"),
        "the frozen instance's late write must be refused: {report}"
    );
    let after = store.journal(&format!("{turn}/c1")).await.unwrap();
    assert_eq!(before, after, "nothing recorded after the take-over");
    assert_eq!(after.len(), 5, "each step recorded once");
    assert_eq!(output(&store, &turn).await, finished, "the result stands");
    let pids: Vec<u32> = serde_json::from_value(finished).unwrap();
    assert_eq!(pids[0], frozen, "step 0 was recorded before the freeze");
    assert!(
        pids[1..].iter().all(|&p| p != frozen),
        "steps 1.. by the other instance"
    );
    let late = cluster
        .effects()
        .iter()
        .filter(|l| l[0] == "end" && l[3] == frozen.to_string() && l[2] == "1")
        .count();
    report!(
        "instance a frozen in step 1 past its lease; b finished the run; a's late step ran ({late} effect) and its writes were refused: {error}"
    );
    cluster.stop(&[]);
}

/// (d) The seed's deploy_service, parked by one instance and answered on the others, its
/// five-minute sleep woken by whichever instance sees it due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_service_answered_on_other_instances() {
    let Some(mut cluster) = Cluster::new("deploy").await else {
        return;
    };
    let parker = cluster.spawn("a", "deploy");
    cluster.wait_file("request", Duration::from_secs(60));
    let turn: String =
        serde_json::from_value(cluster.wait_file("deploy-turn", Duration::from_secs(60))).unwrap();
    let approver = cluster.spawn("b", "respond:approve");
    let approved = cluster.wait_file("responded-approve", Duration::from_secs(60));
    let confirmer = cluster.spawn("c", "respond:go");
    let confirmed = cluster.wait_file("responded-go", Duration::from_secs(60));
    assert!(
        confirmed["outcome"].as_str().unwrap().contains("Waiting"),
        "the deploy sleeps after it is confirmed: {confirmed}"
    );
    // Ten minutes pass; some instance wakes the run.
    std::fs::write(cluster.dir().join("clock"), (10 * 60 * 1000).to_string()).unwrap();
    let store = PostgresStore::connect(&cluster.url).await.unwrap();
    settled(&store, std::slice::from_ref(&turn), Duration::from_secs(60)).await;
    let result = output(&store, &turn).await;
    assert_eq!(result["deployed"], true, "{result}");
    assert_eq!(result["health"]["ok"], true, "{result}");
    let journal = store.journal(&format!("{turn}/c1")).await.unwrap();
    let positions: BTreeSet<u32> = journal.iter().map(|e| e.position).collect();
    assert_eq!(
        positions.len(),
        journal.len(),
        "each position recorded once"
    );
    assert_eq!(approved["pid"].as_u64(), Some(u64::from(approver)));
    assert_ne!(parker, approver);
    assert_ne!(approver, confirmer);
    report!(
        "deploy_service parked by instance a, approved on b, confirmed on c, woken after its sleep: {} journal entries, result {result}",
        journal.len()
    );
    cluster.stop(&[]);
}

/// (e) A step whose effect is a write to the store's own database, killed with SIGKILL after
/// its write and before its commit: the write rolls back with the transaction, the instance
/// that takes the run over writes it again, and exactly one row exists: exactly once in
/// effect, not only on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_in_the_stores_transaction_takes_effect_exactly_once() {
    let Some(mut cluster) = Cluster::new("charge").await else {
        return;
    };
    let pool = PgPool::connect(&cluster.url).await.unwrap();
    query("CREATE TABLE charges (id BIGSERIAL PRIMARY KEY, order_id TEXT NOT NULL, pid BIGINT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    cluster.spawn("b", "");
    let victim = cluster.spawn("a", "charge");
    let turn: String =
        serde_json::from_value(cluster.wait_file("charge-turn", Duration::from_secs(60))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.effects().iter().any(|l| l[0] == "inserted") {
        assert!(Instant::now() < deadline, "the charge did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Killed inside the transaction, after its insert.
    cluster.signal("a", "KILL");
    let store = PostgresStore::connect(&cluster.url).await.unwrap();
    settled(&store, std::slice::from_ref(&turn), Duration::from_secs(60)).await;
    let id = output(&store, &turn).await;
    let rows: Vec<(i64, i64)> = toolwright::runtime::postgres_sql::query_as(
        "SELECT id, pid FROM charges WHERE order_id = 'order-1'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let inserts = cluster
        .effects()
        .iter()
        .filter(|l| l[0] == "inserted")
        .count();
    report!(
        "charge step killed inside its transaction after its insert; {inserts} inserts ran, {} row committed",
        rows.len()
    );
    assert_eq!(rows.len(), 1, "exactly one charge: {rows:?}");
    assert_ne!(
        rows[0].1,
        i64::from(victim),
        "the killed insert rolled back"
    );
    assert_eq!(
        id,
        json!(rows[0].0),
        "the step's value is the committed row's"
    );
    assert_eq!(inserts, 2, "the insert ran twice, and took effect once");
    cluster.stop(&["a"]);
}
