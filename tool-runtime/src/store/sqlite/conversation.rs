//! The model loop's conversation in the SQLite file: one row per message, appended.

use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use super::Failure;
use crate::record::ConversationEntry;
use crate::store::StoreError;
use crate::store::rows::decode_message;

/// Session `session_id`'s conversation, in position order.
pub(super) fn read(
    conn: &mut Connection,
    session_id: &str,
) -> Result<Vec<ConversationEntry>, Failure> {
    let mut statement = conn.prepare_cached(
        "SELECT position, turn_id, json FROM conversation WHERE session_id = ?1 ORDER BY position",
    )?;
    let rows = statement
        .query_map([session_id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|row| Ok(decode_message(session_id, row)?))
        .collect()
}

/// Appends `messages` at `first`, `first + 1`, ... in one transaction; a taken position refuses
/// the whole append.
pub(super) fn append(
    conn: &mut Connection,
    session_id: &str,
    turn_id: &str,
    first: u64,
    messages: &[String],
) -> Result<(), Failure> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    insert(&tx, session_id, turn_id, first, messages)?;
    tx.commit()?;
    Ok(())
}

/// Inserts `messages` (encoded) at `first`, `first + 1`, ... inside `tx`; a taken position is a
/// conflict, and the caller's transaction, dropped, rolls back what was inserted before it.
pub(super) fn insert(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
    first: u64,
    messages: &[String],
) -> Result<(), Failure> {
    if messages.is_empty() {
        return Ok(());
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO conversation (session_id, position, turn_id, json) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
    )?;
    for (offset, message) in messages.iter().enumerate() {
        let position = first + offset as u64;
        let inserted = insert.execute(params![session_id, position as i64, turn_id, message])?;
        if inserted == 0 {
            return Err(Failure::Store(StoreError::Conflict(format!(
                "{session_id}#{position}"
            ))));
        }
    }
    Ok(())
}
