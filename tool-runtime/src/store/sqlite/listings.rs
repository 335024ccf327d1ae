//! The listings a console pages through ([`crate::Store::list_sessions`], `list_turns`,
//! `list_tasks`): one statement per page, reading an index newest first from below the
//! cursor's position (schema version 9's indexes, and the partial index of open tasks), so a
//! page costs the same however deep the listing goes.

use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

use super::Failure;
use crate::record::TurnStatus;
use crate::store::page::sql::{sequence, session_position};
use crate::store::rows::{
    SessionRow, TaskRow, TurnRow, session_page, status_name, task_page, turn_page,
};
use crate::store::{
    Page, PageRequest, SessionSummary, TaskFilter, TaskSummary, TurnFilter, TurnSummary,
};

/// The first page of sessions: `?1` the number of rows.
const SESSIONS_FIRST: &str =
    "SELECT id, version, updated_ms FROM sessions ORDER BY updated_ms DESC, id DESC LIMIT ?1";
/// A page of sessions after the cursor's (`?1` its `updated_ms`, `?2` its id): `?3` rows.
const SESSIONS_AFTER: &str = "SELECT id, version, updated_ms FROM sessions \
    WHERE (updated_ms, id) < (?1, ?2) ORDER BY updated_ms DESC, id DESC LIMIT ?3";

/// One page of sessions, by `updated_ms` then id, highest first (`sessions_by_update`).
pub(super) fn sessions(
    conn: &mut Connection,
    page: &PageRequest,
) -> Result<Page<SessionSummary>, Failure> {
    let limit = page.checked_limit()?;
    let fetch = fetched(limit);
    let read = |row: &rusqlite::Row<'_>| -> rusqlite::Result<SessionRow> {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    };
    let rows = match &page.after {
        None => conn
            .prepare_cached(SESSIONS_FIRST)?
            .query_map([fetch], read)?
            .collect::<Result<Vec<_>, _>>()?,
        Some(cursor) => {
            let (ms, id) = session_position(cursor)?;
            conn.prepare_cached(SESSIONS_AFTER)?
                .query_map(rusqlite::params![ms, id, fetch], read)?
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    Ok(session_page(rows, limit)?)
}

/// A turn listing in one status, without a session: `?1` the cursor's position, `?2` the number
/// of rows. Waiting and running turns are read from their partial indexes (`turns_waiting`,
/// `turns_running`), the others from `turns_by_status`, whose condition the statement repeats
/// (SQLite uses a partial index only for a statement that states its condition).
macro_rules! in_status {
    ($status:literal) => {
        concat!(
            "SELECT id, session_id, status, version, updated FROM turns WHERE status = '",
            $status,
            "' AND updated < ?1 ORDER BY updated DESC LIMIT ?2"
        )
    };
    ($status:literal, by_status) => {
        concat!(
            "SELECT id, session_id, status, version, updated FROM turns WHERE status = '",
            $status,
            "' AND status NOT IN ('waiting', 'running') AND updated < ?1 \
             ORDER BY updated DESC LIMIT ?2"
        )
    };
}

/// The statement of a turn listing narrowed by `filter`: `?1` the cursor's position, `?2` the
/// number of rows, then, with a session, `?3` the session and `?4` the status if the filter
/// has one. Each is read from an index in `updated` order: `turns_by_update`, the status's
/// (see [`in_status`]), `turns_by_session_update`.
pub(super) fn turns_sql(filter: &TurnFilter) -> &'static str {
    match (&filter.session_id, filter.status) {
        (None, None) => {
            "SELECT id, session_id, status, version, updated FROM turns WHERE updated < ?1 \
             ORDER BY updated DESC LIMIT ?2"
        }
        (None, Some(TurnStatus::Waiting)) => in_status!("waiting"),
        (None, Some(TurnStatus::Running)) => in_status!("running"),
        (None, Some(TurnStatus::Active)) => in_status!("active", by_status),
        (None, Some(TurnStatus::Completed)) => in_status!("completed", by_status),
        (None, Some(TurnStatus::Cancelled)) => in_status!("cancelled", by_status),
        (Some(_), None) => {
            "SELECT id, session_id, status, version, updated FROM turns \
             WHERE session_id = ?3 AND updated < ?1 ORDER BY updated DESC LIMIT ?2"
        }
        (Some(_), Some(_)) => {
            "SELECT id, session_id, status, version, updated FROM turns INDEXED BY \
             turns_by_session_update WHERE session_id = ?3 AND status = ?4 AND updated < ?1 \
             ORDER BY updated DESC LIMIT ?2"
        }
    }
}

/// One page of the turns `filter` selects, by write position, highest first.
pub(super) fn turns(
    conn: &mut Connection,
    filter: &TurnFilter,
    page: &PageRequest,
) -> Result<Page<TurnSummary>, Failure> {
    let limit = page.checked_limit()?;
    let below = match &page.after {
        None => i64::MAX,
        Some(cursor) => sequence("turns", cursor)?,
    };
    let mut bound = vec![Value::Integer(below), Value::Integer(fetched(limit))];
    if let Some(session) = &filter.session_id {
        bound.push(Value::Text(session.clone()));
        bound.extend(
            filter
                .status
                .map(|status| Value::Text(status_name(status).to_owned())),
        );
    }
    let rows = conn
        .prepare_cached(turns_sql(filter))?
        .query_map(
            params_from_iter(bound),
            |row| -> rusqlite::Result<TurnRow> {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(turn_page(rows, limit)?)
}

/// The statement of a task listing narrowed by `filter` (binds as [`turns_sql`]'s, the
/// session third): read in `created` order from `tasks_by_creation`, `tasks_open` (whose
/// literal statuses the statement repeats) or `tasks_by_session`.
pub(super) fn tasks_sql(filter: &TaskFilter) -> &'static str {
    match (&filter.session_id, filter.open) {
        (None, false) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE created < ?1 ORDER BY created DESC LIMIT ?2"
        }
        (None, true) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE status NOT IN ('finished', 'cancelled') AND created < ?1 \
             ORDER BY created DESC LIMIT ?2"
        }
        (Some(_), false) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE session_id = ?3 AND created < ?1 ORDER BY created DESC LIMIT ?2"
        }
        (Some(_), true) => {
            "SELECT id, session_id, status, version, wake_at, created FROM tasks \
             WHERE session_id = ?3 AND status NOT IN ('finished', 'cancelled') \
             AND created < ?1 ORDER BY created DESC LIMIT ?2"
        }
    }
}

