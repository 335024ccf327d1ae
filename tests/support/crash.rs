//! The crash points of the crash harnesses (`runtime_crash_harness.rs`, `runtime_task_crashes.rs`),
//! [`CrashStore`], the store wrapper that reaches them between the runtime's writes, and
//! [`run_child`], which runs one child process and SIGKILLs it where it waits.
//!
//! A child is armed with a plan of points. At an exit point ([`Crash::point`]) it records the
//! point and exits at once. At a kill point ([`Crash::hold`]) it records the point, tells the
//! parent on its stdout and then waits there, never going on; the parent, told, SIGKILLs it
//! while it waits. Either way the kill or exit happens exactly at the point, however busy the
//! machine is, and the record (written beside its final name, then renamed) is whole whenever
//! the parent reads it.

use std::collections::BTreeSet;
use std::future::Future;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use toolwright::runtime::{
    Claim, ConversationEntry, JournalEntry, Lease, LeaseKind, PinRecord, SessionRecord, StepPatch,
    Store, StoreError, TaskRecord, TurnRecord, Written,
};

/// The file an exit point's child records the point in before it exits.
const FIRED: &str = "fired";
/// The file a kill point's child records the point in before it waits.
const HELD: &str = "held";
/// The line a child prints once it waits at a kill point (after recording it in [`HELD`]).
const HOLDING: &str = "CRASH-HARNESS-HOLDING";

/// The crash points a child process is armed with, and what it is doing.
#[derive(Debug)]
pub(crate) struct Crash {
    /// The run's directory, where the child records the point it died at.
    pub(crate) dir: PathBuf,
    plan: Vec<String>,
    action: Mutex<&'static str>,
}

impl Crash {
    pub(crate) fn new(dir: PathBuf, plan: Vec<String>, action: &'static str) -> Self {
        Crash {
            dir,
            plan,
            action: Mutex::new(action),
        }
    }

