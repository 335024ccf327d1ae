//! The PostgreSQL store: one database shared by every instance of an application.
//!
//! Each record is one row holding its JSON (as `TEXT`) and its version, like the SQLite store's;
//! every check a write depends on (version, lease, fencing token) runs in the write's own
//! transaction, on the row it writes. Lease times come from the database server's clock, so
//! instances whose clocks disagree still agree on which leases have expired. Turn and task
//! writes announce themselves with `NOTIFY`, which [`Store::changed`] turns into early wake-ups.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use sqlx_core::Error as SqlError;
use sqlx_core::connection::{ConnectOptions, Connection};
use sqlx_core::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_core::sql_str::SqlSafeStr;
use sqlx_postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgTransaction};
use tokio::sync::{OnceCell, watch};
use tokio_util::sync::CancellationToken;

use toolwright_core::{DurableContext, ErrorCode, ToolError, WorkflowContext};

use super::rows::{
    check_token as stale, clamp, decode, decode_pins, encode, status_name, stored_versions,
    task_status_name, written,
};
use super::{Claim, Lease, LeaseKind, Store, StoreError, Written};
use crate::record::{JournalEntry, PinRecord, SessionRecord, TaskRecord, TurnRecord};

/// The current time by the database server's clock, in Unix milliseconds. `clock_timestamp()`
/// rather than `now()`: `now()` is the start of the transaction, which may have waited for a row
/// lock since.
macro_rules! now_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

/// The schema, one script per version (see the scripts' header for the rules).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "pins",
        include_str!("../../migrations/postgres/0002_pins.sql"),
    ),
];

/// Where sqlx records the applied migrations: a name of toolwright's own, so that an application
/// sharing the database may keep its own migrations in sqlx's default `_sqlx_migrations`.
const MIGRATIONS_TABLE: &str = "toolwright_migrations";

/// The `NOTIFY` channel of turn and task writes.
const CHANNEL: &str = "toolwright";

/// A `NOTIFY` payload must stay under 8000 bytes; the id in it is for people reading the
/// channel (the store wakes every waiter whatever it says), so a long one is cut.
const PAYLOAD_ID_BYTES: usize = 200;

/// The longest lease written, so that the server's `now + ttl` cannot overflow a `bigint`: a
/// longer time to live is as good as forever.
const MAX_TTL_MS: i64 = i64::MAX / 4;

