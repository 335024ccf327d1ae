//! The PostgreSQL store beside the SQLite store, and one instance beside three (figures in
//! BENCHMARKS.md, "Several instances: PostgreSQL beside SQLite"):
//!
//! - `parking/park/{sqlite,postgres}`: a step whose one call needs approval (`always`) is
//!   recorded as waiting; `parking/resume/{..}`: `Runtime::respond` approves it, which claims
//!   the turn, runs the call and closes the step (the shape of benches/store.rs);
//! - `journal/durable_step/{..}`: one `ctx.step` of a durable tool, recorded before it returns
//!   (a call of 10 steps, divided by 10);
//! - a table printed after criterion's groups (not a criterion benchmark: a row is a few
//!   measurements of 1,000 turns each, which criterion's sampling cannot be told to keep):
//!   1,000 parked turns answered through one `Runtime`, and through three `Runtime` instances,
//!   each with its own `PostgresStore` pool and its own `Options::instance`, answering disjoint
//!   thirds concurrently in this process. Rows with "1 instance, 3 answerers" tell what comes
//!   from answering concurrently and what from the separate instances; rows with the workers
//!   off (`run_worker`, on in a deployment) what the workers' wake-ups cost.
//!
//! The rows are interleaved: each round measures every row once, a shape's workers-on row next
//! to its workers-off row, in the listed order in even rounds and the reverse in odd ones (so
//! each of the two runs first in every other round). Each row keeps its database and instances
//! from the first round to the last; its workers run only during its own rounds. On a shared
//! machine whose load drifts, rows far apart in time are not comparable, but two rows of one
//! round are: after the table, the bench prints per shape the turns/s with the workers on ÷ off,
//! and three instances ÷ one (÷ one instance with three answerers, and with one), each the
//! median of the ratios taken within each round, with their range.
//!
//! The server is `TOOLWRIGHT_BENCH_POSTGRES_URL`, else `TOOLWRIGHT_TEST_POSTGRES_URL`; without
//! either only SQLite is measured. Every Postgres benchmark runs on a database of its own,
//! created there (`CREATE DATABASE`) and dropped at its end; SQLite on a file in a temporary
//! directory, every commit synced (WAL, `synchronous = FULL`).
//!
//! - `TOOLWRIGHT_BENCH_TURNS`: the turns of the table (default 1,000; 0 leaves it out);
//! - `TOOLWRIGHT_BENCH_ROUNDS`: the rounds of the table (default 5);
//! - `TOOLWRIGHT_BENCH_PG_STATS=1`: adds the server's transactions, WAL syncs and WAL records
//!   per answered turn to the Postgres rows (read from `pg_stat_database`/`pg_stat_wal` after
//!   waiting 11 s for the backends to report; the workers' idle polls in that wait are counted
//!   too, about 0.1 transaction per turn with three instances). WAL is the whole server's:
//!   nothing else should write to it during the run.
//!
//! Under `cargo test` (criterion's test mode, without `--bench`) each benchmark runs once and the
//! table uses 30 turns and one round.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::Deserialize;
use sqlx_core::query::query;
use sqlx_core::sql_str::AssertSqlSafe;
use sqlx_postgres::PgPool;
use toolwright::prelude::*;
use toolwright::runtime::{
    InputResponse, Options, PostgresStore, RespondOutcome, Runtime, Session, SessionSpec,
    SqliteStore, StepOutcome, ToolCall, Turn,
};
use toolwright::{Caller, Principal};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restarts one service.
#[tool(effect = write, approval = always)]
async fn restart(args: Args) -> String {
    format!("{} restarted", args.service)
}

/// Ten journaled steps.
#[tool(effect = write, durable)]
async fn provision(_: NoInput, ctx: DurableContext) -> Result<u32, ToolError> {
    let mut total = 0;
    for i in 0..STEPS {
        total += ctx.step(format!("step-{i}"), async move { Ok(i) }).await?;
    }
    Ok(total)
}

const STEPS: u32 = 10;

/// Parked turns answered per row of the scaling table, unless `TOOLWRIGHT_BENCH_TURNS` says.
const TURNS: usize = 1_000;

