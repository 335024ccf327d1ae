//! The PostgreSQL store: one database shared by every instance of an application.
//!
//! Each record is one row holding its JSON (as `TEXT`) and its version, like the SQLite store's;
//! every check a write depends on (version, lease, fencing token) runs in the write's own
//! transaction, on the row it writes. Lease times come from the database server's clock, so
//! instances whose clocks disagree still agree on which leases have expired. Turn and task
//! writes a waiter needs announce themselves with `NOTIFY` (a new wake-up time, a task's result
//! or end), which [`Store::changed`] turns into early wake-ups.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::rows::{
    clamp, decode, decode_pins, encode, encode_turn, status_name, stored_versions,
    task_status_name, written,
};
use super::{
    Appended, ChangeMark, Claim, Deleted, Lease, LeaseKind, Page, PageRequest, SessionSummary,
    Since, StepSince, Store, StoreError, TaskFilter, TaskSummary, TurnFilter, TurnRetention,
    TurnSummary, Written,
};
use crate::record::{
    AttachmentRecord, ClosedStep, ConversationEntry, JournalEntry, PinRecord, SessionRecord,
    StepPatch, TaskRecord, TurnRecord,
};

/// The current time by the database server's clock, in Unix milliseconds. `clock_timestamp()`
/// rather than `now()`: `now()` is the start of the transaction, which may have waited for a row
/// lock since.
macro_rules! now_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

/// Column `$col`, a record stored as TEXT, as `json` a query can read ids and flags from.
/// Records are TEXT because they may hold a NUL character (`\u0000`), which Postgres refuses to
/// turn into text: every unescaped `\u0000` becomes `\ufffd` first (a `\\u0000`, an escaped
/// backslash and the letters, stays), so a NUL anywhere in a record never fails the query.
macro_rules! json_of {
    ($col:literal) => {
        concat!(
            "regexp_replace(",
            $col,
            r#", '(?<!\\)((?:\\\\)*)\\u0000', '\1\\ufffd', 'g')::json"#
        )
    };
}

mod attachments;
mod claims;
mod conversation;
mod delete;
mod errors;
mod listen;
mod listings;
mod migrate;
mod pg_step;
mod records;
mod retention;
#[cfg(test)]
mod scratch;
mod since;
mod tables;

pub use pg_step::PgStep;

use claims::check_fence;
use errors::{Failure, backend, cannot_connect, describe};
use listen::Changes;
use migrate::migrate;
use records::{Announce, RecordRow, owned};
use tables::{TASKS, TURNS};

/// The `NOTIFY` channel of turn and task writes.
const CHANNEL: &str = "toolwright";