/// Shortest and longest pause before the listener of [`Store::changed`] connects again.
const LISTEN_RETRY: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// The PostgreSQL store: several instances of an application share one database.
///
/// Versioned writes are conditional statements inside a transaction, so exactly one of two
/// racing instances wins and the other gets [`StoreError::Conflict`]; claims and fenced writes
/// lock the record's row for the check, so a take-over and a write under the lease it replaces
/// cannot both land. Lease expiry is judged by the database server's clock.
///
/// [`Store::changed`] listens on the channel `toolwright` (`LISTEN`), which every turn and task
/// write notifies, on a connection of its own opened at the first call; polling stays the
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

    /// A turn or task write: the claim check, the versioned write, the lease, the request
    /// index and the notification, in one transaction.
    async fn write_record(
        &self,
        sql: &RecordSql,
        row: RecordRow<'_>,
        expected: Option<u64>,
        claim: Claim<'_>,
    ) -> Result<Written, Failure> {
        let id = row.id;
        let mut tx = self.pool.begin().await?;
        check_claim(&mut tx, sql, id, claim).await?;
        let version = match expected {
            None => {
                let inserted = query(sql.insert)
                    .bind(id)
                    .bind(row.session_id)
                    .bind(row.status)
                    .bind(&row.json)
                    .bind(row.wake_at)
                    .execute(&mut *tx)
                    .await?;
                written(inserted.rows_affected(), id)?;
                1
            }
            Some(expected) => {
                let (stored, next) = stored_versions(id, expected)?;
                let updated = query(sql.update)
                    .bind(id)
                    .bind(row.session_id)
                    .bind(row.status)
                    .bind(&row.json)
                    .bind(row.wake_at)
                    .bind(next)
                    .bind(stored)
                    .execute(&mut *tx)
                    .await?;
                written(updated.rows_affected(), id)?;
                expected + 1
            }
        };
        let lease = take_lease(&mut tx, sql, id, claim).await?;
        if !row.requests.is_empty() {
            // The index only grows: a request of a closed step still resolves to its record,
            // so a late answer is recognised as an answer to a settled request.
            query(sql.index)
                .bind(&row.requests)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload(sql.kind, id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Written { version, lease })
    }

    /// Starts the listener behind [`Store::changed`] once, and waits for the next notification
    /// (at once when one arrived since the last call returned).
    async fn next_change(&self) {
        let started = self
            .changes
            .listener
            .get_or_try_init(|| listen(&self.pool, &self.place, &self.changes))
            .await;
        if let Err(error) = started {
            tracing::warn!(
                "postgres `{}`: cannot listen for changes, falling back to polling: {error}",
                self.place
            );
            return std::future::pending().await;
        }
        let mut count = self.changes.count.subscribe();
        if *count.borrow_and_update() > self.changes.reported.load(Ordering::SeqCst) {
            return;
        }
        // The sender lives as long as `self`: this cannot fail while we wait.
        let _ = count.changed().await;
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
                        let inserted = query(
                            "INSERT INTO sessions (id, version, json) VALUES ($1, 1, $2) \
                             ON CONFLICT (id) DO NOTHING",
                        )
                        .bind(id)
                        .bind(&json)
                        .execute(&self.pool)
                        .await?;
                        written(inserted.rows_affected(), id)?;
                        Ok(1)
                    }
                    Some(expected) => {
                        let (stored, next) = stored_versions(id, expected)?;
                        let updated = query(
                            "UPDATE sessions SET version = $3, json = $2 \
                             WHERE id = $1 AND version = $4",
                        )
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
            let result = self
                .read_record("SELECT json, version FROM turns WHERE id = $1", &id)
                .await;
            self.finish(result, || format!("reading turn `{id}`"))
        })
    }

    fn write_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        Box::pin(async move {
            let result = async {
                let row = RecordRow {
                    id: &record.id,
                    session_id: &record.session_id,
                    status: status_name(record.status),
                    json: encode(&record.id, record)?,
                    wake_at: record.wake_at().map(clamp),
                    requests: request_index(record.request_ids()),
                };
                self.write_record(&TURNS, row, expected, claim).await
            }
            .await;
            self.finish(result, || format!("writing turn `{}`", record.id))
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
                    // `FOR SHARE` holds off a take-over (an UPDATE of the row) until this
                    // transaction ends, while the holder's other journal records go ahead.
                    let token: Option<i64> = query_scalar(table_sql(
                        lease.kind,
                        "SELECT lease_token FROM turns WHERE id = $1 FOR SHARE",
                        "SELECT lease_token FROM tasks WHERE id = $1 FOR SHARE",
                    ))
                    .bind(&lease.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    check_token(lease, token)?;
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
            let result = async {
                let mut tx = self.pool.begin().await?;
                let recorded: Option<i32> =
                    query_scalar("SELECT 1 FROM journal WHERE run_id = $1 AND position = $2")
                        .bind(run_id)
                        .bind(i64::from(position))
                        .fetch_optional(&mut *tx)
                        .await?;
                if recorded.is_some() {
                    return Err(Failure::Store(StoreError::Conflict(format!(
                        "{run_id}#{position}"
                    ))));
                }
                let connection: &mut sqlx_postgres::PgConnection = &mut tx;
                let value = match work(connection).await {
                    Ok(value) => value,
                    // Dropping the transaction rolls the work's writes back.
                    Err(error) => return Ok(Err(error)),
                };
                let entry = JournalEntry {
                    position,
                    kind: crate::record::EntryKind::Step,
                    name: name.to_owned(),
                    value,
                };
                if let Some(lease) = fence {
                    // Checked after the work, so that the row is locked only for the commit (a long step
                    // must not hold off the holder's renewals); a take-over waits for it.
                    let token: Option<i64> = query_scalar(table_sql(
                        lease.kind,
                        "SELECT lease_token FROM turns WHERE id = $1 FOR SHARE",
                        "SELECT lease_token FROM tasks WHERE id = $1 FOR SHARE",
                    ))
                    .bind(&lease.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    check_token(lease, token)?;
                }
                let json = serde_json::to_string(&entry).map_err(|error| {
                    StoreError::Backend(format!("journal entry is not JSON: {error}"))
                })?;
                // A racing run of the same step waits here for the other transaction and
                // then finds the position taken: this one rolls back, work and all.
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
                Ok(Ok(entry.value))
            }
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
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let result = query(
                "INSERT INTO approvals (session_id, key) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            )
            .bind(session_id)
            .bind(key)
            .execute(&self.pool)
            .await
            .map(drop)
            .map_err(Failure::from);
            self.finish(result, || {
                format!("remembering approval `{key}` in session `{session_id}`")
            })
        })
    }

    fn approvals(&self, session_id: &str) -> BoxFuture<'_, Result<BTreeSet<String>, StoreError>> {
        let session_id = session_id.to_owned();
        Box::pin(async move {
            let result = self
                .ids(
                    "SELECT key FROM approvals WHERE session_id = $1",
                    Some(&session_id),
                )
                .await
                .map(|keys| keys.into_iter().collect());
            self.finish(result, || {
                format!("reading approvals of session `{session_id}`")
            })
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
                    requests: request_index(record.request_ids()),
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

    fn renew_leases<'a>(
        &'a self,
        held: &'a [Lease],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        Box::pin(async move {
            let result = async {
                let ttl = ttl_ms(ttl);
                let mut renewed = Vec::new();
                // One statement per kind, each its own transaction: the rows are locked one at
                // a time and only for the update, and the holder's writes wait at most for it.
                for (kind, sql) in [
                    (
                        LeaseKind::Turn,
                        concat!(
                            "UPDATE turns AS t SET lease_expires = ",
                            now_ms!(),
                            " + $4 FROM unnest($1::text[], $2::bigint[]) AS h(id, token) \
                             WHERE t.id = h.id AND t.lease_token = h.token \
                             AND t.lease_owner = $3 AND t.status = 'running' \
                             RETURNING t.id, t.lease_token"
                        ),
                    ),
                    (
                        LeaseKind::Task,
                        concat!(
                            "UPDATE tasks AS t SET lease_expires = ",
                            now_ms!(),
                            " + $4 FROM unnest($1::text[], $2::bigint[]) AS h(id, token) \
                             WHERE t.id = h.id AND t.lease_token = h.token \
                             AND t.lease_owner = $3 AND t.status IN ('running', 'cancelling') \
                             RETURNING t.id, t.lease_token"
                        ),
                    ),
                ] {
                    // Leases of one owner per call in practice; group by owner to be exact.
                    let mut owners: Vec<&str> = held
                        .iter()
                        .filter(|l| l.kind == kind)
                        .map(|l| l.owner.as_str())
                        .collect();
                    owners.sort_unstable();
                    owners.dedup();
                    for owner in owners {
                        let (ids, tokens): (Vec<&str>, Vec<i64>) = held
                            .iter()
                            .filter(|l| l.kind == kind && l.owner == owner)
                            .map(|l| (l.id.as_str(), i64::try_from(l.token).unwrap_or(i64::MAX)))
                            .unzip();
                        let rows: Vec<(String, i64)> = query_as(sql)
                            .bind(&ids)
                            .bind(&tokens)
                            .bind(owner)
                            .bind(ttl)
                            .fetch_all(&self.pool)
                            .await?;
                        renewed.extend(rows.into_iter().map(|(id, token)| Lease {
                            kind,
                            id,
                            owner: owner.to_owned(),
                            token: u64::try_from(token).unwrap_or(0),
                        }));
                    }
                }
                Ok(renewed)
            }
            .await;
            self.finish(result, || format!("renewing {} leases", held.len()))
        })
    }

    fn expired_leases(&self) -> BoxFuture<'_, Result<Vec<(LeaseKind, String)>, StoreError>> {
        Box::pin(async move {
            let result = async {
                let mut found = Vec::new();
                // Plain reads through the partial indexes of running work: a take-over is made
                // exclusive by its own versioned write, not by this listing.
                for (kind, sql) in [
                    (
                        LeaseKind::Turn,
                        concat!(
                            "SELECT id FROM turns WHERE status = 'running' AND lease_expires < ",
                            now_ms!(),
                            " ORDER BY updated"
                        ),
                    ),
                    (
                        LeaseKind::Task,
                        concat!(
                            "SELECT id FROM tasks WHERE status IN ('running', 'cancelling') \
                             AND lease_expires < ",
                            now_ms!(),
                            " ORDER BY created"
                        ),
                    ),
                ] {
                    let ids = self.ids(sql, None).await?;
                    found.extend(ids.into_iter().map(|id| (kind, id)));
                }
                Ok(found)
            }
            .await;
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

    /// Returns at the first `NOTIFY` of a turn or task write (by any instance) after the last
    /// call returned, or after `timeout`. The first call starts a listener on a connection of
    /// its own (reconnecting when it drops, stopped when the store is dropped).
    fn changed(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(timeout, self.next_change()).await;
            // The caller reads the store next, and sees every write notified so far: those
            // need not wake the next call early.
            let seen = *self.changes.count.borrow();
            self.changes.reported.fetch_max(seen, Ordering::SeqCst);
        })
    }
}