/// Measurements per row of the scaling table, unless `TOOLWRIGHT_BENCH_ROUNDS` says; the
/// median is printed. Odd, so that the median is one round's.
const ROUNDS: usize = 5;

fn alice() -> Principal {
    Principal::user("bench", "alice")
}

/// Criterion runs benchmarks only with `--bench` (`cargo bench`); without it (`cargo test`) it
/// runs each once, and the table shrinks to match.
fn benching() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

/// The Postgres server to measure on, if any.
fn postgres_url() -> Option<String> {
    [
        "TOOLWRIGHT_BENCH_POSTGRES_URL",
        "TOOLWRIGHT_TEST_POSTGRES_URL",
    ]
    .into_iter()
    .filter_map(|name| std::env::var(name).ok())
    .map(|url| url.trim().to_owned())
    .find(|url| !url.is_empty())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// SQLite always; Postgres when a server is given (said once when not).
    fn available() -> Vec<Backend> {
        if postgres_url().is_some() {
            vec![Backend::Sqlite, Backend::Postgres]
        } else {
            static NOTICE: std::sync::Once = std::sync::Once::new();
            NOTICE.call_once(|| {
                eprintln!(
                    "\nbenches/instances: neither TOOLWRIGHT_BENCH_POSTGRES_URL nor \
                     TOOLWRIGHT_TEST_POSTGRES_URL is set: measuring SQLite only.\n\
                     For the Postgres figures, start a server (`scripts/postgres start` prints \
                     a URL; it runs without fsync, so use a server with default durability \
                     for figures worth quoting) and set TOOLWRIGHT_BENCH_POSTGRES_URL.\n"
                );
            });
            vec![Backend::Sqlite]
        }
    }
}

/// Where one benchmark's records live, removed by [`Place::remove`].
enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(Database),
}

impl Place {
    async fn new(backend: Backend, what: &str) -> Place {
        match backend {
            Backend::Sqlite => Place::Sqlite(tempfile::tempdir().expect("tempdir")),
            Backend::Postgres => Place::Postgres(
                Database::create(&postgres_url().expect("a Postgres URL"), what).await,
            ),
        }
    }

    /// A runtime on this place named `instance`, on a store (and, for Postgres, a connection
    /// pool) of its own.
    async fn runtime(&self, instance: &str) -> Runtime {
        let builder = Runtime::builder(
            Registry::from_tools([restart::TOOL, provision::TOOL]).expect("registry"),
        );
        let builder = match self {
            Place::Sqlite(dir) => {
                builder.store(SqliteStore::open(dir.path().join("bench.db")).expect("sqlite store"))
            }
            Place::Postgres(database) => builder.store(
                PostgresStore::connect(&database.url)
                    .await
                    .expect("postgres store"),
            ),
        };
        builder
            .options(Options {
                instance: instance.to_owned(),
                ..Default::default()
            })
            .build()
            .expect("runtime")
    }

    async fn remove(self) {
        match self {
            Place::Sqlite(dir) => drop(dir),
            Place::Postgres(database) => database.drop().await,
        }
    }
}

/// A database of one benchmark on the Postgres server.
struct Database {
    /// The server's URL, for creating and dropping.
    server: String,
    name: String,
    /// The database's URL.
    url: String,
}

impl Database {
    async fn create(server: &str, what: &str) -> Database {
        let name = format!(
            "toolwright_bench_{what}_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        );
        let admin = PgPool::connect(server).await.expect("the Postgres server");
        query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&admin)
            .await
            .expect("the bench user may create databases");
        admin.close().await;
        Database {
            server: server.to_owned(),
            url: with_database(server, &name),
            name,
        }
    }

    /// Drops the database, also with connections left open (`FORCE`).
    async fn drop(self) {
        let admin = PgPool::connect(&self.server)
            .await
            .expect("the Postgres server");
        query(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        )))
        .execute(&admin)
        .await
        .expect("dropping the bench database");
        admin.close().await;
    }
}