/// The PostgreSQL store: several instances of an application share one database.
///
/// Versioned writes are conditional statements inside a transaction, so exactly one of two
/// racing instances wins and the other gets [`StoreError::Conflict`]; claims and fenced writes
/// lock the record's row for the check, so a take-over and a write under the lease it replaces
/// cannot both land. Lease expiry is judged by the database server's clock.
///
/// [`Store::changed`] listens on the channel `toolwright` (`LISTEN`), on a connection of its own
/// opened at the first call. A write notifies it only when a waiter needs it: one that sets a
/// wake-up time other than its row held (waiters wake when that time comes), and a task write
/// that holds a result not yet delivered or ends the task. PostgreSQL serialises notifying
/// commits cluster-wide, so answers, claims and closed steps stay silent; polling stays the
/// source of truth.
///
/// The schema is created and upgraded at connect, under sqlx's advisory lock, so instances may
/// start together; the applied versions are kept in the table `toolwright_migrations`. A
/// database migrated by a newer toolwright is refused. The tables (`sessions`, `turns`,
/// `tasks`, ...) go into the connection's schema: give toolwright a database of its own, or a
/// schema of its own (created beforehand) through the URL
/// (`?options=-csearch_path%3Dtoolwright`).
///
/// Dropping an operation's future rolls its transaction back, unless the commit was already
/// sent: the versions tell a later reader whether a write landed.
///
/// This build speaks to the server without TLS (`sslmode=prefer`, the default, falls back to a
/// plain connection; `sslmode=require` fails): reach a remote server through a private network
/// or a tunnel.
///
/// ```no_run
/// use toolwright_runtime::{PostgresStore, SessionRecord, Store};
///
/// # async fn demo() -> Result<(), toolwright_runtime::StoreError> {
/// let store = PostgresStore::connect("postgres://app:secret@db.internal:5432/toolwright").await?;
/// let version = store.put_session(&SessionRecord::new("s1"), None).await?;
/// let (session, read) = store.session("s1").await?.expect("just written");
/// assert_eq!((session.id.as_str(), read), ("s1", version));
/// # Ok(())
/// # }
/// ```
pub struct PostgresStore {
    pool: PgPool,
    /// `user@host:port/database`, as shown in errors (never the password).
    place: Arc<str>,
    changes: Arc<Changes>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.place)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`) with
    /// a pool of sqlx's defaults (up to 10 connections), and brings its schema up to date. A
    /// server that refuses connections is tried again for up to 30 s, so an instance may start
    /// while the database does.
    ///
    /// Fails with [`StoreError::Backend`] when the URL is not valid, the server cannot be
    /// reached or refuses the login, the schema cannot be created, or the database was migrated
    /// by a newer toolwright. Messages name the server and database, never the password.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(|error| {
            StoreError::Backend(format!(
                "postgres: the connection URL is not valid ({error}); write it as \
                 `postgres://USER:PASSWORD@HOST:PORT/DATABASE`"
            ))
        })?;
        let place = describe(&options);
        let pool = match PgPoolOptions::new().connect_with(options.clone()).await {
            Ok(pool) => pool,
            Err(error) => return Err(cannot_connect(&options, &place, error).await),
        };
        PostgresStore::with_place(pool, place).await
    }

    /// A store on `pool` (which decides the number of connections, timeouts and the like),
    /// after bringing the database's schema up to date. Fails like [`PostgresStore::connect`].
    ///
    /// [`Store::changed`] opens one more connection with the pool's options, outside the pool,
    /// so that listening never takes a connection from the store's work.
    pub async fn from_pool(pool: PgPool) -> Result<PostgresStore, StoreError> {
        let place = describe(&pool.connect_options());
        PostgresStore::with_place(pool, place).await
    }

    async fn with_place(pool: PgPool, place: String) -> Result<PostgresStore, StoreError> {
        migrate(&pool, &place).await?;
        Ok(PostgresStore {
            pool,
            place: place.into(),
            changes: Arc::new(Changes::new()),
        })
    }

    /// `result`, with the database and `doing` (computed only on failure) attached to a
    /// database error.
    fn finish<T>(
        &self,
        result: Result<T, Failure>,
        doing: impl FnOnce() -> String,
    ) -> Result<T, StoreError> {
        result.map_err(|failure| match failure {
            Failure::Sql(error) => backend(&self.place, &doing(), &error),
            Failure::Store(error) => error,
        })
    }

    async fn read_record<T: DeserializeOwned>(
        &self,
        sql: &'static str,
        id: &str,
    ) -> Result<Option<(T, u64)>, Failure> {
        let row: Option<(String, i64)> = query_as(sql).bind(id).fetch_optional(&self.pool).await?;
        Ok(row
            .map(|(json, version)| decode(id, &json, version))
            .transpose()?)
    }

    async fn ids(&self, sql: &'static str, bound: Option<&str>) -> Result<Vec<String>, Failure> {
        let statement = query_scalar(sql);
        let statement = match bound {
            Some(value) => statement.bind(value.to_owned()),
            None => statement,
        };
        Ok(statement.fetch_all(&self.pool).await?)
    }

    async fn due(&self, sql: &'static str, now_ms: u64) -> Result<Vec<String>, Failure> {
        Ok(query_scalar(sql)
            .bind(clamp(now_ms))
            .fetch_all(&self.pool)
            .await?)
    }
}

