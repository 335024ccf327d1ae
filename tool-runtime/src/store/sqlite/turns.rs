//! Turns in the SQLite file: the record, and the answers recorded beside it
//! (`turn_patches`) until the next write of the whole record takes them in.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Failure;
use super::claims::{OwnedClaim, check_claim, now_ms, take_lease};
use super::requests::{index_requests, indexed_marker};
use crate::record::TurnRecord;
use crate::store::rows::{clamp, decode_turn, encode, status_name, stored_versions, written};
use crate::store::{Appended, Claim, LeaseKind, Written};
use serde_json::Value;

/// Turn `id` with the answers recorded since its last write applied, read in one transaction
/// (so another process's write cannot fall between the record and its patches). A turn
/// without answers beside it, the usual case, is one statement (atomic on its own).
pub(super) fn read(conn: &mut Connection, id: &str) -> Result<Option<(TurnRecord, u64)>, Failure> {
    let row: Option<(String, i64, bool)> = conn
        .prepare_cached(
            "SELECT json, version, EXISTS (SELECT 1 FROM turn_patches WHERE turn_id = ?1) \
             FROM turns WHERE id = ?1",
        )?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    match row {
        None => Ok(None),
        Some((json, version, false)) => Ok(Some(decode_turn(id, &json, version, &[])?)),
        Some((_, _, true)) => read_patched(conn, id),
    }
}

/// [`read`] of a turn with answers beside it: the record and its patches in one transaction.
fn read_patched(conn: &mut Connection, id: &str) -> Result<Option<(TurnRecord, u64)>, Failure> {
    let tx = conn.transaction()?;
    let row: Option<(String, i64)> = tx
        .prepare_cached("SELECT json, version FROM turns WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let Some((json, version)) = row else {
        return Ok(None);
    };
    let patches = tx
        .prepare_cached("SELECT json FROM turn_patches WHERE turn_id = ?1 ORDER BY seq")?
        .query_map([id], |row| row.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    tx.finish()?;
    Ok(Some(decode_turn(id, &json, version, &patches)?))
}

/// A turn write, encoded before it goes to the blocking pool.
pub(super) struct TurnWrite {
    id: String,
    session_id: String,
    status: &'static str,
    json: String,
    wake_at: Option<i64>,
    requests: Vec<String>,
    expected: Option<u64>,
    claim: OwnedClaim,
    /// The conversation's messages the write appends: the first one's position, and each
    /// message encoded.
    appended: (u64, Vec<String>),
}

impl TurnWrite {
    /// Encodes `record` for a write at `expected` doing `claim`.
    pub(super) fn new(
        record: &TurnRecord,
        expected: Option<u64>,
        claim: Claim<'_>,
        appended: Appended<'_>,
    ) -> Result<TurnWrite, crate::store::StoreError> {
        Ok(TurnWrite {
            id: record.id.clone(),
            session_id: record.session_id.clone(),
            status: status_name(record.status),
            json: encode(&record.id, record)?,
            wake_at: record.wake_at().map(clamp),
            requests: record
                .request_ids()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            expected,
            claim: OwnedClaim::from(claim),
            appended: (
                appended.first,
                appended.messages.iter().map(Value::to_string).collect(),
            ),
        })
    }
}

/// Writes the whole record (see [`crate::Store::write_turn`]); the answers recorded beside the
/// turn are in it now, and go.
pub(super) fn write(conn: &mut Connection, write: &TurnWrite) -> Result<Written, Failure> {
    let TurnWrite {
        id,
        session_id,
        status,
        json,
        wake_at,
        requests,
        expected,
        claim,
        appended: (first, messages),
    } = write;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    check_claim(&tx, LeaseKind::Turn, id, claim, now)?;
    let stored_marker = indexed_marker(&tx, LeaseKind::Turn, id, *expected)?;
    let sequence = next_sequence(&tx)?;
    let version = match expected {
        None => {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO turns (id, session_id, status, version, json, updated, \
                     wake_at, finished_ms) VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, \
                     CASE WHEN ?3 IN ('completed', 'cancelled') THEN ?7 END) \
                     ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![
                    id, session_id, status, json, sequence, wake_at, now
                ])?;
            written(inserted, id)?;
            1
        }
        Some(expected) => {
            let (stored, next) = stored_versions(id, *expected)?;
            let updated = tx
                .prepare_cached(
                    "UPDATE turns SET session_id = ?2, status = ?3, version = ?4, \
                     json = ?5, updated = ?6, wake_at = ?8, finished_ms = CASE WHEN ?3 IN \
                     ('completed', 'cancelled') THEN coalesce(finished_ms, ?9) END \
                     WHERE id = ?1 AND version = ?7",
                )?
                .execute(params![
                    id, session_id, status, next, json, sequence, stored, wake_at, now
                ])?;
            written(updated, id)?;
            tx.prepare_cached("DELETE FROM turn_patches WHERE turn_id = ?1")?
                .execute([id])?;
            expected + 1
        }
    };
    let lease = take_lease(&tx, LeaseKind::Turn, id, claim, now)?;
    // The index only grows: a request of a closed step still resolves to its turn, so a late
    // answer is recognised as an answer to a settled request, not an unknown one.
    index_requests(&tx, LeaseKind::Turn, id, requests, stored_marker)?;
    super::conversation::insert(&tx, session_id, id, *first, messages)?;
    tx.commit()?;
    Ok(Written { version, lease })
}

/// Records an answer's patch beside turn `id` at version `expected` (see
/// [`crate::Store::settle_request`]): the turn row gets the next version and write sequence,
/// its record stays as it is.
pub(super) fn settle(
    conn: &mut Connection,
    id: &str,
    patch: &str,
    expected: u64,
) -> Result<u64, Failure> {
    let (stored, next) = stored_versions(id, expected)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let sequence = next_sequence(&tx)?;
    let updated = tx
        .prepare_cached(
            "UPDATE turns SET version = ?2, updated = ?3 WHERE id = ?1 AND version = ?4",
        )?
        .execute(params![id, next, sequence, stored])?;
    written(updated, id)?;
    tx.prepare_cached("INSERT INTO turn_patches (turn_id, seq, json) VALUES (?1, ?2, ?3)")?
        .execute(params![id, next, patch])?;
    tx.commit()?;
    Ok(expected + 1)
}

/// The next value of the store-wide write sequence (`turns.updated`).
fn next_sequence(tx: &rusqlite::Transaction<'_>) -> Result<i64, Failure> {
    Ok(tx
        .prepare_cached("SELECT coalesce(max(updated), 0) + 1 FROM turns")?
        .query_row([], |row| row.get(0))?)
}