    /// The comma-separated crash points in environment variable `var` (none when it is unset).
    pub(crate) fn plan_from_env(var: &str) -> Vec<String> {
        std::env::var(var)
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn armed(&self, point: &str) -> bool {
        self.plan.iter().any(|p| p == point)
    }

    /// Writes `point` to file `name` of the run's directory atomically: beside it, then renamed.
    fn record(&self, name: &str, point: &str) {
        let partial = self.dir.join(format!("{name}.partial"));
        std::fs::write(&partial, point).expect("the crash record is written");
        std::fs::rename(partial, self.dir.join(name)).expect("the crash record is renamed");
    }

    /// Exits here if armed with `point`, after recording it: no destructor runs, nothing else is
    /// flushed.
    pub(crate) fn point(&self, point: &str) {
        if self.armed(point) {
            self.record(FIRED, point);
            std::process::exit(9);
        }
    }

    /// Waits here for the parent's SIGKILL if armed with kill point `point`: records the point,
    /// tells the parent, then blocks the thread for good. The child's runtime runs on this one
    /// thread, so nothing of the child goes on (a store write already handed to a blocking
    /// thread may still finish).
    pub(crate) fn hold(&self, point: &str) {
        if self.armed(point) {
            self.record(HELD, point);
            {
                let mut stdout = std::io::stdout().lock();
                // On a line of its own: libtest may have printed the test's name without one.
                let _ = write!(stdout, "\n{HOLDING}\n");
                let _ = stdout.flush();
            }
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }

    pub(crate) fn action(&self) -> &'static str {
        *self.action.lock().unwrap()
    }

    pub(crate) fn set_action(&self, action: &'static str) {
        *self.action.lock().unwrap() = action;
    }
}

/// How a child process ended.
#[derive(Debug)]
pub(crate) enum ChildEnd {
    /// It exited with status 0; its stdout.
    Normal(String),
    /// It exited at this exit point.
    Exited(String),
    /// It waited at this kill point, and the parent SIGKILLed it there.
    Killed(String),
    /// Anything else (a panic, an unexpected status, a child stuck for `limit`): what was seen.
    Failed(String),
}

/// Runs `command`, a child armed in run directory `dir`, to its end: SIGKILLs it when it waits
/// at a kill point, and after `limit` when it is stuck (then it [`ChildEnd::Failed`]). The
/// parent learns of the wait from the child's stdout and of the point from the record the child
/// renamed into place before saying so; the exit point is read once the child is gone.
pub(crate) fn run_child(dir: &Path, command: &mut Command, limit: Duration) -> ChildEnd {
    let _ = std::fs::remove_file(dir.join(FIRED));
    let _ = std::fs::remove_file(dir.join(HELD));
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, from_child) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + limit;
    let mut out = String::new();
    let mut killed_at = None;
    let mut stuck = false;
    loop {
        match from_child.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line == HOLDING => {
                let point = std::fs::read_to_string(dir.join(HELD))
                    .expect("a holding child recorded its kill point first");
                child.kill().expect("the child waits at its kill point");
                killed_at = Some(point);
                break;
            }
            Ok(line) => {
                out.push_str(&line);
                out.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                stuck = true;
                break;
            }
        }
    }
    // The child is gone or going: its stdout ends.
    for line in from_child.iter() {
        out.push_str(&line);
        out.push('\n');
    }
    reader.join().unwrap();
    let status: ExitStatus = child.wait().expect("the child is waited for");
    let stderr = stderr.join().unwrap();
    let seen = || format!("{status}:\n{out}\n{stderr}");
    if stuck {
        return ChildEnd::Failed(format!("stuck for {limit:?} and killed: {}", seen()));
    }
    match (killed_at, status.code(), status.signal()) {
        (Some(point), None, Some(9)) => ChildEnd::Killed(point),
        (None, Some(0), _) => ChildEnd::Normal(out),
        (None, Some(9), _) => match std::fs::read_to_string(dir.join(FIRED)) {
            Ok(point) => ChildEnd::Exited(point),
            Err(_) => ChildEnd::Failed(format!("exit 9 without a crash point: {}", seen())),
        },
        _ => ChildEnd::Failed(seen()),
    }
}

/// Where a [`CrashStore`] may die: each hook runs after the inner store's write succeeded and
/// calls [`Crash::point`] (or [`Crash::hold`]) for the points that write reaches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CrashPoints {
    /// After `write_turn` (and so `put_turn`).
    pub(crate) write_turn: fn(&Crash, &TurnRecord),
    /// After `record_journal` (and so `append_journal`).
    pub(crate) record_journal: fn(&Crash, &JournalEntry),
    /// After `write_task` (and so `put_task`).
    pub(crate) write_task: fn(&Crash, &TaskRecord),
}

impl CrashPoints {
    /// No crash point anywhere.
    pub(crate) const NONE: CrashPoints = CrashPoints {
        write_turn: nowhere,
        record_journal: nowhere,
        write_task: nowhere,
    };
}

fn nowhere<T>(_: &Crash, _: &T) {}

/// A store that delegates to `inner` and dies at `points` right after the writes they follow.
pub(crate) struct CrashStore<S> {
    inner: S,
    crash: Arc<Crash>,
    points: CrashPoints,
}

impl<S: Store> CrashStore<S> {
    pub(crate) fn new(inner: S, crash: Arc<Crash>, points: CrashPoints) -> Self {
        CrashStore {
            inner,
            crash,
            points,
        }
    }
}

type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