/// `url` with its database replaced by `name` (its query string kept).
fn with_database(url: &str, name: &str) -> String {
    let (head, options) = match url.split_once('?') {
        Some((head, options)) => (head, format!("?{options}")),
        None => (url, String::new()),
    };
    let authority = head.find("://").map_or(0, |at| at + 3);
    let server = match head[authority..].find('/') {
        Some(slash) => &head[..authority + slash],
        None => head,
    };
    format!("{server}/{name}{options}")
}

async fn park(turn: &Turn) -> String {
    match turn
        .step(vec![ToolCall::new("c", "restart", r#"{"service":"api"}"#)])
        .await
        .expect("step")
    {
        StepOutcome::Waiting { requests, .. } => requests[0].request_id.clone(),
        other => panic!("expected to park, got {other:?}"),
    }
}

async fn begin(session: &Session) -> Turn {
    session
        .begin_turn(Some(alice()), Caller::Model)
        .await
        .expect("turn")
}

async fn approve(runtime: &Runtime, request: &str) {
    match runtime
        .respond(InputResponse::approve(request, Some(alice())))
        .await
        .expect("respond")
    {
        RespondOutcome::Resumed(_) => {}
        other => panic!("expected the answer to resume the turn, got {other:?}"),
    }
}

/// A fresh place for one benchmark, a runtime on it and a session.
async fn open(backend: Backend, what: &str) -> (Place, Runtime, Session) {
    let place = Place::new(backend, what).await;
    let runtime = place.runtime("bench").await;
    let session = runtime
        .open_session(SessionSpec::new("bench").initiator(alice()))
        .await
        .expect("session");
    (place, runtime, session)
}

fn measured(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    for backend in Backend::available() {
        let id = |what: &str| BenchmarkId::new(what, backend.name());

        let mut parking = c.benchmark_group("parking");
        let (place, runtime, session) = tokio.block_on(open(backend, "park"));
        parking.bench_function(id("park"), |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let turn = begin(&session).await;
                        let start = Instant::now();
                        park(&turn).await;
                        total += start.elapsed();
                    }
                    total
                })
            })
        });
        drop((runtime, session));
        tokio.block_on(place.remove());

        let (place, runtime, session) = tokio.block_on(open(backend, "resume"));
        parking.bench_function(id("resume"), |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let mut parked = Vec::new();
                    for _ in 0..iters {
                        parked.push(park(&begin(&session).await).await);
                    }
                    let start = Instant::now();
                    for request in &parked {
                        approve(&runtime, request).await;
                    }
                    start.elapsed()
                })
            })
        });
        parking.finish();
        drop((runtime, session));
        tokio.block_on(place.remove());

        let mut journal = c.benchmark_group("journal");
        let (place, runtime, session) = tokio.block_on(open(backend, "journal"));
        let turn = tokio.block_on(begin(&session));
        // Call ids never repeat: a repeated id would replay its recorded journal instead of
        // writing.
        let mut calls = 0u64;
        journal.bench_function(id("durable_step"), |b| {
            b.iter_custom(|iters| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        calls += 1;
                        let start = Instant::now();
                        turn.step(vec![ToolCall::new(format!("p{calls}"), "provision", "{}")])
                            .await
                            .expect("step");
                        total += start.elapsed();
                    }
                    // Per step: the call's fixed cost (its turn writes) spread over its steps.
                    total / STEPS
                })
            })
        });
        journal.finish();
        drop((turn, session, runtime));
        tokio.block_on(place.remove());
    }
}

/// One row of the scaling table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Setup {
    backend: Backend,
    /// `Runtime`s, each on its own store and pool.
    instances: usize,
    /// Concurrent answering loops, spread over the instances, each answering its share in turn.
    answerers: usize,
    /// Whether every instance runs `run_worker`, as deployed (a 1 s poll). On Postgres the
    /// worker looks for expired leases at its poll, and for due timers at its poll and when a
    /// wake-up time some instance announced comes; answering sets none.
    workers: bool,
}

impl Setup {
    /// The same shape with the workers on or off.
    fn with_workers(self, workers: bool) -> Setup {
        Setup { workers, ..self }
    }

    /// "1 instance, 3 answerers", for the ratio tables.
    fn shape(self) -> String {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}, {}",
            plural(self.instances, "instance"),
            plural(self.answerers, "answerer")
        )
    }
}

