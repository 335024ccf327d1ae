//! Deleting a session from the database, a batch of turns and tasks per transaction, the
//! session's own rows last.

use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::{PgPool, PgTransaction};

use super::errors::Failure;
use crate::store::Deleted;
use crate::store::rows::{busy, count, journal_range, turn_busy};

/// One batch of the deletion of session `session_id` (see `Store::delete_session`).
pub(super) async fn delete_session(
    pool: &PgPool,
    session_id: &str,
    batch: usize,
) -> Result<Deleted, Failure> {
    let mut tx = pool.begin().await?;
    check_idle(&mut tx, session_id).await?;
    let limit = count(batch.max(1));
    let turns: Vec<String> = query_scalar(
        "SELECT id FROM turns WHERE session_id = $1 \
         AND status IN ('completed', 'cancelled') LIMIT $2",
    )
    .bind(session_id)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    delete_turns(&mut tx, &turns).await?;
    let tasks: Vec<String> = query_scalar(
        "SELECT id FROM tasks WHERE session_id = $1 \
         AND status IN ('finished', 'cancelled') LIMIT $2",
    )
    .bind(session_id)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    delete_tasks(&mut tx, &tasks).await?;
    // Only when nothing of the session is left (a turn begun meanwhile stays, and is refused
    // by the next call) do its own rows go.
    let left: bool = query_scalar(
        "SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = $1) \
         OR EXISTS (SELECT 1 FROM tasks WHERE session_id = $1)",
    )
    .bind(session_id)
    .fetch_one(&mut *tx)
    .await?;
    let done = turns.len() < batch.max(1) && tasks.len() < batch.max(1) && !left;
    if done {
        for statement in [
            "DELETE FROM grants WHERE session_id = $1",
            "DELETE FROM conversation WHERE session_id = $1",
            "DELETE FROM attachments WHERE session_id = $1",
            "DELETE FROM sessions WHERE id = $1",
        ] {
            query(statement).bind(session_id).execute(&mut *tx).await?;
        }
    }
    tx.commit().await?;
    Ok(Deleted {
        turns: turns.len() as u64,
        tasks: tasks.len() as u64,
        done,
    })
}

/// Deletes `tasks` with their request index rows (their journals go with their turns').
pub(super) async fn delete_tasks(
    tx: &mut PgTransaction<'_>,
    tasks: &[String],
) -> Result<(), Failure> {
    for statement in [
        "DELETE FROM task_requests WHERE task_id = ANY($1)",
        "DELETE FROM tasks WHERE id = ANY($1)",
    ] {
        query(statement).bind(tasks).execute(&mut **tx).await?;
    }
    Ok(())
}

/// Refuses when a turn of the session is not over, or a task of it has not ended.
async fn check_idle(tx: &mut PgTransaction<'_>, session_id: &str) -> Result<(), Failure> {
    let turn: Option<(String, String)> = query_as(concat!(
        "SELECT id, status FROM turns WHERE session_id = $1 \
         AND (status IN ('active', 'waiting', 'running') OR (status = 'cancelled' \
              AND json_typeof(",
        json_of!("json"),
        " -> 'pending') = 'object' AND lease_expires >= ",
        now_ms!(),
        ")) LIMIT 1"
    ))
    .bind(session_id)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some((id, status)) = turn {
        return Err(busy(session_id, &turn_busy(&id, &status)).into());
    }
    let task: Option<(String, String)> = query_as(
        "SELECT id, status FROM tasks WHERE session_id = $1 \
         AND status NOT IN ('finished', 'cancelled') LIMIT 1",
    )
    .bind(session_id)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some((id, status)) = task {
        return Err(busy(session_id, &format!("task `{id}` is {status}")).into());
    }
    Ok(())
}

/// Deletes `turns` with their request index rows, recorded answers, step histories and
/// journals: their calls'
/// (`<turn>/<call>`, a task's too), their steering logs (`<turn>#steering`) and their hooks'
/// (`hooks/<id>`, whose registration at position 0 names its turn). Run ids are compared in the
/// "C" collation (bytes), which the journal's `journal_by_run_c` index is in: a prefix range
/// in a linguistic collation could leave rows out.
pub(super) async fn delete_turns(
    tx: &mut PgTransaction<'_>,
    turns: &[String],
) -> Result<(), Failure> {
    if turns.is_empty() {
        return Ok(());
    }
    query(concat!(
        "DELETE FROM journal WHERE run_id IN (SELECT run_id FROM journal \
             WHERE (run_id COLLATE \"C\") >= 'hooks/' AND (run_id COLLATE \"C\") < 'hooks0' \
             AND position = 0 AND (",
        json_of!("json"),
        " -> 'value' ->> 'turn_id') = ANY($1))"
    ))
    .bind(turns)
    .execute(&mut **tx)
    .await?;
    for turn in turns {
        let (from, to) = journal_range(turn);
        query(
            "DELETE FROM journal WHERE (run_id COLLATE \"C\") >= $1 \
             AND (run_id COLLATE \"C\") < $2",
        )
        .bind(from)
        .bind(to)
        .execute(&mut **tx)
        .await?;
    }
    let steering: Vec<String> = turns.iter().map(|t| format!("{t}#steering")).collect();
    for (statement, ids) in [
        ("DELETE FROM journal WHERE run_id = ANY($1)", &steering[..]),
        ("DELETE FROM requests WHERE turn_id = ANY($1)", turns),
        ("DELETE FROM turn_patches WHERE turn_id = ANY($1)", turns),
        ("DELETE FROM turn_steps WHERE turn_id = ANY($1)", turns),
        ("DELETE FROM turns WHERE id = ANY($1)", turns),
    ] {
        query(statement).bind(ids).execute(&mut **tx).await?;
    }
    Ok(())
}
