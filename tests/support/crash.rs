//! The crash points of the crash harnesses (`runtime_crash_harness.rs`, `runtime_task_crashes.rs`),
//! and [`CrashStore`], the store wrapper that dies at them between the runtime's writes.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolwright::runtime::{
    Claim, JournalEntry, Lease, LeaseKind, PinRecord, SessionRecord, Store, StoreError, TaskRecord,
    TurnRecord, Written,
};

/// The crash points a child process is armed with, and what it is doing.
#[derive(Debug)]
pub(crate) struct Crash {
    /// The run's directory: the `fired` file names the point the process died at.
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

    /// Tells the parent that `kill:` step `step` runs. The marker file appears whole (written
    /// beside it, then renamed), so a parent that sees it never reads it half written and
    /// attributes its SIGKILL to the step that was running.
    pub(crate) fn mark(&self, step: &str) -> std::io::Result<()> {
        let partial = self.dir.join("marker.partial");
        std::fs::write(&partial, step)?;
        std::fs::rename(partial, self.dir.join("marker"))
    }

    /// Dies here if armed with `point`: no destructor runs, nothing else is flushed.
    pub(crate) fn point(&self, point: &str) {
        if self.armed(point) {
            let _ = std::fs::write(self.dir.join("fired"), point);
            std::process::exit(9);
        }
    }

    pub(crate) fn action(&self) -> &'static str {
        *self.action.lock().unwrap()
    }

    pub(crate) fn set_action(&self, action: &'static str) {
        *self.action.lock().unwrap() = action;
    }
}

/// Where a [`CrashStore`] may die: each hook runs after the inner store's write succeeded and
/// calls [`Crash::point`] for the points that write reaches.
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