impl Store for PostgresStore {
    fn session(&self, id: &str) -> BoxFuture<'_, Result<Option<(SessionRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        Box::pin(async move {
            let result = self
                .read_record("SELECT json, version FROM sessions WHERE id = $1", &id)
                .await;
            self.finish(result, || format!("reading session `{id}`"))
        })
    }

    fn put_session<'a>(
        &'a self,
        record: &'a SessionRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let id = record.id.as_str();
            let result = async {
                let json = encode(id, record)?;
                // One statement each: the condition and the write are atomic without a
                // transaction, and a refused write changes nothing.
                match expected {
                    None => {
                        let inserted = query(concat!(
                            "INSERT INTO sessions (id, version, json, updated_ms) \
                             VALUES ($1, 1, $2, ",
                            now_ms!(),
                            ") ON CONFLICT (id) DO NOTHING"
                        ))
                        .bind(id)
                        .bind(&json)
                        .execute(&self.pool)
                        .await?;
                        written(inserted.rows_affected(), id)?;
                        Ok(1)
                    }
                    Some(expected) => {
                        let (stored, next) = stored_versions(id, expected)?;
                        let updated = query(concat!(
                            "UPDATE sessions SET version = $3, json = $2, updated_ms = ",
                            now_ms!(),
                            " WHERE id = $1 AND version = $4"
                        ))
                        .bind(id)
                        .bind(&json)
                        .bind(next)
                        .bind(stored)
                        .execute(&self.pool)
                        .await?;
                        written(updated.rows_affected(), id)?;
                        Ok(expected + 1)
                    }
                }
            }
            .await;
            self.finish(result, || format!("writing session `{id}`"))
        })
    }

    fn turn(&self, id: &str) -> BoxFuture<'_, Result<Option<(TurnRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        Box::pin(async move {
            let result = self.read_turn(&id).await;
            self.finish(result, || format!("reading turn `{id}`"))
        })
    }

    fn turn_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<TurnRecord>, StoreError>> {
        let id = id.to_owned();
        Box::pin(async move {
            let result = self.read_turn_since(&id, known).await;
            self.finish(result, || format!("reading turn `{id}`"))
        })
    }

    fn session_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<SessionRecord>, StoreError>> {
        let id = id.to_owned();
        Box::pin(async move {
            let result = self.read_session_since(&id, known).await;
            self.finish(result, || format!("reading session `{id}`"))
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
        Box::pin(async move {
            let result = self
                .read_step_since((&turn, known), (&session, session_known))
                .await;
            self.finish(result, || {
                format!("reading turn `{turn}` and session `{session}`")
            })
        })
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
        Box::pin(async move {
            let result = async {
                let (json, step) = encode_turn(record)?;
                let row = RecordRow {
                    id: &record.id,
                    session_id: &record.session_id,
                    status: status_name(record.status),
                    json,
                    wake_at: record.wake_at().map(clamp),
                    requests: owned(record.request_ids()),
                    appended,
                    step,
                    announce: Announce::WakeUp,
                };
                self.write_record(&TURNS, row, expected, claim).await
            }
            .await;
            self.finish(result, || format!("writing turn `{}`", record.id))
        })
    }

    fn settle_request<'a>(
        &'a self,
        turn_id: &'a str,
        patch: &'a StepPatch,
        expected: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let result = self.settle_turn_request(turn_id, patch, expected).await;
            self.finish(result, || {
                format!(
                    "recording the answer to request `{}` of turn `{turn_id}`",
                    patch.request.request_id
                )
            })
        })
    }

    fn turn_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>> {
        let request_id = request_id.to_owned();
        Box::pin(async move {
            let result = query_scalar("SELECT turn_id FROM requests WHERE request_id = $1")
                .bind(&request_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(Failure::from);
            self.finish(result, || format!("looking up request `{request_id}`"))
        })
    }

    fn waiting_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            // The literal status matches the partial index `turns_waiting`; a bound parameter
            // would not.
            let result = self
                .ids(
                    "SELECT id FROM turns WHERE status = 'waiting' ORDER BY updated",
                    None,
                )
                .await;
            self.finish(result, || "listing waiting turns".to_owned())
        })
    }

    fn running_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let result = self
                .ids(
                    "SELECT id FROM turns WHERE status = 'running' ORDER BY updated",
                    None,
                )
                .await;
            self.finish(result, || "listing running turns".to_owned())
        })
    }

    fn journal(&self, run_id: &str) -> BoxFuture<'_, Result<Vec<JournalEntry>, StoreError>> {
        let run_id = run_id.to_owned();
        Box::pin(async move {
            let result = async {
                let rows: Vec<String> =
                    query_scalar("SELECT json FROM journal WHERE run_id = $1 ORDER BY position")
                        .bind(&run_id)
                        .fetch_all(&self.pool)
                        .await?;
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
            }
            .await;
            self.finish(result, || format!("reading the journal of `{run_id}`"))
        })
    }

    fn record_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
        fence: Option<&'a Lease>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let position = entry.position;
        Box::pin(async move {
            let result = async {
                let json = serde_json::to_string(entry).map_err(|error| {
                    StoreError::Backend(format!("journal entry is not JSON: {error}"))
                })?;
                let mut tx = self.pool.begin().await?;
                if let Some(lease) = fence {
                    check_fence(&mut tx, lease).await?;
                }
                let inserted = query(
                    "INSERT INTO journal (run_id, position, json) VALUES ($1, $2, $3) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(run_id)
                .bind(i64::from(position))
                .bind(&json)
                .execute(&mut *tx)
                .await?;
                if inserted.rows_affected() == 0 {
                    return Err(Failure::Store(StoreError::Conflict(format!(
                        "{run_id}#{position}"
                    ))));
                }
                tx.commit().await?;
                Ok(())
            }
            .await;
            self.finish(result, || {
                format!("recording position {position} of `{run_id}`")
            })
        })
    }

    fn journal_in_transaction<'a>(
        &'a self,
        run_id: &'a str,
        position: u32,
        name: &'a str,
        fence: Option<&'a Lease>,
        work: toolwright_core::StoreWork,
    ) -> BoxFuture<'a, Result<Result<serde_json::Value, toolwright_core::ToolError>, StoreError>>
    {
        Box::pin(async move {
            let result = self
                .step_in_transaction(run_id, position, name, fence, work)
                .await;
            self.finish(result, || {
                format!(
                    "running step `{name}` (position {position} of `{run_id}`) in a transaction"
                )
            })
        })
    }

    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let result = query(
                "INSERT INTO grants (session_id, requester, key) VALUES ($1, $2, $3) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(session_id)
            .bind(requester)
            .bind(key)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(Failure::from);
            self.finish(result, || {
                format!("remembering approval `{key}` of `{requester}` in session `{session_id}`")
            })
        })
    }

    fn approvals<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
    ) -> BoxFuture<'a, Result<BTreeSet<String>, StoreError>> {
        Box::pin(async move {
            let result = query_scalar::<_, String>(
                "SELECT key FROM grants WHERE session_id = $1 AND requester = $2",
            )
            .bind(session_id)
            .bind(requester)
            .fetch_all(&self.pool)
            .await
            .map(|keys| keys.into_iter().collect())
            .map_err(Failure::from);
            self.finish(result, || {
                format!("reading the approvals of `{requester}` in session `{session_id}`")
            })
        })
    }

    fn conversation(
        &self,
        session_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ConversationEntry>, StoreError>> {
        let id = session_id.to_owned();
        Box::pin(async move {
            let result = conversation::read(&self.pool, &id).await;
            self.finish(result, || format!("reading the conversation of `{id}`"))
        })
    }

    fn append_conversation<'a>(
        &'a self,
        session_id: &'a str,
        turn_id: &'a str,
        first: u64,
        messages: &'a [serde_json::Value],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let result =
                conversation::append(&self.pool, session_id, turn_id, first, messages).await;
            self.finish(result, || {
                format!("appending to the conversation of `{session_id}`")
            })
        })
    }

    fn keeps_attachments(&self) -> bool {
        true
    }

    fn put_attachment<'a>(
        &'a self,
        record: &'a AttachmentRecord,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let result = attachments::put(&self.pool, record).await;
            self.finish(result, || format!("storing attachment `{}`", record.id))
        })
    }

    fn attachment<'a>(
        &'a self,
        session_id: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<AttachmentRecord>, StoreError>> {
        Box::pin(async move {
            let result = attachments::read(&self.pool, session_id, id).await;
            self.finish(result, || {
                format!("reading attachment `{id}` of `{session_id}`")
            })
        })
    }

    fn delete_attachments<'a>(
        &'a self,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let result = attachments::delete(&self.pool, session_id).await;
            self.finish(result, || {
                format!("deleting the attachments of `{session_id}`")
            })
        })
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        batch: usize,
    ) -> BoxFuture<'a, Result<Deleted, StoreError>> {
        Box::pin(async move {
            let result = delete::delete_session(&self.pool, session_id, batch).await;
            self.finish(result, || format!("deleting session `{session_id}`"))
        })
    }

    fn sweep_turns(
        &self,
        rule: TurnRetention,
        batch: usize,
    ) -> BoxFuture<'_, Result<Deleted, StoreError>> {
        Box::pin(async move {
            let result = retention::sweep_turns(&self.pool, rule, batch).await;
            self.finish(result, || "sweeping finished turns".to_owned())
        })
    }

    fn idle_sessions(
        &self,
        older_than: Duration,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let result = retention::idle_sessions(&self.pool, older_than, limit).await;
            self.finish(result, || "listing idle sessions".to_owned())
        })
    }

    fn pins(&self, connection: &str) -> BoxFuture<'_, Result<Vec<PinRecord>, StoreError>> {
        let connection = connection.to_owned();
        Box::pin(async move {
            let result = query_scalar::<_, String>(
                "SELECT json FROM pins WHERE connection = $1 ORDER BY tool",
            )
            .bind(&connection)
            .fetch_all(&self.pool)
            .await
            .map_err(Failure::from)
            .and_then(|rows| decode_pins(&connection, &rows).map_err(Failure::Store));
            self.finish(result, || {
                format!("reading the pins of connection `{connection}`")
            })
        })
    }

    fn pin<'a>(
        &'a self,
        pin: &'a PinRecord,
        replacing: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let result = async {
                let json = encode(&format!("{}/{}", pin.connection, pin.tool), pin)
                    .map_err(Failure::Store)?;
                let done = match replacing {
                    None => {
                        query(
                            "INSERT INTO pins (connection, tool, digest, json) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        )
                        .bind(&pin.connection)
                        .bind(&pin.tool)
                        .bind(&pin.digest)
                        .bind(&json)
                        .execute(&self.pool)
                        .await?
                    }
                    Some(old) => {
                        query(
                            "UPDATE pins SET digest = $3, json = $4 \
                             WHERE connection = $1 AND tool = $2 AND digest = $5",
                        )
                        .bind(&pin.connection)
                        .bind(&pin.tool)
                        .bind(&pin.digest)
                        .bind(&json)
                        .bind(old)
                        .execute(&self.pool)
                        .await?
                    }
                };
                Ok::<bool, Failure>(done.rows_affected() == 1)
            }
            .await;
            self.finish(result, || {
                format!(
                    "pinning tool `{}` of connection `{}`",
                    pin.tool, pin.connection
                )
            })
        })
    }

    fn task(&self, id: &str) -> BoxFuture<'_, Result<Option<(TaskRecord, u64)>, StoreError>> {
        let id = id.to_owned();
        Box::pin(async move {
            let result = self
                .read_record("SELECT json, version FROM tasks WHERE id = $1", &id)
                .await;
            self.finish(result, || format!("reading task `{id}`"))
        })
    }

    fn write_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        Box::pin(async move {
            let result = async {
                let row = RecordRow {
                    id: &record.id,
                    session_id: &record.session_id,
                    status: task_status_name(record.status),
                    json: encode(&record.id, record)?,
                    wake_at: record.wake_at().map(clamp),
                    requests: owned(record.request_ids()),
                    appended: Appended::default(),
                    step: None,
                    announce: Announce::task(record),
                };
                self.write_record(&TASKS, row, expected, claim).await
            }
            .await;
            self.finish(result, || format!("writing task `{}`", record.id))
        })
    }

    fn task_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>> {
        let request_id = request_id.to_owned();
        Box::pin(async move {
            let result = query_scalar("SELECT task_id FROM task_requests WHERE request_id = $1")
                .bind(&request_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(Failure::from);
            self.finish(result, || format!("looking up request `{request_id}`"))
        })
    }

    fn session_tasks(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let session_id = session_id.to_owned();
        Box::pin(async move {
            let result = self
                .ids(
                    "SELECT id FROM tasks WHERE session_id = $1 ORDER BY created",
                    Some(&session_id),
                )
                .await;
            self.finish(result, || {
                format!("listing the tasks of session `{session_id}`")
            })
        })
    }

    fn open_tasks(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            // The literal statuses match the partial index `tasks_open`.
            let result = self
                .ids(
                    "SELECT id FROM tasks WHERE status NOT IN ('finished', 'cancelled') \
                     ORDER BY created",
                    None,
                )
                .await;
            self.finish(result, || "listing open tasks".to_owned())
        })
    }

    fn list_sessions<'a>(
        &'a self,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<SessionSummary>, StoreError>> {
        Box::pin(async move {
            let result = self.session_listing(page).await;
            self.finish(result, || "listing sessions".to_owned())
        })
    }

    fn list_turns<'a>(
        &'a self,
        filter: &'a TurnFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TurnSummary>, StoreError>> {
        Box::pin(async move {
            let result = self.turn_listing(filter, page).await;
            self.finish(result, || "listing turns".to_owned())
        })
    }

    fn turn_steps<'a>(
        &'a self,
        turn_id: &'a str,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<ClosedStep>, StoreError>> {
        Box::pin(async move {
            let result = self.step_listing(turn_id, page).await;
            self.finish(result, || format!("listing the steps of turn `{turn_id}`"))
        })
    }

    fn list_tasks<'a>(
        &'a self,
        filter: &'a TaskFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TaskSummary>, StoreError>> {
        Box::pin(async move {
            let result = self.task_listing(filter, page).await;
            self.finish(result, || "listing tasks".to_owned())
        })
    }

    fn renew_leases<'a>(
        &'a self,
        held: &'a [Lease],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        Box::pin(async move {
            let result = self.renew(held, ttl).await;
            self.finish(result, || format!("renewing {} leases", held.len()))
        })
    }

    fn expired_leases(&self) -> BoxFuture<'_, Result<Vec<(LeaseKind, String)>, StoreError>> {
        Box::pin(async move {
            let result = self.expired().await;
            self.finish(result, || "listing expired leases".to_owned())
        })
    }

    fn due_turns(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let result = self
                .due(
                    "SELECT id FROM turns WHERE wake_at IS NOT NULL AND wake_at <= $1 \
                     ORDER BY wake_at",
                    now_ms,
                )
                .await;
            self.finish(result, || "listing due timers of turns".to_owned())
        })
    }

    fn due_tasks(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        Box::pin(async move {
            let result = self
                .due(
                    "SELECT id FROM tasks WHERE wake_at IS NOT NULL AND wake_at <= $1 \
                     ORDER BY wake_at",
                    now_ms,
                )
                .await;
            self.finish(result, || "listing due timers of tasks".to_owned())
        })
    }

    /// Returns at the first change a waiter reads (a task write that gives it a result or
    /// ends the task, by any instance) notified after the last call returned, when a wake-up
    /// time some write announced comes, or after `timeout`. The first call starts a listener
    /// on a connection of its own (reconnecting when it drops, stopped when the store is
    /// dropped).
    fn changed(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_for_change(timeout))
    }

    /// The count of changes the listener heard so far.
    fn change_mark(&self) -> ChangeMark {
        self.mark_now()
    }

    /// Returns at the first change heard after `mark` (a notified write a waiter reads, a
    /// wake-up time coming, the listener starting or reconnecting: each counts as one), or
    /// after `timeout` (see [`PostgresStore::changed`] for the listener).
    fn changed_since<'a>(
        &'a self,
        mark: &'a mut ChangeMark,
        timeout: Duration,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.wait_since(mark, timeout))
    }
}