/// What [`Store::changed`] waits on: the number of notifications the listener received.
///
/// A count rather than a bare wake-up, so that a notification arriving while no call waits (the
/// caller is busy reading the store) still ends the next call at once.
struct Changes {
    count: watch::Sender<u64>,
    /// The count when the last `changed` call returned.
    reported: AtomicU64,
    /// Set once the listener runs.
    listener: OnceCell<()>,
    /// Stops the listener when the store is dropped.
    stop: CancellationToken,
}

impl Changes {
    fn new() -> Self {
        Changes {
            count: watch::Sender::new(0),
            reported: AtomicU64::new(0),
            listener: OnceCell::new(),
            stop: CancellationToken::new(),
        }
    }

    /// Wakes every waiter; false once the store is gone.
    fn bump(changes: &Weak<Changes>) -> bool {
        match changes.upgrade() {
            Some(changes) => {
                changes.count.send_modify(|count| *count += 1);
                true
            }
            None => false,
        }
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Starts listening: `LISTEN` is in effect when this returns, so a write committed after it is
/// seen. The listener runs in a task that holds the store only weakly.
async fn listen(pool: &PgPool, place: &str, changes: &Arc<Changes>) -> Result<(), StoreError> {
    // A pool of one of its own, with the store pool's options: the listening connection lives as
    // long as the store and must not take a connection from its work.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with((*pool.connect_options()).clone());
    let fail = |error: SqlError| backend(place, "cannot listen for changes", &error);
    let mut listener = PgListener::connect_with(&own).await.map_err(fail)?;
    listener.listen(CHANNEL).await.map_err(fail)?;
    let stop = changes.stop.clone();
    let changes = Arc::downgrade(changes);
    let place = place.to_owned();
    tokio::spawn(async move {
        let mut listener = Some(listener);
        let mut pause = LISTEN_RETRY.0;
        loop {
            let Some(active) = listener.as_mut() else {
                let reconnected = tokio::select! {
                    () = stop.cancelled() => return,
                    reconnected = reconnect(&own) => reconnected,
                };
                match reconnected {
                    Ok(fresh) => {
                        listener = Some(fresh);
                        // Writes made while nobody listened were not announced.
                        if !Changes::bump(&changes) {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(
                            "postgres `{place}`: cannot listen for changes again (retrying in \
                             {pause:?}): {error}"
                        );
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(pause) => {}
                        }
                        pause = (pause * 2).min(LISTEN_RETRY.1);
                    }
                }
                continue;
            };
            let received = tokio::select! {
                () = stop.cancelled() => return,
                received = active.try_recv() => received,
            };
            match received {
                Ok(Some(_)) => pause = LISTEN_RETRY.0,
                // The connection dropped and sqlx opened a new one: notifications sent in
                // between are lost, so wake the waiters to read the store.
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!("postgres `{place}`: listening for changes failed: {error}");
                    listener = None;
                }
            }
            if !Changes::bump(&changes) {
                return;
            }
        }
    });
    Ok(())
}

async fn reconnect(pool: &PgPool) -> Result<PgListener, SqlError> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// The statements of a record table with leases (turns or tasks). Binds: `insert` takes
/// `$1 id, $2 session_id, $3 status, $4 json, $5 wake_at`; `update` those and `$6` the new
/// version, `$7` the expected one; `index` `$1` the request ids and `$2` the record id.
struct RecordSql {
    kind: LeaseKind,
    /// Locks the row and reads its lease and the database clock.
    lock: &'static str,
    insert: &'static str,
    update: &'static str,
    /// Gives the row a new token and lease: `$1 id, $2 owner, $3 ttl (ms)`.
    take: &'static str,
    index: &'static str,
}

const TURNS: RecordSql = RecordSql {
    kind: LeaseKind::Turn,
    lock: concat!(
        "SELECT lease_token, lease_expires, ",
        now_ms!(),
        " FROM turns WHERE id = $1 FOR UPDATE"
    ),
    // `updated` takes the next number of the store-wide write sequence at every write.
    insert: "INSERT INTO turns (id, session_id, status, version, json, updated, wake_at) \
             VALUES ($1, $2, $3, 1, $4, nextval('turns_updated'), $5) ON CONFLICT (id) DO NOTHING",
    update: "UPDATE turns SET session_id = $2, status = $3, version = $6, json = $4, \
             updated = nextval('turns_updated'), wake_at = $5 WHERE id = $1 AND version = $7",
    take: concat!(
        "UPDATE turns SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO requests (request_id, turn_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET turn_id = excluded.turn_id",
};

const TASKS: RecordSql = RecordSql {
    kind: LeaseKind::Task,
    lock: concat!(
        "SELECT lease_token, lease_expires, ",
        now_ms!(),
        " FROM tasks WHERE id = $1 FOR UPDATE"
    ),
    // A task keeps its session and its place in creation order: `update` leaves `$2` unused
    // (sqlx declares every parameter's type, so Postgres accepts that).
    insert: "INSERT INTO tasks (id, session_id, status, version, json, created, wake_at) \
             VALUES ($1, $2, $3, 1, $4, nextval('tasks_created'), $5) ON CONFLICT (id) DO NOTHING",
    update: "UPDATE tasks SET status = $3, version = $6, json = $4, wake_at = $5 \
             WHERE id = $1 AND version = $7",
    take: concat!(
        "UPDATE tasks SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO task_requests (request_id, task_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET task_id = excluded.task_id",
};

fn table_sql(kind: LeaseKind, turns: &'static str, tasks: &'static str) -> &'static str {
    match kind {
        LeaseKind::Turn => turns,
        LeaseKind::Task => tasks,
    }
}

/// The columns of a record write.
struct RecordRow<'a> {
    id: &'a str,
    session_id: &'a str,
    status: &'static str,
    json: String,
    wake_at: Option<i64>,
    requests: Vec<String>,
}

/// Refuses a write whose claim does not hold: a stale [`Claim::Keep`] is fenced, a
/// [`Claim::TakeOver`] of a live lease is a conflict. The row stays locked until the write's
/// transaction ends, so the check still holds when the write lands.
async fn check_claim(
    tx: &mut PgTransaction<'_>,
    sql: &RecordSql,
    id: &str,
    claim: Claim<'_>,
) -> Result<(), Failure> {
    if matches!(claim, Claim::None | Claim::Take { .. }) {
        return Ok(());
    }
    let row: Option<(i64, i64, i64)> = query_as(sql.lock)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    match claim {
        Claim::Keep(lease) => check_token(lease, row.map(|(token, _, _)| token)),
        Claim::TakeOver { .. } => match row {
            Some((_, expires, now)) if expires >= now => {
                Err(Failure::Store(StoreError::Conflict(id.to_owned())))
            }
            _ => Ok(()),
        },
        Claim::None | Claim::Take { .. } => Ok(()),
    }
}

/// [`super::rows::check_token`] inside a Postgres operation.
fn check_token(lease: &Lease, token: Option<i64>) -> Result<(), Failure> {
    Ok(stale(lease, token)?)
}

/// Gives the record a new fencing token and lease for a taking claim; `None` for the others.
async fn take_lease(
    tx: &mut PgTransaction<'_>,
    sql: &RecordSql,
    id: &str,
    claim: Claim<'_>,
) -> Result<Option<Lease>, Failure> {
    let (Claim::Take { owner, ttl } | Claim::TakeOver { owner, ttl }) = claim else {
        return Ok(None);
    };
    let token: i64 = query_scalar(sql.take)
        .bind(id)
        .bind(owner)
        .bind(ttl_ms(ttl))
        .fetch_one(&mut **tx)
        .await?;
    Ok(Some(Lease {
        kind: sql.kind,
        id: id.to_owned(),
        owner: owner.to_owned(),
        token: u64::try_from(token).unwrap_or(0),
    }))
}

/// The request ids to index, sorted and without repeats: one upsert cannot touch a row twice,
/// and a fixed order keeps two writers indexing the same ids from deadlocking.
fn request_index(ids: Vec<&str>) -> Vec<String> {
    let ids: BTreeSet<&str> = ids.into_iter().collect();
    ids.into_iter().map(str::to_owned).collect()
}

fn payload(kind: LeaseKind, id: &str) -> String {
    let mut end = id.len().min(PAYLOAD_ID_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{kind}:{}", &id[..end])
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).map_or(MAX_TTL_MS, |ms| ms.min(MAX_TTL_MS))
}

/// Why an operation failed before [`PostgresStore::finish`] describes it.
enum Failure {
    /// The database failed; `finish` adds the database and the operation.
    Sql(SqlError),
    /// Already a complete answer (a conflict, a fenced write, an undecodable record).
    Store(StoreError),
}

impl From<SqlError> for Failure {
    fn from(error: SqlError) -> Self {
        Failure::Sql(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

/// `user@host:port/database`, or the socket path for a Unix socket: what errors name.
fn describe(options: &PgConnectOptions) -> String {
    let user = options.get_username();
    let database = options.get_database().unwrap_or(user);
    match options.get_socket() {
        Some(socket) => format!("{user}@{}/{database}", socket.display()),
        None => format!(
            "{user}@{}:{}/{database}",
            options.get_host(),
            options.get_port()
        ),
    }
}

/// The error of a failed first connection. The pool retries a refused connection until its
/// acquire timeout (the server may be starting) and then reports only the timeout: one direct
/// attempt tells why.
async fn cannot_connect(options: &PgConnectOptions, place: &str, error: SqlError) -> StoreError {
    let error = match error {
        SqlError::PoolTimedOut => {
            match tokio::time::timeout(Duration::from_secs(10), options.connect()).await {
                Ok(Err(cause)) => cause,
                Ok(Ok(conn)) => {
                    let _ = conn.close().await;
                    error
                }
                Err(_) => error,
            }
        }
        error => error,
    };
    backend(place, "cannot connect", &error)
}

fn backend(place: &str, doing: &str, error: &SqlError) -> StoreError {
    StoreError::Backend(format!(
        "postgres `{place}`: {doing}: {error}{}",
        hint(error)
    ))
}

/// What to do about the errors a deployment meets first.
fn hint(error: &SqlError) -> &'static str {
    match error {
        SqlError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            " (is PostgreSQL running and listening at that address? For tests, \
             `scripts/postgres start` starts a throwaway server)"
        }
        SqlError::Io(_) => " (check that the server is reachable from this machine)",
        SqlError::PoolTimedOut => {
            " (no connection became free in time: the server is unreachable, or the pool is too \
             small for the load; `PostgresStore::from_pool` takes a pool of your size)"
        }
        SqlError::Tls(_) => {
            " (this build has no TLS: connect through a private network or a tunnel, with \
             `sslmode=disable` or `prefer`)"
        }
        SqlError::Database(database) => match database.code().as_deref() {
            Some("28P01" | "28000") => {
                " (check the user and password in the URL, and the server's pg_hba.conf)"
            }
            Some("3D000") => " (create the database, e.g. `createdb NAME`, or name another)",
            Some("42501") => {
                " (the user lacks a privilege: let it create tables in the schema, or connect as \
                 the database's owner)"
            }
            Some("42P07") => {
                " (the database holds tables named like toolwright's that toolwright did not \
                 create: give toolwright a database of its own, or a schema of its own with \
                 `?options=-csearch_path%3Dtoolwright` in the URL)"
            }
            Some("53300") => {
                " (the server has no connection left: raise its max_connections or use smaller \
                 pools)"
            }
            _ => "",
        },
        _ => "",
    }
}

fn migrator() -> Migrator {
    let mut migrator = Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    );
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
}

/// Brings the schema to the newest version this build knows. Idempotent; sqlx holds an
/// advisory lock on the database while it checks and applies, so instances starting together
/// migrate one after the other. A database with a version this build does not know is refused
/// before anything is written.
async fn migrate(pool: &PgPool, place: &str) -> Result<(), StoreError> {
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(error) => return Err(cannot_connect(&pool.connect_options(), place, error).await),
    };
    // `run_direct` rather than `run(&mut *conn)`: with `run`, the future of `connect` is not
    // `Send` ("implementation of `Acquire` is not general enough"), so it could not be spawned;
    // sqlx exposes `run_direct` for exactly this (hidden, hence the exact version pin).
    match migrator().run_direct(None, &mut *conn, false).await {
        Ok(()) => Ok(()),
        Err(error) => {
            // sqlx releases its advisory lock only when the run succeeds: a connection
            // returned to the pool would keep holding it and block every later migration.
            // Closing the connection releases it.
            let _ = conn.close().await;
            Err(migration_error(place, error))
        }
    }
}

