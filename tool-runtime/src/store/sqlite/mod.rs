//! The embedded SQLite store: one file, shared safely by every process that opens it.
//!
//! Each record is one row holding its JSON and its version; a versioned write checks the version
//! and writes in one `IMMEDIATE` transaction. Nothing is cached in memory: a parked turn costs a
//! row in the file, not a byte in the process.

use std::collections::BTreeSet;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::rows::{clamp, decode_pins, encode};
use super::{
    Appended, Claim, Deleted, Lease, LeaseKind, Page, PageRequest, SessionSummary, Since,
    StepSince, Store, StoreError, TaskFilter, TaskSummary, TurnFilter, TurnRetention, TurnSummary,
    Written,
};
use crate::record::{
    AttachmentRecord, ClosedStep, ConversationEntry, JournalEntry, PinRecord, SessionRecord,
    StepPatch, TaskRecord, TurnRecord,
};

mod attachments;
mod claims;
mod conversation;
mod delete;
mod listings;
mod requests;
mod retention;
mod schema;
mod sessions;
mod tasks;
mod turns;

use claims::{check_token, expiry, now_ms};
use schema::{migrate, schema_version};

/// How long an operation waits for another connection (usually another process) that holds the
/// file's write lock before it gives up. Writes are short, so reaching it means a stuck writer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The place [`SqliteStore::in_memory`] shows in errors.
const MEMORY: &str = ":memory:";