/// What one row measured.
struct Row {
    /// The answering of each round, in the order of the rounds.
    times: Vec<Duration>,
    /// The server's counters per answered turn, when asked for (`TOOLWRIGHT_BENCH_PG_STATS`).
    counters: Option<Counters>,
}

/// Server-wide activity, from `pg_stat_database` (the bench database) and `pg_stat_wal`.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    transactions: f64,
    wal_syncs: f64,
    wal_records: f64,
}

impl Counters {
    /// The counters now, once every backend has reported: a backend flushes its statistics
    /// when idle, within 10 s (PostgreSQL 15+).
    async fn read(database: &Database) -> Counters {
        tokio::time::sleep(Duration::from_secs(11)).await;
        let admin = PgPool::connect(&database.server)
            .await
            .expect("the Postgres server");
        let (transactions, wal_syncs, wal_records): (i64, i64, i64) =
            sqlx_core::query_as::query_as(AssertSqlSafe(format!(
                "SELECT (xact_commit + xact_rollback)::bigint, \
                        (SELECT wal_sync FROM pg_stat_wal)::bigint, \
                        (SELECT wal_records FROM pg_stat_wal)::bigint \
                 FROM pg_stat_database WHERE datname = '{}'",
                database.name
            )))
            .fetch_one(&admin)
            .await
            .expect("pg_stat_database and pg_stat_wal");
        admin.close().await;
        Counters {
            transactions: transactions as f64,
            wal_syncs: wal_syncs as f64,
            wal_records: wal_records as f64,
        }
    }

    /// `self - before`, per turn.
    fn per_turn(self, before: Counters, turns: usize) -> Counters {
        let turns = turns as f64;
        Counters {
            transactions: (self.transactions - before.transactions) / turns,
            wal_syncs: (self.wal_syncs - before.wal_syncs) / turns,
            wal_records: (self.wal_records - before.wal_records) / turns,
        }
    }
}

/// One row of the scaling table, open from the first round to the last: its place (a database
/// of its own), its instances and its session. Its workers run only during its own rounds, so
/// that they cost nothing to the rows measured between them.
struct Bench {
    setup: Setup,
    place: Place,
    runtimes: Vec<Runtime>,
    session: Session,
    times: Vec<Duration>,
    counted: Vec<Counters>,
}

impl Bench {
    async fn open(setup: Setup) -> Bench {
        let what = format!(
            "scaling{}x{}{}",
            setup.instances,
            setup.answerers,
            if setup.workers { "w" } else { "" }
        );
        let place = Place::new(setup.backend, &what).await;
        let mut runtimes = Vec::new();
        for n in 0..setup.instances {
            runtimes.push(place.runtime(&format!("bench-{n}")).await);
        }
        let session = runtimes[0]
            .open_session(SessionSpec::new("scaling").initiator(alice()))
            .await
            .expect("session");
        Bench {
            setup,
            place,
            runtimes,
            session,
            times: Vec::new(),
            counted: Vec::new(),
        }
    }

    /// One round: `turns` parked turns (on turns parked for it), answered as the setup says;
    /// the answering alone is timed.
    async fn round(&mut self, turns: usize, counters: bool) -> Duration {
        let workers: Vec<_> = self
            .runtimes
            .iter()
            .filter(|_| self.setup.workers)
            .map(|runtime| runtime.run_worker(Duration::from_secs(1)))
            .collect();
        let database = match &self.place {
            Place::Postgres(database) if counters => Some(database),
            _ => None,
        };
        // Parked three at a time, to keep the setup short; not measured.
        let parkers: Vec<_> = (0..3)
            .map(|n| {
                let session = self.session.clone();
                let share = turns / 3 + usize::from(n < turns % 3);
                tokio::spawn(async move {
                    let mut parked = Vec::new();
                    for _ in 0..share {
                        parked.push(park(&begin(&session).await).await);
                    }
                    parked
                })
            })
            .collect();
        let mut requests = Vec::new();
        for parker in parkers {
            requests.extend(parker.await.expect("parker"));
        }
        assert_eq!(requests.len(), turns);

        let before = match database {
            Some(database) => Some(Counters::read(database).await),
            None => None,
        };
        let start = Instant::now();
        let answerers: Vec<_> = requests
            .chunks(turns.div_ceil(self.setup.answerers))
            .enumerate()
            .map(|(n, chunk)| {
                let runtime = self.runtimes[n % self.runtimes.len()].clone();
                let chunk = chunk.to_vec();
                tokio::spawn(async move {
                    for request in &chunk {
                        approve(&runtime, request).await;
                    }
                })
            })
            .collect();
        for answerer in answerers {
            answerer.await.expect("answerer");
        }
        let time = start.elapsed();
        self.times.push(time);
        if let (Some(database), Some(before)) = (database, before) {
            self.counted
                .push(Counters::read(database).await.per_turn(before, turns));
        }
        // Gone before the next row starts.
        for worker in workers {
            worker.abort();
            let _ = worker.await;
        }
        time
    }