fn migration_error(place: &str, error: MigrateError) -> StoreError {
    let known = MIGRATIONS.last().map_or(0, |&(version, _, _)| version);
    let message = match error {
        MigrateError::VersionMissing(version) if version > known => format!(
            "has schema version {version}, but this build of toolwright knows versions up to \
             {known}: a newer toolwright migrated it; run the newer toolwright, or restore a \
             backup of the database made before the upgrade"
        ),
        MigrateError::VersionMissing(version) => format!(
            "records migration {version} in `{MIGRATIONS_TABLE}`, which no toolwright made: \
             give toolwright a database of its own"
        ),
        MigrateError::VersionMismatch(version) => format!(
            "was migrated to version {version} by a toolwright whose schema script differs from \
             this build's: run the toolwright that migrated it"
        ),
        MigrateError::Dirty(version) => format!(
            "has migration {version} partly applied (see `{MIGRATIONS_TABLE}`): repair it by \
             hand or restore a backup"
        ),
        MigrateError::Execute(error) | MigrateError::ExecuteMigration(error, _) => {
            return backend(place, "cannot migrate the schema", &error);
        }
        other => format!("cannot be migrated: {other}"),
    };
    StoreError::Backend(format!("postgres `{place}` {message}"))
}

/// Steps whose writes go to the Postgres store's own database and commit with their journal
/// record: exactly once in effect, not only on record. Implemented for [`DurableContext`] and
/// [`WorkflowContext`]; the runtime's store must be a [`PostgresStore`] (another store fails
/// the step with an error saying so).
///
/// `work` gets the connection inside the transaction. Its captured data must be owned (clone
/// what it needs into the closure). Queries use sqlx 0.9 (re-exported as
/// [`crate::store::postgres_sql`], since the `sqlx` facade crate cannot share a build with the
/// SQLite store's bundled SQLite):
///
/// ```no_run
/// use toolwright_core::{DurableContext, ToolError};
/// use toolwright_runtime::PgStep;
/// use toolwright_runtime::store::postgres_sql::{query, query_scalar};
///
/// async fn charge(ctx: &DurableContext, order: String, cents: i64) -> Result<i64, ToolError> {
///     ctx.pg_step("insert-charge", move |db| {
///         Box::pin(async move {
///             let id: i64 = query_scalar(
///                 "INSERT INTO charges (order_id, cents) VALUES ($1, $2) RETURNING id",
///             )
///             .bind(order)
///             .bind(cents)
///             .fetch_one(&mut *db)
///             .await
///             .map_err(|e| ToolError::new(format!("charging failed: {e}")))?;
///             Ok(id)
///         })
///     })
///     .await
/// }
/// ```
pub trait PgStep {
    /// Runs `work` as the journaled step `name` in the store's transaction (see the trait
    /// docs); a recorded step returns its value without running.
    fn pg_step<'a, T, F>(&'a self, name: &'a str, work: F) -> BoxFuture<'a, Result<T, ToolError>>
    where
        T: serde::Serialize + DeserializeOwned + Send + 'static,
        F: for<'c> FnOnce(
                &'c mut sqlx_postgres::PgConnection,
            ) -> BoxFuture<'c, Result<T, ToolError>>
            + Send
            + 'static;
}