/// One page of the tasks `filter` selects, by creation, newest first.
pub(super) fn tasks(
    conn: &mut Connection,
    filter: &TaskFilter,
    page: &PageRequest,
) -> Result<Page<TaskSummary>, Failure> {
    let limit = page.checked_limit()?;
    let below = match &page.after {
        None => i64::MAX,
        Some(cursor) => sequence("tasks", cursor)?,
    };
    let mut bound = vec![Value::Integer(below), Value::Integer(fetched(limit))];
    bound.extend(filter.session_id.clone().map(Value::Text));
    let rows = conn
        .prepare_cached(tasks_sql(filter))?
        .query_map(
            params_from_iter(bound),
            |row| -> rusqlite::Result<TaskRow> {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(task_page(rows, limit)?)
}

/// How many rows a page of `limit` reads: one more, which tells whether a next page exists.
fn fetched(limit: usize) -> i64 {
    i64::try_from(limit).map_or(i64::MAX, |limit| limit + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    /// The plan of `sql` with `bound` values.
    fn plan(store: &SqliteStore, sql: &str, bound: Vec<Value>) -> Vec<String> {
        let conn = store.conn.lock().unwrap();
        conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map(params_from_iter(bound), |row| row.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[track_caller]
    fn read_in_order_from(plan: &[String], index: &str) {
        assert!(
            plan.iter().any(|step| step.contains(index)),
            "not read from `{index}`: {plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "sorts instead of reading the index in order: {plan:?}"
        );
    }

    #[test]
    fn every_listing_reads_an_index_in_order_from_the_cursor() {
        let store = SqliteStore::in_memory().unwrap();
        let (below, rows) = (Value::Integer(10), Value::Integer(101));
        let session = || Value::Text("s1".to_owned());
        let waiting = || Value::Text("waiting".to_owned());
        for (filter, index, bound) in [
            (TurnFilter::default(), "turns_by_update", vec![]),
            (
                TurnFilter::default().status(TurnStatus::Waiting),
                "turns_waiting",
                vec![],
            ),
            (
                TurnFilter::default().status(TurnStatus::Running),
                "turns_running",
                vec![],
            ),
            (
                TurnFilter::default().status(TurnStatus::Active),
                "turns_by_status",
                vec![],
            ),
            (
                TurnFilter::default().status(TurnStatus::Completed),
                "turns_by_status",
                vec![],
            ),
            (
                TurnFilter::default().status(TurnStatus::Cancelled),
                "turns_by_status",
                vec![],
            ),
            (
                TurnFilter::default().session("s1"),
                "turns_by_session_update",
                vec![session()],
            ),
            (
                TurnFilter::default()
                    .session("s1")
                    .status(TurnStatus::Waiting),
                "turns_by_session_update",
                vec![session(), waiting()],
            ),
        ] {
            let mut all = vec![below.clone(), rows.clone()];
            all.extend(bound);
            let plan = plan(&store, turns_sql(&filter), all);
            read_in_order_from(&plan, index);
            assert!(
                plan.iter().any(|step| step.contains("updated<?")),
                "the cursor bounds the index range: {plan:?}"
            );
        }
        for (filter, index, bound) in [
            (TaskFilter::default(), "tasks_by_creation", vec![]),
            (TaskFilter::default().open(), "tasks_open", vec![]),
            (
                TaskFilter::default().session("s1"),
                "tasks_by_session",
                vec![session()],
            ),
            (
                TaskFilter::default().session("s1").open(),
                "tasks_by_session",
                vec![session()],
            ),
        ] {
            let mut all = vec![below.clone(), rows.clone()];
            all.extend(bound);
            read_in_order_from(&plan(&store, tasks_sql(&filter), all), index);
        }
        read_in_order_from(
            &plan(&store, SESSIONS_FIRST, vec![rows.clone()]),
            "sessions_by_update",
        );
        let after = plan(
            &store,
            SESSIONS_AFTER,
            vec![below, Value::Text("s1".to_owned()), rows],
        );
        read_in_order_from(&after, "sessions_by_update");
        assert!(
            after.iter().any(|step| step.contains("<(?,?)")),
            "the cursor bounds the index range: {after:?}"
        );
    }
}
