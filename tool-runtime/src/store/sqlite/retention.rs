//! Retention in the SQLite file: finished turns past their time, and idle sessions.

use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::Failure;
use super::claims::now_ms;
use super::delete::{delete_hooks, delete_tasks, delete_turn};
use crate::store::rows::{count, millis};
use crate::store::{Deleted, TurnRetention};

/// The turns still needed, left out of a sweep: one cancelled while a step of it runs (its
/// step still open, its lease live), and one a task still needs (a task of the turn's session
/// that holds the turn, started by it or by a call of it, and has not ended or has a result not
/// delivered).
const NEEDED: &str = "NOT (t.status = 'cancelled' AND json_extract(t.json, '$.pending') IS NOT NULL \
     AND t.lease_expires >= CAST(unixepoch('subsec') * 1000 AS INTEGER)) \
     AND NOT EXISTS (SELECT 1 FROM tasks k, json_each(k.json, '$.calls') c \
     WHERE k.session_id = t.session_id \
     AND (json_extract(k.json, '$.turn_id') = t.id OR json_extract(c.value, '$.turn_id') = t.id) \
     AND (k.status NOT IN ('finished', 'cancelled') \
          OR (json_extract(c.value, '$.result') IS NOT NULL \
              AND json_extract(c.value, '$.delivered') = 0)))";

/// One batch of `Store::sweep_turns`.
pub(super) fn sweep_turns(
    conn: &mut Connection,
    rule: TurnRetention,
    batch: usize,
) -> Result<Deleted, Failure> {
    let cut = rule
        .older_than
        .map(|age| now_ms().saturating_sub(millis(age)));
    let keep = rule.keep.map(count);
    if cut.is_none() && keep.is_none() {
        return Ok(Deleted {
            done: true,
            ..Deleted::default()
        });
    }
    let limit = count(batch.max(1));
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let turns: Vec<String> = if keep.is_some() {
        // Ranked by age within each session: a walk over the finished turns.
        let sql = format!(
            "SELECT t.id FROM (SELECT id, session_id, status, json, lease_expires, finished_ms, row_number() OVER \
             (PARTITION BY session_id ORDER BY finished_ms DESC, id DESC) AS newer \
             FROM turns WHERE finished_ms IS NOT NULL) t \
             WHERE ((?1 IS NOT NULL AND t.finished_ms < ?1) OR t.newer > ?2) AND {NEEDED} \
             ORDER BY t.finished_ms, t.id LIMIT ?3"
        );
        tx.prepare_cached(&sql)?
            .query_map(params![cut, keep, limit], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    } else {
        let sql = format!(
            "SELECT t.id FROM turns t WHERE t.finished_ms IS NOT NULL AND t.finished_ms < ?1 \
             AND {NEEDED} ORDER BY t.finished_ms, t.id LIMIT ?2"
        );
        tx.prepare_cached(&sql)?
            .query_map(params![cut, limit], |row| row.get(0))?
            .collect::<Result<_, _>>()?
    };
    let ids = serde_json::to_string(&turns).unwrap_or_default();
    let tasks: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM tasks WHERE status IN ('finished', 'cancelled') \
             AND json_extract(json, '$.turn_id') IN (SELECT value FROM json_each(?1))",
        )?
        .query_map([&ids], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    delete_tasks(&tx, &tasks)?;
    delete_hooks(&tx, &turns)?;
    for turn in &turns {
        delete_turn(&tx, turn)?;
    }
    tx.commit()?;
    Ok(Deleted {
        turns: turns.len() as u64,
        tasks: tasks.len() as u64,
        done: turns.len() < batch.max(1),
    })
}

/// `Store::idle_sessions`.
pub(super) fn idle_sessions(
    conn: &mut Connection,
    older_than: Duration,
    limit: usize,
) -> Result<Vec<String>, Failure> {
    let cut = now_ms().saturating_sub(millis(older_than));
    let ids = conn
        .prepare_cached(
            "SELECT s.id FROM sessions s WHERE coalesce(s.updated_ms, 0) < ?1 \
             AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id \
                 AND (t.finished_ms IS NULL OR t.finished_ms >= ?1)) \
             AND NOT EXISTS (SELECT 1 FROM tasks k WHERE k.session_id = s.id \
                 AND (k.finished_ms IS NULL OR k.finished_ms >= ?1)) \
             ORDER BY s.updated_ms, s.id LIMIT ?2",
        )?
        .query_map(params![cut, count(limit)], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}