fn pg_work<T, F>(name: &str, work: F) -> toolwright_core::StoreWork
where
    T: serde::Serialize + Send + 'static,
    F: for<'c> FnOnce(&'c mut sqlx_postgres::PgConnection) -> BoxFuture<'c, Result<T, ToolError>>
        + Send
        + 'static,
{
    let name = name.to_owned();
    Box::new(move |connection: &mut (dyn std::any::Any + Send)| {
        Box::pin(async move {
            let Some(connection) = connection.downcast_mut::<sqlx_postgres::PgConnection>() else {
                return Err(ToolError::with_code(
                    ErrorCode::Journal,
                    format!(
                        "step `{name}` needs the Postgres store, and the runtime runs on another store"
                    ),
                ));
            };
            let value = work(connection).await?;
            serde_json::to_value(value).map_err(|error| {
                ToolError::with_code(
                    ErrorCode::Journal,
                    format!("step `{name}` returned a value that is not JSON: {error}"),
                )
            })
        })
    })
}

impl PgStep for DurableContext {
    fn pg_step<'a, T, F>(&'a self, name: &'a str, work: F) -> BoxFuture<'a, Result<T, ToolError>>
    where
        T: serde::Serialize + DeserializeOwned + Send + 'static,
        F: for<'c> FnOnce(
                &'c mut sqlx_postgres::PgConnection,
            ) -> BoxFuture<'c, Result<T, ToolError>>
            + Send
            + 'static,
    {
        Box::pin(self.step_in_store(name, pg_work(name, work)))
    }
}