/// The embedded store: one SQLite file in WAL mode, every commit synced to disk.
///
/// Several processes may open the same file: versioned writes take the file's write lock, so
/// exactly one of two racing writers wins and the other gets [`StoreError::Conflict`]; a writer
/// that finds the lock taken waits (up to 10 s) instead of failing.
///
/// `waiting_turns` lists waiting turns least recently written first.
///
/// Every operation on a file runs on tokio's blocking pool, so its future must be polled inside
/// a tokio runtime; a store in memory, which waits for no disk, runs them on the calling task
/// (on the pool only while another operation holds the connection). Dropping the future does
/// not cancel a write already handed to the pool; the versions tell a later reader whether it
/// landed. Clones share the connection (and the count
/// of [`SqliteStore::commits`]).
///
/// ```no_run
/// use toolwright_runtime::{SessionRecord, SqliteStore, Store};
///
/// # async fn demo() -> Result<(), toolwright_runtime::StoreError> {
/// let store = SqliteStore::open("toolwright.db")?;
/// let version = store.put_session(&SessionRecord::new("s1"), None).await?;
/// let (session, read) = store.session("s1").await?.expect("just written");
/// assert_eq!((session.id.as_str(), read), ("s1", version));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    /// Write transactions committed since the store opened (SQLite's commit hook).
    commits: Arc<AtomicU64>,
    /// A store in memory ([`SqliteStore::in_memory`]): its operations wait for no disk.
    in_memory: bool,
    /// The file, as shown in errors (`:memory:` for [`SqliteStore::in_memory`]).
    place: Arc<str>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.place)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the store file at `path`, creating it if missing and bringing its schema up to date.
    ///
    /// Fails with [`StoreError::Backend`] when the file cannot be opened, is not a toolwright
    /// store, or was written by a newer toolwright (its schema version is newer than this build
    /// knows).
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let place = path.as_ref().display().to_string();
        let fail = |doing: &str, error: rusqlite::Error| backend(&place, doing, &error);
        let mut conn = Connection::open(path.as_ref()).map_err(|e| fail("cannot open", e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail("cannot set the busy timeout", e))?;
        // Refuse before touching the file: a foreign or newer file must stay as it was.
        schema_version(&conn, &place)?;
        // WAL lets readers run beside the one writer and keeps the file whole if a process dies
        // mid-commit; FULL syncs the log at every commit, so a write that returned survives a
        // power loss.
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| fail("cannot switch to WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!(
                "sqlite `{place}`: the journal mode stayed `{mode}` instead of `wal`; put the \
                 store on a local file system that supports shared memory"
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| fail("cannot enable synchronous commits", e))?;
        migrate(&mut conn, &place)?;
        SqliteStore::from_connection(conn, place)
    }

    /// A private store in memory, gone when dropped (at the latest when the process exits): for
    /// tests and demos. [`SqliteStore::open`] keeps a file.
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        let place = MEMORY.to_owned();
        let mut conn = Connection::open_in_memory()
            .map_err(|e| backend(&place, "cannot open a memory database", &e))?;
        migrate(&mut conn, &place)?;
        SqliteStore::from_connection(conn, place)
    }

    /// Gives the space of deleted rows back to the file system: `VACUUM` (which rewrites the
    /// file, needs free disk as large as the file, and holds the write lock while it runs),
    /// then a checkpoint that empties the write-ahead log. Deleting (a session, a retention
    /// sweep) leaves free pages the file reuses but keeps; run this after a sweep that deleted
    /// much, at a quiet time.
    pub async fn vacuum(&self) -> Result<(), StoreError> {
        self.call("vacuuming the file".to_owned(), |conn| {
            conn.execute_batch("VACUUM")?;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            Ok(())
        })
        .await
    }

    /// How many write transactions this store committed since it opened (reads commit
    /// nothing). On a file each is a synced commit, the unit a workload's durability costs:
    /// for metrics, and for tests that count what an operation writes.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    fn from_connection(mut conn: Connection, place: String) -> Result<SqliteStore, StoreError> {
        // The query planner stability guarantee: a statement's plan does not depend on the
        // values bound to it. Without it, SQLite (built with STAT4) re-prepares some cached
        // statements at every new binding (the turn's answers, read with every turn): parsing
        // and planning again, each time, a query whose plan is a key lookup anyway.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(|e| backend(&place, "cannot fix query plans", &e))?;
        let commits = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&commits);
        conn.commit_hook(Some(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            // Let the commit go on.
            false
        }))
        .map_err(|e| backend(&place, "cannot count commits", &e))?;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            commits,
            in_memory: place == MEMORY,
            place: place.into(),
        })
    }

    /// Runs `op` on the connection in tokio's blocking pool; SQLite errors get the file and
    /// `doing` attached here, once. A store in memory waits for no disk: its operations run on
    /// the calling task when the connection is free, without the pool's two thread hand-offs.
    fn call<T, F>(&self, doing: String, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Failure> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let place = Arc::clone(&self.place);
        let inline = self.in_memory;
        Box::pin(async move {
            if inline {
                // A panic under the lock cannot leave a transaction open (rusqlite rolls back
                // when a `Transaction` is dropped, also while unwinding): the connection is
                // still consistent, so a poisoned lock is taken over rather than bricking the
                // store.
                let free = match conn.try_lock() {
                    Ok(guard) => Some(guard),
                    Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                    Err(TryLockError::WouldBlock) => None,
                };
                if let Some(mut guard) = free {
                    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| op(&mut guard)));
                    drop(guard);
                    return settle(&place, &doing, ran.map_err(|_| "it panicked".to_owned()));
                }
            }
            let joined = tokio::task::spawn_blocking(move || {
                let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
                op(&mut conn)
            })
            .await;
            settle(&place, &doing, joined.map_err(|error| error.to_string()))
        })
    }
}

/// The outcome of an operation on the connection, its SQLite errors with the file and `doing`
/// attached; `ran` fails when the operation panicked or its blocking task failed.
fn settle<T>(
    place: &str,
    doing: &str,
    ran: Result<Result<T, Failure>, String>,
) -> Result<T, StoreError> {
    match ran {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(Failure::Store(error))) => Err(error),
        Ok(Err(Failure::Sqlite(error))) => Err(backend(place, doing, &error)),
        Err(error) => Err(StoreError::Backend(format!(
            "sqlite `{place}`: {doing}: the operation failed: {error}"
        ))),
    }
}

