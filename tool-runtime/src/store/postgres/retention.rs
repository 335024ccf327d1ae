//! Retention in the database: finished turns past their time, and idle sessions.

use std::time::Duration;

use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::PgPool;

use super::delete::{delete_tasks, delete_turns};
use super::errors::Failure;
use crate::store::rows::{count, millis};
use crate::store::{Deleted, TurnRetention};

/// The current time by the server's clock in Unix milliseconds, less `$1` milliseconds: the
/// cut of a sweep.
macro_rules! cut {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint - $1"
    };
}

/// The turns still needed, left out of a sweep: one cancelled while a step of it runs (its
/// step still open, its lease live), and one a task still needs (a task of the turn's session
/// that holds the turn, started by it or by a call of it, and has not ended or has a result not
/// delivered).
/// Records are read through `json_of!`: a NUL in one never fails the sweep.
macro_rules! needed {
    () => {
        concat!(
            "NOT (t.status = 'cancelled' AND json_typeof(",
            json_of!("t.json"),
            " -> 'pending') = 'object' \
             AND t.lease_expires >= (extract(epoch from clock_timestamp()) * 1000)::bigint) \
             AND NOT EXISTS (SELECT 1 FROM tasks k, json_array_elements(",
            json_of!("k.json"),
            " -> 'calls') c WHERE k.session_id = t.session_id AND (",
            json_of!("k.json"),
            " ->> 'turn_id' = t.id OR c ->> 'turn_id' = t.id) \
             AND (k.status NOT IN ('finished', 'cancelled') \
                  OR (json_typeof(c -> 'result') IS NOT NULL \
                      AND json_typeof(c -> 'result') <> 'null' \
                      AND (c ->> 'delivered')::boolean IS NOT TRUE)))"
        )
    };
}

/// One batch of `Store::sweep_turns`.
pub(super) async fn sweep_turns(
    pool: &PgPool,
    rule: TurnRetention,
    batch: usize,
) -> Result<Deleted, Failure> {
    if rule.older_than.is_none() && rule.keep.is_none() {
        return Ok(Deleted {
            done: true,
            ..Deleted::default()
        });
    }
    let age = rule.older_than.map(millis);
    let keep = rule.keep.map(count);
    let limit = count(batch.max(1));
    let mut tx = pool.begin().await?;
    let turns: Vec<String> = query_scalar(concat!(
        "SELECT t.id FROM (SELECT id, session_id, status, json, lease_expires, finished_ms, row_number() OVER \
         (PARTITION BY session_id ORDER BY finished_ms DESC, id DESC) AS newer \
         FROM turns WHERE finished_ms IS NOT NULL) t \
         WHERE (($1::bigint IS NOT NULL AND t.finished_ms < ",
        cut!(),
        ") OR ($2::bigint IS NOT NULL AND t.newer > $2)) AND ",
        needed!(),
        " ORDER BY t.finished_ms, t.id LIMIT $3"
    ))
    .bind(age)
    .bind(keep)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    let tasks: Vec<String> = query_scalar(concat!(
        "SELECT id FROM tasks WHERE status IN ('finished', 'cancelled') AND ",
        json_of!("json"),
        " ->> 'turn_id' = ANY($1)"
    ))
    .bind(&turns)
    .fetch_all(&mut *tx)
    .await?;
    delete_tasks(&mut tx, &tasks).await?;
    delete_turns(&mut tx, &turns).await?;
    tx.commit().await?;
    Ok(Deleted {
        turns: turns.len() as u64,
        tasks: tasks.len() as u64,
        done: turns.len() < batch.max(1),
    })
}

/// `Store::idle_sessions`.
pub(super) async fn idle_sessions(
    pool: &PgPool,
    older_than: Duration,
    limit: usize,
) -> Result<Vec<String>, Failure> {
    Ok(query_scalar(concat!(
        "WITH cut AS (SELECT ",
        cut!(),
        " AS at) SELECT s.id FROM sessions s, cut \
         WHERE coalesce(s.updated_ms, 0) < cut.at \
         AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id \
             AND (t.finished_ms IS NULL OR t.finished_ms >= cut.at)) \
         AND NOT EXISTS (SELECT 1 FROM tasks k WHERE k.session_id = s.id \
             AND (k.finished_ms IS NULL OR k.finished_ms >= cut.at)) \
         ORDER BY s.updated_ms, s.id LIMIT $2"
    ))
    .bind(millis(older_than))
    .bind(count(limit))
    .fetch_all(pool)
    .await?)
}