impl PgStep for WorkflowContext {
    fn pg_step<'a, T, F>(&'a self, name: &'a str, work: F) -> BoxFuture<'a, Result<T, ToolError>>
    where
        T: serde::Serialize + DeserializeOwned + Send + 'static,
        F: for<'c> FnOnce(
                &'c mut sqlx_postgres::PgConnection,
            ) -> BoxFuture<'c, Result<T, ToolError>>
            + Send
            + 'static,
    {
        Box::pin(self.step_in_store(name, pg_work(name, work)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_is_cut_in_the_payload_at_a_char_boundary() {
        let id = "é".repeat(PAYLOAD_ID_BYTES);
        let payload = payload(LeaseKind::Task, &id);
        assert!(payload.starts_with("task:é"), "{payload}");
        assert!(payload.len() <= "task:".len() + PAYLOAD_ID_BYTES);
    }

    #[test]
    fn a_huge_time_to_live_saturates() {
        assert_eq!(ttl_ms(Duration::MAX), MAX_TTL_MS);
        assert_eq!(ttl_ms(Duration::from_secs(2)), 2000);
    }

    #[test]
    fn errors_name_the_server_but_not_the_password() {
        let options =
            PgConnectOptions::from_str("postgres://app:hunter2@db.internal:6543/tw").unwrap();
        let place = describe(&options);
        assert_eq!(place, "app@db.internal:6543/tw");
        let message = backend(&place, "cannot connect", &SqlError::PoolTimedOut).to_string();
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn the_request_index_is_sorted_without_repeats() {
        assert_eq!(request_index(vec!["b", "a", "b"]), ["a", "b"]);
    }
}