impl Store for SqliteStore {
    fn session(&self, id: &str) -> BoxFuture<'_, Result<Option<(SessionRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        self.call(format!("reading session `{id}`"), move |conn| {
            sessions::read(conn, &id)
        })
    }

    fn put_session<'a>(
        &'a self,
        record: &'a SessionRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let json = match encode(&record.id, record) {
            Ok(json) => json,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let id = record.id.clone();
        self.call(format!("writing session `{id}`"), move |conn| {
            sessions::write(conn, &id, &json, expected)
        })
    }

    fn turn(&self, id: &str) -> BoxFuture<'_, Result<Option<(TurnRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        self.call(format!("reading turn `{id}`"), move |conn| {
            turns::read(conn, &id)
        })
    }

    fn turn_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<TurnRecord>, StoreError>> {
        let id = id.to_owned();
        self.call(format!("reading turn `{id}`"), move |conn| {
            turns::read_since(conn, &id, known)
        })
    }

    fn session_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<SessionRecord>, StoreError>> {
        let id = id.to_owned();
        self.call(format!("reading session `{id}`"), move |conn| {
            sessions::read_since(conn, &id, known)
        })
    }

    fn step_since(
        &self,
        turn: (&str, u64),
        session: (&str, u64),
    ) -> BoxFuture<'_, Result<StepSince, StoreError>> {
        let ((turn, known), (session, session_known)) = (
            (turn.0.to_owned(), turn.1),
            (session.0.to_owned(), session.1),
        );
        self.call(
            format!("reading turn `{turn}` and session `{session}`"),
            move |conn| turns::step_since(conn, (&turn, known), (&session, session_known)),
        )
    }

    fn write_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        self.write_turn_appending(record, expected, claim, Appended::default())
    }

    fn write_turn_appending<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
        appended: Appended<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        let write = match turns::TurnWrite::new(record, expected, claim, appended) {
            Ok(write) => write,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        self.call(format!("writing turn `{}`", record.id), move |conn| {
            turns::write(conn, &write)
        })
    }

    fn settle_request<'a>(
        &'a self,
        turn_id: &'a str,
        patch: &'a StepPatch,
        expected: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let json = match encode(turn_id, patch) {
            Ok(json) => json,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let id = turn_id.to_owned();
        self.call(
            format!(
                "recording the answer to request `{}` of turn `{id}`",
                patch.request.request_id
            ),
            move |conn| turns::settle(conn, &id, &json, expected),
        )
    }

    fn turn_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>> {
        let request_id = request_id.to_owned();
        self.call(format!("looking up request `{request_id}`"), move |conn| {
            Ok(conn
                .prepare_cached("SELECT turn_id FROM requests WHERE request_id = ?1")?
                .query_row([&request_id], |row| row.get(0))
                .optional()?)
        })
    }

    fn waiting_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing waiting turns".to_owned(), |conn| {
            // The literal status matches the partial index `turns_waiting`; a bound parameter
            // would not.
            ids(
                conn,
                "SELECT id FROM turns WHERE status = 'waiting' ORDER BY updated",
                [],
            )
        })
    }

    fn running_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing running turns".to_owned(), |conn| {
            ids(
                conn,
                "SELECT id FROM turns WHERE status = 'running' ORDER BY updated",
                [],
            )
        })
    }

    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (session_id, requester) = (session_id.to_owned(), requester.to_owned());
        let key = key.to_owned();
        self.call(
            format!("remembering approval `{key}` of `{requester}` in session `{session_id}`"),
            move |conn| {
                conn.prepare_cached(
                    "INSERT INTO grants (session_id, requester, key) VALUES (?1, ?2, ?3) \
                     ON CONFLICT DO NOTHING",
                )?
                .execute([&session_id, &requester, &key])?;
                Ok(())
            },
        )
    }

    fn journal(&self, run_id: &str) -> BoxFuture<'_, Result<Vec<JournalEntry>, StoreError>> {
        let run_id = run_id.to_owned();
        self.call(format!("reading the journal of `{run_id}`"), move |conn| {
            let mut statement = conn
                .prepare_cached("SELECT json FROM journal WHERE run_id = ?1 ORDER BY position")?;
            let rows = statement
                .query_map([&run_id], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<String>, _>>()?;
            rows.iter()
                .map(|json| {
                    serde_json::from_str(json).map_err(|error| {
                        Failure::Store(StoreError::Corrupt {
                            id: run_id.clone(),
                            error: error.to_string(),
                        })
                    })
                })
                .collect()
        })
    }

    fn record_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
        fence: Option<&'a Lease>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let run_id = run_id.to_owned();
        let position = entry.position;
        let json = serde_json::to_string(entry);
        let fence = fence.cloned();
        self.call(
            format!("recording position {position} of `{run_id}`"),
            move |conn| {
                let json = json.map_err(|error| {
                    Failure::Store(StoreError::Backend(format!(
                        "journal entry is not JSON: {error}"
                    )))
                })?;
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                if let Some(lease) = &fence {
                    check_token(&tx, lease)?;
                }
                let inserted = tx
                    .prepare_cached(
                        "INSERT INTO journal (run_id, position, json) VALUES (?1, ?2, ?3) \
                         ON CONFLICT DO NOTHING",
                    )?
                    .execute(params![run_id, position, json])?;
                if inserted == 0 {
                    return Err(Failure::Store(StoreError::Conflict(format!(
                        "{run_id}#{position}"
                    ))));
                }
                tx.commit()?;
                Ok(())
            },
        )
    }

    fn approvals<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
    ) -> BoxFuture<'a, Result<BTreeSet<String>, StoreError>> {
        let (session_id, requester) = (session_id.to_owned(), requester.to_owned());
        self.call(
            format!("reading the approvals of `{requester}` in session `{session_id}`"),
            move |conn| {
                let mut statement = conn.prepare_cached(
                    "SELECT key FROM grants WHERE session_id = ?1 AND requester = ?2",
                )?;
                let keys = statement
                    .query_map([&session_id, &requester], |row| row.get(0))?
                    .collect::<Result<BTreeSet<String>, _>>()?;
                Ok(keys)
            },
        )
    }

    fn conversation(
        &self,
        session_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ConversationEntry>, StoreError>> {
        let id = session_id.to_owned();
        self.call(format!("reading the conversation of `{id}`"), move |conn| {
            conversation::read(conn, &id)
        })
    }

    fn append_conversation<'a>(
        &'a self,
        session_id: &'a str,
        turn_id: &'a str,
        first: u64,
        messages: &'a [serde_json::Value],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, turn) = (session_id.to_owned(), turn_id.to_owned());
        let messages: Vec<String> = messages.iter().map(ToString::to_string).collect();
        self.call(
            format!("appending to the conversation of `{id}`"),
            move |conn| conversation::append(conn, &id, &turn, first, &messages),
        )
    }

    fn keeps_attachments(&self) -> bool {
        true
    }

    fn put_attachment<'a>(
        &'a self,
        record: &'a AttachmentRecord,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let record = record.clone();
        let doing = format!("storing attachment `{}`", record.id);
        self.call(doing, move |conn| attachments::put(conn, &record))
    }

    fn attachment<'a>(
        &'a self,
        session_id: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<AttachmentRecord>, StoreError>> {
        let (session, id) = (session_id.to_owned(), id.to_owned());
        let doing = format!("reading attachment `{id}` of `{session}`");
        self.call(doing, move |conn| attachments::read(conn, &session, &id))
    }

    fn delete_attachments<'a>(
        &'a self,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let session = session_id.to_owned();
        let doing = format!("deleting the attachments of `{session}`");
        self.call(doing, move |conn| attachments::delete(conn, &session))
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        batch: usize,
    ) -> BoxFuture<'a, Result<Deleted, StoreError>> {
        let session = session_id.to_owned();
        let doing = format!("deleting session `{session}`");
        self.call(doing, move |conn| {
            delete::delete_session(conn, &session, batch)
        })
    }

    fn sweep_turns(
        &self,
        rule: TurnRetention,
        batch: usize,
    ) -> BoxFuture<'_, Result<Deleted, StoreError>> {
        self.call("sweeping finished turns".to_owned(), move |conn| {
            retention::sweep_turns(conn, rule, batch)
        })
    }

    fn idle_sessions(
        &self,
        older_than: Duration,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing idle sessions".to_owned(), move |conn| {
            retention::idle_sessions(conn, older_than, limit)
        })
    }

    fn pins(&self, connection: &str) -> BoxFuture<'_, Result<Vec<PinRecord>, StoreError>> {
        let connection = connection.to_owned();
        self.call(
            format!("reading the pins of connection `{connection}`"),
            move |conn| {
                let mut statement = conn
                    .prepare_cached("SELECT json FROM pins WHERE connection = ?1 ORDER BY tool")?;
                let rows = statement
                    .query_map([&connection], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<String>, _>>()?;
                decode_pins(&connection, &rows).map_err(Failure::Store)
            },
        )
    }

    fn pin<'a>(
        &'a self,
        pin: &'a PinRecord,
        replacing: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let json = encode(&format!("{}/{}", pin.connection, pin.tool), pin);
        let (connection, tool, digest) =
            (pin.connection.clone(), pin.tool.clone(), pin.digest.clone());
        let replacing = replacing.map(str::to_owned);
        self.call(
            format!("pinning tool `{tool}` of connection `{connection}`"),
            move |conn| {
                let json = json.map_err(Failure::Store)?;
                let written = match &replacing {
                    None => conn
                        .prepare_cached(
                            "INSERT INTO pins (connection, tool, digest, json) \
                             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                        )?
                        .execute(params![connection, tool, digest, json])?,
                    Some(old) => conn
                        .prepare_cached(
                            "UPDATE pins SET digest = ?3, json = ?4 \
                             WHERE connection = ?1 AND tool = ?2 AND digest = ?5",
                        )?
                        .execute(params![connection, tool, digest, json, old])?,
                };
                Ok(written == 1)
            },
        )
    }

    fn task(&self, id: &str) -> BoxFuture<'_, Result<Option<(TaskRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        self.call(format!("reading task `{id}`"), move |conn| {
            tasks::read(conn, &id)
        })
    }

    fn write_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        let write = match tasks::TaskWrite::new(record, expected, claim) {
            Ok(write) => write,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        self.call(format!("writing task `{}`", record.id), move |conn| {
            tasks::write(conn, &write)
        })
    }

    fn task_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>> {
        let request_id = request_id.to_owned();
        self.call(format!("looking up request `{request_id}`"), move |conn| {
            Ok(conn
                .prepare_cached("SELECT task_id FROM task_requests WHERE request_id = ?1")?
                .query_row([&request_id], |row| row.get(0))
                .optional()?)
        })
    }

    fn session_tasks(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let session_id = session_id.to_owned();
        self.call(
            format!("listing the tasks of session `{session_id}`"),
            move |conn| {
                ids(
                    conn,
                    "SELECT id FROM tasks WHERE session_id = ?1 ORDER BY created",
                    [&session_id],
                )
            },
        )
    }

    fn open_tasks(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing open tasks".to_owned(), |conn| {
            // The literal statuses match the partial index `tasks_open`.
            ids(
                conn,
                "SELECT id FROM tasks WHERE status NOT IN ('finished', 'cancelled') ORDER BY created",
                [],
            )
        })
    }

    fn list_sessions<'a>(
        &'a self,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<SessionSummary>, StoreError>> {
        let page = page.clone();
        self.call("listing sessions".to_owned(), move |conn| {
            listings::sessions(conn, &page)
        })
    }

    fn list_turns<'a>(
        &'a self,
        filter: &'a TurnFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TurnSummary>, StoreError>> {
        let (filter, page) = (filter.clone(), page.clone());
        self.call("listing turns".to_owned(), move |conn| {
            listings::turns(conn, &filter, &page)
        })
    }

    fn turn_steps<'a>(
        &'a self,
        turn_id: &'a str,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<ClosedStep>, StoreError>> {
        let (turn_id, page) = (turn_id.to_owned(), page.clone());
        self.call(
            format!("listing the steps of turn `{turn_id}`"),
            move |conn| turns::steps(conn, &turn_id, &page),
        )
    }

    fn list_tasks<'a>(
        &'a self,
        filter: &'a TaskFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TaskSummary>, StoreError>> {
        let (filter, page) = (filter.clone(), page.clone());
        self.call("listing tasks".to_owned(), move |conn| {
            listings::tasks(conn, &filter, &page)
        })
    }

    fn renew_leases<'a>(
        &'a self,
        held: &'a [Lease],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        let held = held.to_vec();
        self.call(format!("renewing {} leases", held.len()), move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let expires = expiry(now_ms(), ttl);
            let mut renewed = Vec::new();
            for lease in held {
                let sql = match lease.kind {
                    LeaseKind::Turn => {
                        "UPDATE turns SET lease_expires = ?1 WHERE id = ?2 AND lease_token = ?3 \
                         AND lease_owner = ?4 AND status = 'running'"
                    }
                    LeaseKind::Task => {
                        "UPDATE tasks SET lease_expires = ?1 WHERE id = ?2 AND lease_token = ?3 \
                         AND lease_owner = ?4 AND status IN ('running', 'cancelling')"
                    }
                };
                let token = i64::try_from(lease.token).unwrap_or(i64::MAX);
                let updated = tx.prepare_cached(sql)?.execute(params![
                    expires,
                    lease.id,
                    token,
                    lease.owner
                ])?;
                if updated == 1 {
                    renewed.push(lease);
                }
            }
            tx.commit()?;
            Ok(renewed)
        })
    }

    fn expired_leases(&self) -> BoxFuture<'_, Result<Vec<(LeaseKind, String)>, StoreError>> {
        self.call("listing expired leases".to_owned(), |conn| {
            let now = now_ms();
            let mut found = Vec::new();
            for (kind, sql) in [
                (
                    LeaseKind::Turn,
                    "SELECT id FROM turns WHERE status = 'running' AND lease_expires < ?1 \
                     ORDER BY updated",
                ),
                (
                    LeaseKind::Task,
                    "SELECT id FROM tasks WHERE status IN ('running', 'cancelling') \
                     AND lease_expires < ?1 ORDER BY created",
                ),
            ] {
                let mut statement = conn.prepare_cached(sql)?;
                for id in statement.query_map([now], |row| row.get::<_, String>(0))? {
                    found.push((kind, id?));
                }
            }
            Ok(found)
        })
    }

    fn due_turns(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing due timers of turns".to_owned(), move |conn| {
            ids(
                conn,
                "SELECT id FROM turns WHERE wake_at IS NOT NULL AND wake_at <= ?1 ORDER BY wake_at",
                [clamp(now_ms)],
            )
        })
    }

    fn due_tasks(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        self.call("listing due timers of tasks".to_owned(), move |conn| {
            ids(
                conn,
                "SELECT id FROM tasks WHERE wake_at IS NOT NULL AND wake_at <= ?1 ORDER BY wake_at",
                [clamp(now_ms)],
            )
        })
    }
}

