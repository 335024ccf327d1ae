//! The model loop's conversation in the database: one row per message, appended.

use serde_json::Value;
use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_postgres::{PgPool, PgTransaction};

use super::errors::Failure;
use crate::record::ConversationEntry;
use crate::store::StoreError;
use crate::store::rows::decode_message;

/// Session `session_id`'s conversation, in position order.
pub(super) async fn read(
    pool: &PgPool,
    session_id: &str,
) -> Result<Vec<ConversationEntry>, Failure> {
    let rows: Vec<(i64, String, String)> = query_as(
        "SELECT position, turn_id, json FROM conversation WHERE session_id = $1 \
         ORDER BY position",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|row| Ok(decode_message(session_id, row)?))
        .collect()
}

/// Appends `messages` at `first`, `first + 1`, ... in one transaction; a taken position refuses
/// the whole append.
pub(super) async fn append(
    pool: &PgPool,
    session_id: &str,
    turn_id: &str,
    first: u64,
    messages: &[Value],
) -> Result<(), Failure> {
    let mut tx = pool.begin().await?;
    insert(&mut tx, session_id, turn_id, first, messages).await?;
    tx.commit().await?;
    Ok(())
}

/// Inserts `messages` at `first`, `first + 1`, ... inside `tx`; a taken position is a conflict,
/// and the caller's transaction, dropped, rolls back what was inserted before it.
pub(super) async fn insert(
    tx: &mut PgTransaction<'_>,
    session_id: &str,
    turn_id: &str,
    first: u64,
    messages: &[Value],
) -> Result<(), Failure> {
    for (offset, message) in messages.iter().enumerate() {
        let position = first + offset as u64;
        let inserted = query(
            "INSERT INTO conversation (session_id, position, turn_id, json) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(session_id)
        .bind(position as i64)
        .bind(turn_id)
        .bind(message.to_string())
        .execute(&mut **tx)
        .await?;
        if inserted.rows_affected() == 0 {
            return Err(Failure::Store(StoreError::Conflict(format!(
                "{session_id}#{position}"
            ))));
        }
    }
    Ok(())
}
