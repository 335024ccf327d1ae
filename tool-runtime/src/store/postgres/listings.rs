//! The listings a console pages through ([`crate::Store::list_sessions`], `list_turns`,
//! `list_tasks`): one statement per page, reading an index newest first from below the
//! cursor's position (migration 7's indexes, and the partial index of open tasks), so a page
//! costs the same however deep the listing goes.

use sqlx_core::query_as::query_as;

use super::{Failure, PostgresStore};
use crate::record::TurnStatus;
use crate::store::page::sql::{sequence, session_position};
use crate::store::rows::{
    SessionRow, TaskRow, TurnRow, session_page, status_name, task_page, turn_page,
};
use crate::store::{
    Page, PageRequest, SessionSummary, TaskFilter, TaskSummary, TurnFilter, TurnSummary,
};

/// A turn listing in one status, without a session: `$1` the cursor's position, `$2` the number
/// of rows. Waiting and running turns are read from their partial indexes (`turns_waiting`,
/// `turns_running`), the others from `turns_by_status`, whose condition the statement repeats;
/// the status is literal, as a partial index serves only statements that imply its condition.
macro_rules! in_status {
    ($status:literal) => {
        concat!(
            "SELECT id, session_id, status, version, updated FROM turns WHERE status = '",
            $status,
            "' AND updated < $1 ORDER BY updated DESC LIMIT $2"
        )
    };
    ($status:literal, by_status) => {
        concat!(
            "SELECT id, session_id, status, version, updated FROM turns WHERE status = '",
            $status,
            "' AND status NOT IN ('waiting', 'running') AND updated < $1 \
             ORDER BY updated DESC LIMIT $2"
        )
    };
}

/// The statement of a turn listing narrowed by `filter`: `$1` the cursor's position, `$2` the
/// number of rows, then, with a session, `$3` the session and `$4` the status if the filter
/// has one. Each is read from an index in `updated` order: `turns_by_update`, the status's
/// (see [`in_status`]), `turns_by_session_update`.
fn turns_sql(filter: &TurnFilter) -> &'static str {
    match (&filter.session_id, filter.status) {
        (None, None) => {
            "SELECT id, session_id, status, version, updated FROM turns WHERE updated < $1 \
             ORDER BY updated DESC LIMIT $2"
        }
        (None, Some(TurnStatus::Waiting)) => in_status!("waiting"),
        (None, Some(TurnStatus::Running)) => in_status!("running"),
        (None, Some(TurnStatus::Active)) => in_status!("active", by_status),
        (None, Some(TurnStatus::Completed)) => in_status!("completed", by_status),
        (None, Some(TurnStatus::Cancelled)) => in_status!("cancelled", by_status),
        (Some(_), None) => {
            "SELECT id, session_id, status, version, updated FROM turns \
             WHERE session_id = $3 AND updated < $1 ORDER BY updated DESC LIMIT $2"
        }
        (Some(_), Some(_)) => {
            "SELECT id, session_id, status, version, updated FROM turns \
             WHERE session_id = $3 AND status = $4 AND updated < $1 \
             ORDER BY updated DESC LIMIT $2"
        }
    }
}

/// The statement of a task listing narrowed by `filter` (binds as [`turns_sql`]'s, the
/// session third): read in `created` order from `tasks_by_creation`, `tasks_open` (whose
/// literal statuses the statement repeats) or `tasks_by_session`.
fn tasks_sql(filter: &TaskFilter) -> &'static str {
    match (&filter.session_id, filter.open) {
        (None, false) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE created < $1 ORDER BY created DESC LIMIT $2"
        }
        (None, true) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE status NOT IN ('finished', 'cancelled') AND created < $1 \
             ORDER BY created DESC LIMIT $2"
        }
        (Some(_), false) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE session_id = $3 AND created < $1 ORDER BY created DESC LIMIT $2"
        }
        (Some(_), true) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE session_id = $3 AND status NOT IN ('finished', 'cancelled') \
             AND created < $1 ORDER BY created DESC LIMIT $2"
        }
    }
}

/// Where a page starts: below the cursor's write position, or below every one.
fn below(listing: &str, page: &PageRequest) -> Result<i64, Failure> {
    Ok(match &page.after {
        None => i64::MAX,
        Some(cursor) => sequence(listing, cursor)?,
    })
}

/// How many rows a page of `limit` reads: one more, which tells whether a next page exists.
fn fetched(limit: usize) -> i64 {
    i64::try_from(limit).map_or(i64::MAX, |limit| limit + 1)
}

impl PostgresStore {
    /// One page of sessions, by `updated_ms` then id, highest first (`sessions_by_update`).
    pub(super) async fn session_listing(
        &self,
        page: &PageRequest,
    ) -> Result<Page<SessionSummary>, Failure> {
        let limit = page.checked_limit()?;
        let rows: Vec<SessionRow> = match &page.after {
            None => {
                query_as(
                    "SELECT id, version, updated_ms FROM sessions \
                     ORDER BY updated_ms DESC, id DESC LIMIT $1",
                )
                .bind(fetched(limit))
                .fetch_all(&self.pool)
                .await?
            }
            Some(cursor) => {
                let (ms, id) = session_position(cursor)?;
                query_as(
                    "SELECT id, version, updated_ms FROM sessions \
                     WHERE (updated_ms, id) < ($1, $2) \
                     ORDER BY updated_ms DESC, id DESC LIMIT $3",
                )
                .bind(ms)
                .bind(id)
                .bind(fetched(limit))
                .fetch_all(&self.pool)
                .await?
            }
        };
        Ok(session_page(rows, limit)?)
    }

    /// One page of the turns `filter` selects, by write position, highest first.
    pub(super) async fn turn_listing(
        &self,
        filter: &TurnFilter,
        page: &PageRequest,
    ) -> Result<Page<TurnSummary>, Failure> {
        let limit = page.checked_limit()?;
        let mut statement = query_as(turns_sql(filter))
            .bind(below("turns", page)?)
            .bind(fetched(limit));
        if let Some(session) = &filter.session_id {
            statement = statement.bind(session);
            if let Some(status) = filter.status {
                statement = statement.bind(status_name(status));
            }
        }
        let rows: Vec<TurnRow> = statement.fetch_all(&self.pool).await?;
        Ok(turn_page(rows, limit)?)
    }

    /// One page of the tasks `filter` selects, by creation, newest first.
    pub(super) async fn task_listing(
        &self,
        filter: &TaskFilter,
        page: &PageRequest,
    ) -> Result<Page<TaskSummary>, Failure> {
        let limit = page.checked_limit()?;
        let mut statement = query_as(tasks_sql(filter))
            .bind(below("tasks", page)?)
            .bind(fetched(limit));
        if let Some(session) = &filter.session_id {
            statement = statement.bind(session);
        }
        let rows: Vec<TaskRow> = statement.fetch_all(&self.pool).await?;
        Ok(task_page(rows, limit)?)
    }
}
