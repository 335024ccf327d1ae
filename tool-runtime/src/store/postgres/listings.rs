//! The listings a console pages through ([`crate::Store::list_sessions`], `list_turns`,
//! `list_tasks`, and a turn's steps, `turn_steps`, oldest first by the primary key of
//! `turn_steps`): one statement per page, reading an index newest first from below the
//! cursor's position (migration 7's indexes, and the partial index of open tasks), so a page
//! costs the same however deep the listing goes.

use sqlx_core::query_as::query_as;

use super::{Failure, PostgresStore};
use crate::record::ClosedStep;
use crate::record::TurnStatus;
use crate::store::page::sql::{sequence, session_position, step_position};
use crate::store::rows::{
    SessionRow, StepRow, TaskRow, TurnRow, session_page, status_name, step_page, task_page,
    turn_page,
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

/// The first page of sessions: `$1` the number of rows.
const SESSIONS_FIRST: &str =
    "SELECT id, version, updated_ms FROM sessions ORDER BY updated_ms DESC, id DESC LIMIT $1";
/// A page of sessions after the cursor's (`$1` its `updated_ms`, `$2` its id): `$3` rows.
const SESSIONS_AFTER: &str = "SELECT id, version, updated_ms FROM sessions \
    WHERE (updated_ms, id) < ($1, $2) ORDER BY updated_ms DESC, id DESC LIMIT $3";

/// A page of a turn's steps: `$1` the turn, `$2` the index the page starts after, `$3` rows.
const STEPS: &str = "SELECT step, json FROM turn_steps WHERE turn_id = $1 AND step > $2 \
    ORDER BY step LIMIT $3";

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
                query_as(SESSIONS_FIRST)
                    .bind(fetched(limit))
                    .fetch_all(&self.pool)
                    .await?
            }
            Some(cursor) => {
                let (ms, id) = session_position(cursor)?;
                query_as(SESSIONS_AFTER)
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

    /// One page of turn `turn_id`'s closed steps, by index, oldest first (the primary key of
    /// `turn_steps`, read in order from after the cursor's index).
    pub(super) async fn step_listing(
        &self,
        turn_id: &str,
        page: &PageRequest,
    ) -> Result<Page<ClosedStep>, Failure> {
        let limit = page.checked_limit()?;
        let rows: Vec<StepRow> = query_as(STEPS)
            .bind(turn_id)
            .bind(step_position(page.after.as_ref())?)
            .bind(fetched(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(step_page(turn_id, rows, limit)?)
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

#[cfg(test)]
mod tests {
    use sqlx_core::query_scalar::query_scalar;
    use sqlx_core::sql_str::AssertSqlSafe;

    use super::*;

    /// Every listing's statement can be served by its index, read in order: with sequential
    /// scans and sorts priced out (the tables are empty, so the planner would rather scan),
    /// the plan names the index and sorts nothing.
    #[tokio::test]
    async fn every_listing_reads_an_index_in_order_from_the_cursor() {
        let Some(scratch) = super::super::scratch::Scratch::new(
            "tw_listings",
            1,
            &[("enable_seqscan", "off"), ("enable_sort", "off")],
        )
        .await
        else {
            return;
        };
        let pool = scratch.pool.clone();
        super::super::migrate::migrate(&pool, "test").await.unwrap();
        let explain = |sql: &'static str, texts: Vec<&'static str>| {
            let pool = pool.clone();
            async move {
                let mut statement =
                    query_scalar::<_, String>(AssertSqlSafe(format!("EXPLAIN {sql}")))
                        .bind(10_i64)
                        .bind(101_i64);
                for text in texts {
                    statement = statement.bind(text);
                }
                statement.fetch_all(&pool).await.unwrap().join("\n")
            }
        };
        let mut cases: Vec<(&'static str, Vec<&'static str>, &str)> = Vec::new();
        for (filter, index) in [
            (TurnFilter::default(), "turns_by_update"),
            (
                TurnFilter::default().status(TurnStatus::Waiting),
                "turns_waiting",
            ),
            (
                TurnFilter::default().status(TurnStatus::Running),
                "turns_running",
            ),
            (
                TurnFilter::default().status(TurnStatus::Active),
                "turns_by_status",
            ),
            (
                TurnFilter::default().status(TurnStatus::Completed),
                "turns_by_status",
            ),
            (
                TurnFilter::default().status(TurnStatus::Cancelled),
                "turns_by_status",
            ),
            (
                TurnFilter::default().session("s1"),
                "turns_by_session_update",
            ),
        ] {
            let bound = if filter.session_id.is_some() {
                vec!["s1"]
            } else {
                vec![]
            };
            cases.push((turns_sql(&filter), bound, index));
        }
        for (filter, index) in [
            (TaskFilter::default(), "tasks_by_creation"),
            (TaskFilter::default().open(), "tasks_open"),
            (TaskFilter::default().session("s1"), "tasks_by_session"),
            (
                TaskFilter::default().session("s1").open(),
                "tasks_by_session",
            ),
        ] {
            let bound = if filter.session_id.is_some() {
                vec!["s1"]
            } else {
                vec![]
            };
            cases.push((tasks_sql(&filter), bound, index));
        }
        for (sql, bound, index) in cases {
            let plan = explain(sql, bound).await;
            assert!(plan.contains(index), "not read from `{index}`: {plan}");
            assert!(
                !plan.contains("Sort"),
                "sorts instead of reading in order: {plan}"
            );
        }
        let both = turns_sql(
            &TurnFilter::default()
                .session("s1")
                .status(TurnStatus::Waiting),
        );
        let plan = explain(both, vec!["s1", "waiting"]).await;
        assert!(plan.contains("Index") && !plan.contains("Sort"), "{plan}");
        let plan = query_scalar::<_, String>(AssertSqlSafe(format!("EXPLAIN {SESSIONS_AFTER}")))
            .bind(10_i64)
            .bind("s1")
            .bind(101_i64)
            .fetch_all(&pool)
            .await
            .unwrap()
            .join("\n");
        assert!(
            plan.contains("sessions_by_update") && !plan.contains("Sort"),
            "{plan}"
        );
        let plan = query_scalar::<_, String>(AssertSqlSafe(format!("EXPLAIN {STEPS}")))
            .bind("t1")
            .bind(10_i64)
            .bind(101_i64)
            .fetch_all(&pool)
            .await
            .unwrap()
            .join("\n");
        assert!(
            plan.contains("turn_steps_pkey") && !plan.contains("Sort"),
            "{plan}"
        );
        scratch.drop().await;
    }
}