impl<S: Store> Store for CrashStore<S> {
    fn session(&self, id: &str) -> StoreFuture<'_, Option<(SessionRecord, u64)>> {
        self.inner.session(id)
    }

    fn put_session<'a>(
        &'a self,
        record: &'a SessionRecord,
        expected: Option<u64>,
    ) -> StoreFuture<'a, u64> {
        self.inner.put_session(record, expected)
    }

    fn turn(&self, id: &str) -> StoreFuture<'_, Option<(TurnRecord, u64)>> {
        self.inner.turn(id)
    }

    fn write_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> StoreFuture<'a, Written> {
        Box::pin(async move {
            let written = self.inner.write_turn(record, expected, claim).await?;
            (self.points.write_turn)(&self.crash, record);
            Ok(written)
        })
    }

    fn settle_request<'a>(
        &'a self,
        turn_id: &'a str,
        patch: &'a StepPatch,
        expected: u64,
    ) -> StoreFuture<'a, u64> {
        self.inner.settle_request(turn_id, patch, expected)
    }

    fn turn_of_request(&self, request_id: &str) -> StoreFuture<'_, Option<String>> {
        self.inner.turn_of_request(request_id)
    }

    fn waiting_turns(&self) -> StoreFuture<'_, Vec<String>> {
        self.inner.waiting_turns()
    }

    fn running_turns(&self) -> StoreFuture<'_, Vec<String>> {
        self.inner.running_turns()
    }

    fn journal(&self, run_id: &str) -> StoreFuture<'_, Vec<JournalEntry>> {
        self.inner.journal(run_id)
    }

    fn record_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
        fence: Option<&'a Lease>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.inner.record_journal(run_id, entry, fence).await?;
            (self.points.record_journal)(&self.crash, entry);
            Ok(())
        })
    }

    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
        key: &'a str,
    ) -> StoreFuture<'a, ()> {
        self.inner.remember_approval(session_id, requester, key)
    }

    fn approvals<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
    ) -> StoreFuture<'a, BTreeSet<String>> {
        self.inner.approvals(session_id, requester)
    }

    fn conversation(&self, session_id: &str) -> StoreFuture<'_, Vec<ConversationEntry>> {
        self.inner.conversation(session_id)
    }

    fn append_conversation<'a>(
        &'a self,
        session_id: &'a str,
        turn_id: &'a str,
        first: u64,
        messages: &'a [serde_json::Value],
    ) -> StoreFuture<'a, ()> {
        self.inner
            .append_conversation(session_id, turn_id, first, messages)
    }

    fn pins(&self, connection: &str) -> StoreFuture<'_, Vec<PinRecord>> {
        self.inner.pins(connection)
    }

    fn pin<'a>(&'a self, pin: &'a PinRecord, replacing: Option<&'a str>) -> StoreFuture<'a, bool> {
        self.inner.pin(pin, replacing)
    }

    fn task(&self, id: &str) -> StoreFuture<'_, Option<(TaskRecord, u64)>> {
        self.inner.task(id)
    }

    fn write_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> StoreFuture<'a, Written> {
        Box::pin(async move {
            let written = self.inner.write_task(record, expected, claim).await?;
            (self.points.write_task)(&self.crash, record);
            Ok(written)
        })
    }

    fn task_of_request(&self, request_id: &str) -> StoreFuture<'_, Option<String>> {
        self.inner.task_of_request(request_id)
    }

    fn session_tasks(&self, session_id: &str) -> StoreFuture<'_, Vec<String>> {
        self.inner.session_tasks(session_id)
    }

    fn open_tasks(&self) -> StoreFuture<'_, Vec<String>> {
        self.inner.open_tasks()
    }

    fn renew_leases<'a>(&'a self, held: &'a [Lease], ttl: Duration) -> StoreFuture<'a, Vec<Lease>> {
        self.inner.renew_leases(held, ttl)
    }

    fn expired_leases(&self) -> StoreFuture<'_, Vec<(LeaseKind, String)>> {
        self.inner.expired_leases()
    }

    fn due_turns(&self, now_ms: u64) -> StoreFuture<'_, Vec<String>> {
        self.inner.due_turns(now_ms)
    }

    fn due_tasks(&self, now_ms: u64) -> StoreFuture<'_, Vec<String>> {
        self.inner.due_tasks(now_ms)
    }
}