/// The ids the one-column statement `sql` selects with `params`, in its order.
fn ids(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<String>, Failure> {
    let mut statement = conn.prepare_cached(sql)?;
    let ids = statement
        .query_map(params, |row| row.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(ids)
}

/// Why an operation inside [`SqliteStore::call`] failed.
enum Failure {
    /// SQLite failed; `call` adds the file and the operation.
    Sqlite(rusqlite::Error),
    /// Already a complete answer (a conflict, an undecodable record).
    Store(StoreError),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Failure::Sqlite(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

fn backend(place: &str, doing: &str, error: &rusqlite::Error) -> StoreError {
    let hint = if error.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) {
        format!(
            " (another connection holds the file's write lock; waited up to {} s)",
            BUSY_TIMEOUT.as_secs()
        )
    } else {
        String::new()
    };
    StoreError::Backend(format!("sqlite `{place}`: {doing}: {error}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_turns_are_listed_through_the_partial_index() {
        let store = SqliteStore::in_memory().unwrap();
        let conn = store.conn.lock().unwrap();
        let plan: Vec<String> = conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT id FROM turns WHERE status = 'waiting' ORDER BY updated",
            )
            .unwrap()
            .query_map([], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter().any(|step| step.contains("turns_waiting")),
            "plan: {plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "sorts instead of reading the index in order: {plan:?}"
        );
    }

    #[test]
    fn the_next_sequence_is_read_from_the_index() {
        let store = SqliteStore::in_memory().unwrap();
        let conn = store.conn.lock().unwrap();
        let plan: Vec<String> = conn
            .prepare("EXPLAIN QUERY PLAN SELECT coalesce(max(updated), 0) + 1 FROM turns")
            .unwrap()
            .query_map([], |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter().any(|step| step.contains("turns_by_update")),
            "plan: {plan:?}"
        );
    }
}

#[cfg(test)]
mod durability {
    use super::*;

    #[test]
    fn a_file_store_syncs_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).unwrap();
        let conn = store.conn.lock().unwrap();
        let sync: i64 = conn
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .unwrap();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |row| row.get(0))
            .unwrap();
        assert_eq!((sync, mode.as_str()), (2, "wal"), "FULL is 2");
    }
}