    async fn close(self) -> Row {
        let Bench {
            place,
            runtimes,
            session,
            times,
            counted,
            ..
        } = self;
        drop((session, runtimes));
        place.remove().await;
        let counters = (!counted.is_empty()).then(|| {
            let n = counted.len() as f64;
            counted.iter().fold(Counters::default(), |sum, c| Counters {
                transactions: sum.transactions + c.transactions / n,
                wal_syncs: sum.wal_syncs + c.wal_syncs / n,
                wal_records: sum.wal_records + c.wal_records / n,
            })
        });
        Row { times, counters }
    }
}

/// The median of `values` (the upper one of an even count), and their least and greatest.
fn median_range(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}

/// "0.97 (0.93–1.01)": the median of per-round ratios and their range.
fn ratio_cell(ratios: &[f64]) -> String {
    let (median, least, greatest) = median_range(ratios);
    format!("{median:.2} ({least:.2}–{greatest:.2})")
}

/// The scaling table: parked turns answered by one instance and by three.
///
/// Every row is measured once per round, and a round measures every row, alternating its order:
/// the rows as listed in even rounds, the other way round in odd ones. A shape's workers-on and
/// workers-off rows run next to each other in each round, each first in every other round, so
/// the ratio of the two taken within a round compares them at the same load of the machine;
/// the ratios printed are medians of the per-round ratios.
fn scaling() {
    let turns = match std::env::var("TOOLWRIGHT_BENCH_TURNS") {
        Ok(turns) => turns
            .trim()
            .parse()
            .expect("TOOLWRIGHT_BENCH_TURNS is a number of turns"),
        Err(_) if benching() => TURNS,
        Err(_) => 30,
    };
    if turns == 0 {
        return;
    }
    let rounds = match std::env::var("TOOLWRIGHT_BENCH_ROUNDS") {
        Ok(rounds) => rounds
            .trim()
            .parse::<usize>()
            .expect("TOOLWRIGHT_BENCH_ROUNDS is a number of rounds")
            .max(1),
        Err(_) if benching() => ROUNDS,
        Err(_) => 1,
    };
    let counters = std::env::var_os("TOOLWRIGHT_BENCH_PG_STATS").is_some();
    let mut setups = Vec::new();
    for backend in Backend::available() {
        let setup = |instances, answerers, workers| Setup {
            backend,
            instances,
            answerers,
            workers,
        };
        // The SQLite store is one process's file: several instances need Postgres, and its
        // rows keep the workers on.
        match backend {
            Backend::Sqlite => setups.extend([setup(1, 1, true), setup(1, 3, true)]),
            Backend::Postgres => {
                for (instances, answerers) in [(1, 1), (1, 3), (3, 3)] {
                    setups.extend([
                        setup(instances, answerers, true),
                        setup(instances, answerers, false),
                    ]);
                }
            }
        }
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let rows: Vec<Row> = tokio.block_on(async {
        let mut benches = Vec::new();
        for &setup in &setups {
            benches.push(Bench::open(setup).await);
        }
        for round in 0..rounds {
            let order: Vec<usize> = if round % 2 == 0 {
                (0..benches.len()).collect()
            } else {
                (0..benches.len()).rev().collect()
            };
            for n in order {
                let time = benches[n].round(turns, counters).await;
                let setup = benches[n].setup;
                eprintln!(
                    "scaling: round {}/{rounds}: {} {}x{} workers {}: {:.0} turns/s",
                    round + 1,
                    setup.backend.name(),
                    setup.instances,
                    setup.answerers,
                    if setup.workers { "on" } else { "off" },
                    turns as f64 / time.as_secs_f64()
                );
            }
        }
        let mut rows = Vec::new();
        for bench in benches {
            rows.push(bench.close().await);
        }
        rows
    });
    let rate = |time: &Duration| turns as f64 / time.as_secs_f64();

    println!(
        "\nscaling: {turns} parked turns answered (approve, resume, run the call); median \
         of {rounds} round(s), the range of the rounds in brackets; the rows interleaved, \
         their order reversed every other round\n"
    );
    let stats_header = if counters {
        " xacts/turn | WAL syncs/turn | WAL records/turn |"
    } else {
        ""
    };
    let stats_rule = if counters {
        "-----------:|---------------:|-----------------:|"
    } else {
        ""
    };
    println!(
        "| store    | instances | answerers | workers | elapsed | turns/s (range)       | per turn |{stats_header}\n\
         |----------|----------:|----------:|---------|--------:|----------------------:|---------:|{stats_rule}"
    );
    for (setup, row) in setups.iter().zip(&rows) {
        let mut times = row.times.clone();
        times.sort();
        let median = times[times.len() / 2];
        let stats = row.counters.map_or(String::new(), |c| {
            format!(
                " {:>10.2} | {:>14.2} | {:>16.2} |",
                c.transactions, c.wal_syncs, c.wal_records
            )
        });
        println!(
            "| {:<8} | {:>9} | {:>9} | {:<7} | {:>5.2} s | {:>21} | {:>5.2} ms |{stats}",
            setup.backend.name(),
            setup.instances,
            setup.answerers,
            if setup.workers { "on" } else { "off" },
            median.as_secs_f64(),
            format!(
                "{:.0} ({:.0}–{:.0})",
                rate(&median),
                rate(times.last().expect("a round")),
                rate(&times[0]),
            ),
            median.as_secs_f64() * 1000.0 / turns as f64,
        );
    }

    // Ratios of turns/s taken within each round: median of the rounds, their range in brackets.
    let per_round = |a: Setup, b: Setup| -> Option<Vec<f64>> {
        let find = |s: Setup| setups.iter().position(|&t| t == s).map(|n| &rows[n]);
        let (a, b) = (find(a)?, find(b)?);
        Some(
            a.times
                .iter()
                .zip(&b.times)
                .map(|(a, b)| rate(a) / rate(b))
                .collect(),
        )
    };
    let postgres = |instances, answerers| Setup {
        backend: Backend::Postgres,
        instances,
        answerers,
        workers: true,
    };
    let shapes = [postgres(1, 1), postgres(1, 3), postgres(3, 3)];
    if per_round(shapes[0], shapes[0].with_workers(false)).is_some() {
        println!(
            "\nturns/s with the workers on ÷ off, per round (the workers' cost is 1 − the ratio):\n\n\
             | postgres                 | workers on ÷ off (range) |\n\
             |--------------------------|-------------------------:|"
        );
        for shape in shapes {
            let ratios = per_round(shape, shape.with_workers(false)).expect("both rows");
            println!("| {:<24} | {:>24} |", shape.shape(), ratio_cell(&ratios));
        }
        println!(
            "\nturns/s of three instances ÷ one, per round:\n\n\
             | postgres, workers | 3 instances ÷ 1 instance, 3 answerers each (range) | ÷ 1 instance, 1 answerer (range) |\n\
             |-------------------|---------------------------------------------------:|---------------------------------:|"
        );
        for workers in [true, false] {
            let three = shapes[2].with_workers(workers);
            let by_three = per_round(three, shapes[1].with_workers(workers)).expect("both rows");
            let by_one = per_round(three, shapes[0].with_workers(workers)).expect("both rows");
            println!(
                "| {:<17} | {:>50} | {:>32} |",
                if workers { "on" } else { "off" },
                ratio_cell(&by_three),
                ratio_cell(&by_one)
            );
        }
    }
    println!();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = measured
}
criterion_main!(benches, scaling);
