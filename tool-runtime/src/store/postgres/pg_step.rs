//! [`PgStep`]: journaled steps whose writes commit with their journal record, in one
//! transaction of the Postgres store's database.

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use sqlx_core::query::query;
use sqlx_core::query_scalar::query_scalar;
use toolwright_core::{DurableContext, ErrorCode, ToolError, WorkflowContext};

use super::claims::check_fence;
use super::{Failure, PostgresStore};
use crate::record::{EntryKind, JournalEntry};
use crate::store::{Lease, StoreError};

impl PostgresStore {
    /// [`Store::journal_in_transaction`](crate::store::Store::journal_in_transaction): runs the
    /// work of a [`PgStep`] and records its value, in one transaction.
    pub(super) async fn step_in_transaction(
        &self,
        run_id: &str,
        position: u32,
        name: &str,
        fence: Option<&Lease>,
        work: toolwright_core::StoreWork,
    ) -> Result<Result<serde_json::Value, ToolError>, Failure> {
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
            kind: EntryKind::Step,
            name: name.to_owned(),
            value,
        };
        if let Some(lease) = fence {
            // Checked after the work, so that the row is locked only for the commit (a long step
            // must not hold off the holder's renewals); a take-over waits for it.
            check_fence(&mut tx, lease).await?;
        }
        let json = serde_json::to_string(&entry)
            .map_err(|error| StoreError::Backend(format!("journal entry is not JSON: {error}")))?;
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
