//! Deleting a session from the SQLite file, a batch of turns and tasks per transaction, the
//! session's own rows last.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::Failure;
use super::claims::now_ms;
use crate::store::Deleted;
use crate::store::rows::{busy, count, journal_range, turn_busy};

/// One batch of the deletion of session `session_id` (see `Store::delete_session`).
pub(super) fn delete_session(
    conn: &mut Connection,
    session_id: &str,
    batch: usize,
) -> Result<Deleted, Failure> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    check_idle(&tx, session_id)?;
    let limit = count(batch.max(1));
    let turns: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM turns WHERE session_id = ?1 \
             AND status IN ('completed', 'cancelled') LIMIT ?2",
        )?
        .query_map(params![session_id, limit], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    delete_hooks(&tx, &turns)?;
    for turn in &turns {
        delete_turn(&tx, turn)?;
    }
    let tasks: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM tasks WHERE session_id = ?1 \
             AND status IN ('finished', 'cancelled') LIMIT ?2",
        )?
        .query_map(params![session_id, limit], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    delete_tasks(&tx, &tasks)?;
    // Only when nothing of the session is left (a turn begun meanwhile stays, and is refused
    // by the next call) do its own rows go.
    let done = turns.len() < batch.max(1)
        && tasks.len() < batch.max(1)
        && !tx
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = ?1) \
                 OR EXISTS (SELECT 1 FROM tasks WHERE session_id = ?1)",
            )?
            .query_row([session_id], |row| row.get::<_, bool>(0))?;
    if done {
        for table in ["grants", "conversation", "attachments", "sessions"] {
            let column = if table == "sessions" {
                "id"
            } else {
                "session_id"
            };
            tx.execute(
                &format!("DELETE FROM {table} WHERE {column} = ?1"),
                [session_id],
            )?;
        }
    }
    tx.commit()?;
    Ok(Deleted {
        turns: turns.len() as u64,
        tasks: tasks.len() as u64,
        done,
    })
}

/// Deletes `tasks` with their request index rows (their journals go with their turns').
pub(super) fn delete_tasks(tx: &Transaction<'_>, tasks: &[String]) -> Result<(), Failure> {
    for task in tasks {
        tx.prepare_cached("DELETE FROM task_requests WHERE task_id = ?1")?
            .execute([task])?;
        tx.prepare_cached("DELETE FROM tasks WHERE id = ?1")?
            .execute([task])?;
    }
    Ok(())
}

/// Refuses when a turn of the session is not over, or a task of it has not ended.
fn check_idle(tx: &Transaction<'_>, session_id: &str) -> Result<(), Failure> {
    let turn: Option<(String, String)> = tx
        .prepare_cached(
            "SELECT id, status FROM turns WHERE session_id = ?1 \
             AND (status IN ('active', 'waiting', 'running') OR (status = 'cancelled' \
                  AND json_extract(json, '$.pending') IS NOT NULL AND lease_expires >= ?2)) \
             LIMIT 1",
        )?
        .query_row(params![session_id, now_ms()], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    if let Some((id, status)) = turn {
        return Err(busy(session_id, &turn_busy(&id, &status)).into());
    }
    let task: Option<(String, String)> = tx
        .prepare_cached(
            "SELECT id, status FROM tasks WHERE session_id = ?1 \
             AND status NOT IN ('finished', 'cancelled') LIMIT 1",
        )?
        .query_row([session_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if let Some((id, status)) = task {
        return Err(busy(session_id, &format!("task `{id}` is {status}")).into());
    }
    Ok(())
}

/// Deletes the journals of the hooks the calls of `turns` made (`hooks/<id>`, whose
/// registration at position 0 names its turn), in one pass over the registrations.
pub(super) fn delete_hooks(tx: &Transaction<'_>, turns: &[String]) -> Result<(), Failure> {
    if turns.is_empty() {
        return Ok(());
    }
    let ids = serde_json::to_string(turns).unwrap_or_default();
    tx.prepare_cached(
        "DELETE FROM journal WHERE run_id IN (SELECT run_id FROM journal \
         WHERE run_id >= 'hooks/' AND run_id < 'hooks0' AND position = 0 \
         AND json_extract(json, '$.value.turn_id') IN (SELECT value FROM json_each(?1)))",
    )?
    .execute([ids])?;
    Ok(())
}

/// Deletes turn `id` with its request index rows, recorded answers, step history and
/// journals: its calls' (`<turn>/<call>`, a task's too) and its steering log
/// (`<turn>#steering`).
pub(super) fn delete_turn(tx: &Transaction<'_>, id: &str) -> Result<(), Failure> {
    tx.prepare_cached("DELETE FROM requests WHERE turn_id = ?1")?
        .execute([id])?;
    tx.prepare_cached("DELETE FROM turn_patches WHERE turn_id = ?1")?
        .execute([id])?;
    tx.prepare_cached("DELETE FROM turn_steps WHERE turn_id = ?1")?
        .execute([id])?;
    let (from, to) = journal_range(id);
    tx.prepare_cached("DELETE FROM journal WHERE run_id >= ?1 AND run_id < ?2")?
        .execute(params![from, to])?;
    tx.prepare_cached("DELETE FROM journal WHERE run_id = ?1")?
        .execute([format!("{id}#steering")])?;
    tx.prepare_cached("DELETE FROM turns WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}
