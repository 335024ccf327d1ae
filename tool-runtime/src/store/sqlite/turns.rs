//! Turns in the SQLite file: the record, the answers recorded beside it (`turn_patches`)
//! until the next write of the whole record takes them in, and the history of its closed steps
//! (`turn_steps`), which every write carrying a closed step keeps up to date.

use std::ops::Range;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Failure;
use super::claims::{OwnedClaim, check_claim, claim_holds, next_lease, now_ms, take_lease};
use super::requests::index_requests;
use crate::record::{ClosedStep, TurnRecord};
use crate::store::page::sql::step_position;
use crate::store::rows::{
    StepRow, clamp, decode_turn, encode_turn, status_name, step_page, stored_versions, written,
};
use crate::store::{
    Appended, Claim, Lease, LeaseKind, Page, PageRequest, Since, StepSince, StoreError, Written,
};
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

/// Turn `id` unless it is still at version `known` (see [`crate::Store::turn_since`]): one
/// statement that compares the version and hands over the record only when it differs, so
/// an unchanged turn costs an index lookup and nothing is decoded.
pub(super) fn read_since(
    conn: &mut Connection,
    id: &str,
    known: u64,
) -> Result<Since<TurnRecord>, Failure> {
    let stored = i64::try_from(known).unwrap_or(-1);
    let row: Option<(Option<String>, i64, bool)> = conn
        .prepare_cached(
            "SELECT CASE WHEN version = ?2 THEN NULL ELSE json END, version, \
             version <> ?2 AND EXISTS (SELECT 1 FROM turn_patches WHERE turn_id = ?1) \
             FROM turns WHERE id = ?1",
        )?
        .query_row(params![id, stored], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    since_row(conn, id, known, row)
}

/// What [`read_since`] answers for the row its statement read (`None`: no such turn): the
/// record when it is not at version `known`, its version, whether answers are recorded beside
/// it. Also used where the same columns come from a statement that reads more
/// ([`super::SqliteStore`]'s `step_since`).
pub(super) fn since_row(
    conn: &mut Connection,
    id: &str,
    known: u64,
    row: Option<(Option<String>, i64, bool)>,
) -> Result<Since<TurnRecord>, Failure> {
    let read = match row {
        None => return Ok(None),
        Some((None, _, _)) => return Ok(Some((None, known))),
        Some((Some(json), version, false)) => Some(decode_turn(id, &json, version, &[])?),
        // Read again with its answers: it may have moved on, even to nothing.
        Some((Some(_), _, true)) => read_patched(conn, id)?,
    };
    Ok(read.map(|(turn, version)| (Some(turn), version)))
}

/// Turn `turn.0` unless it is at version `turn.1` and session `session.0` unless it is at
/// version `session.1` (see [`crate::Store::step_since`]): one statement for both, as
/// [`read_since`] and [`super::sessions::read_since`] each read theirs.
pub(super) fn step_since(
    conn: &mut Connection,
    turn: (&str, u64),
    session: (&str, u64),
) -> Result<StepSince, Failure> {
    let stored = |known: u64| i64::try_from(known).unwrap_or(-1);
    type Row = (
        Option<(Option<String>, i64, bool)>,
        Option<(Option<String>, i64)>,
    );
    let (turn_row, session_row): Row = conn
        .prepare_cached(
            "SELECT CASE WHEN t.version = ?2 THEN NULL ELSE t.json END, t.version, \
             t.version <> ?2 AND EXISTS (SELECT 1 FROM turn_patches WHERE turn_id = ?1), \
             CASE WHEN s.version = ?4 THEN NULL ELSE s.json END, s.version \
             FROM (SELECT 1) LEFT JOIN turns t ON t.id = ?1 LEFT JOIN sessions s ON s.id = ?3",
        )?
        .query_row(
            params![turn.0, stored(turn.1), session.0, stored(session.1)],
            |row| {
                let turn: Option<(Option<String>, i64, bool)> = match row.get(1)? {
                    None => None,
                    Some(version) => Some((
                        row.get(0)?,
                        version,
                        row.get::<_, Option<bool>>(2)?.unwrap_or(false),
                    )),
                };
                let session: Option<(Option<String>, i64)> = match row.get(4)? {
                    None => None,
                    Some(version) => Some((row.get(3)?, version)),
                };
                Ok((turn, session))
            },
        )?;
    let turn = since_row(conn, turn.0, turn.1, turn_row)?;
    let session = super::sessions::since_row(session.0, session.1, session_row)?;
    Ok((turn, session))
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
    /// The closed step the record carries (`last_step`), its index and where its JSON is in
    /// `json`, for the step history.
    step: Option<(i64, Range<usize>)>,
}

/// Keeps a turn's closed step in its history (`?1` the turn, `?2` the index, `?3` the JSON): a
/// step closed again with the same index replaces the row, and a row already holding the same
/// JSON (the step the previous write carried, unchanged) is not written again.
const KEEP_STEP: &str = "INSERT INTO turn_steps (turn_id, step, json) VALUES (?1, ?2, ?3) \
    ON CONFLICT (turn_id, step) DO UPDATE SET json = excluded.json WHERE json != excluded.json";

impl TurnWrite {
    /// Encodes `record` for a write at `expected` doing `claim`.
    pub(super) fn new(
        record: &TurnRecord,
        expected: Option<u64>,
        claim: Claim<'_>,
        appended: Appended<'_>,
    ) -> Result<TurnWrite, StoreError> {
        let (json, step) = encode_turn(record)?;
        Ok(TurnWrite {
            id: record.id.clone(),
            session_id: record.session_id.clone(),
            status: status_name(record.status),
            json,
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
            step,
        })
    }
}

/// Writes the whole record (see [`crate::Store::write_turn`]); the answers recorded beside the
/// turn are in it now, and go. The closed step it carries goes into the turn's step history
/// in the same transaction (one statement more, only when the record has one).
pub(super) fn write(conn: &mut Connection, write: &TurnWrite) -> Result<Written, Failure> {
    let TurnWrite {
        id,
        session_id,
        requests,
        expected,
        claim,
        appended: (first, messages),
        step,
        ..
    } = write;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    let (version, stored_marker, lease) = match expected {
        None => {
            check_claim(&tx, LeaseKind::Turn, id, claim, now)?;
            let version = insert(&tx, write, now)?;
            (
                version,
                None,
                take_lease(&tx, LeaseKind::Turn, id, claim, now)?,
            )
        }
        Some(expected) => update(&tx, write, *expected, now)?,
    };
    // The index only grows: a request of a closed step still resolves to its turn, so a late
    // answer is recognised as an answer to a settled request, not an unknown one.
    index_requests(&tx, LeaseKind::Turn, id, requests, stored_marker)?;
    super::conversation::insert(&tx, session_id, id, *first, messages)?;
    if let Some((index, range)) = step {
        tx.prepare_cached(KEEP_STEP)?
            .execute(params![id, index, &write.json[range.clone()]])?;
    }
    tx.commit()?;
    Ok(Written { version, lease })
}

/// Inserts the turn at version 1 (a conflict when it exists).
fn insert(tx: &rusqlite::Transaction<'_>, write: &TurnWrite, now: i64) -> Result<u64, Failure> {
    let sequence = next_sequence(tx)?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO turns (id, session_id, status, version, json, updated, \
             wake_at, finished_ms) VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, \
             CASE WHEN ?3 IN ('completed', 'cancelled') THEN ?7 END) \
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            write.id,
            write.session_id,
            write.status,
            write.json,
            sequence,
            write.wake_at,
            now
        ])?;
    written(inserted, &write.id)?;
    Ok(1)
}

/// Replaces the turn at version `expected` and drops the answers beside it; returns the new
/// version, the request-index marker of the record replaced and the lease a taking claim
/// took. What the write needs of the stored row (the lease columns its claim is checked
/// against, the marker, and the next write sequence) is one statement, before the update;
/// a taking claim's new lease goes with the update.
fn update(
    tx: &rusqlite::Transaction<'_>,
    write: &TurnWrite,
    expected: u64,
    now: i64,
) -> Result<(u64, Option<String>, Option<Lease>), Failure> {
    /// The update, and the update of a taking claim (`?10`, `?11`: the lease's owner and
    /// expiry).
    const UPDATE: &str = "UPDATE turns SET session_id = ?2, status = ?3, version = ?4, \
        json = ?5, updated = ?6, wake_at = ?8, finished_ms = CASE WHEN ?3 IN \
        ('completed', 'cancelled') THEN coalesce(finished_ms, ?9) END \
        WHERE id = ?1 AND version = ?7";
    const TAKING: &str = "UPDATE turns SET session_id = ?2, status = ?3, version = ?4, \
        json = ?5, updated = ?6, wake_at = ?8, finished_ms = CASE WHEN ?3 IN \
        ('completed', 'cancelled') THEN coalesce(finished_ms, ?9) END, lease_owner = ?10, \
        lease_token = lease_token + 1, lease_expires = ?11 WHERE id = ?1 AND version = ?7";
    let id = &write.id;
    let (stored, next) = stored_versions(id, expected)?;
    let row: Option<(Option<String>, i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT indexed, lease_token, lease_expires, \
             (SELECT coalesce(max(updated), 0) + 1 FROM turns) FROM turns WHERE id = ?1",
        )?
        .query_row([id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    // A turn that does not exist is refused by the update, as a stale version is.
    let (marker, token, expires, sequence) =
        row.map_or((None, None, 0, 0), |(m, t, e, s)| (m, Some(t), e, s));
    claim_holds(&write.claim, id, token, expires, now)?;
    let lease = next_lease(&write.claim, LeaseKind::Turn, id, token.unwrap_or(0), now);
    let columns = params![
        id,
        write.session_id,
        write.status,
        next,
        write.json,
        sequence,
        stored,
        write.wake_at,
        now
    ];
    let updated = match &lease {
        None => tx.prepare_cached(UPDATE)?.execute(columns)?,
        Some((lease, expires)) => {
            let mut all = columns.to_vec();
            all.extend([&lease.owner as &dyn rusqlite::ToSql, expires]);
            tx.prepare_cached(TAKING)?.execute(all.as_slice())?
        }
    };
    written(updated, id)?;
    tx.prepare_cached("DELETE FROM turn_patches WHERE turn_id = ?1")?
        .execute([id])?;
    Ok((expected + 1, marker, lease.map(|(lease, _)| lease)))
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

/// One page of turn `turn_id`'s closed steps, oldest first (see [`crate::Store::turn_steps`]):
/// one statement, reading the primary key in order from after the cursor's index.
pub(super) fn steps(
    conn: &mut Connection,
    turn_id: &str,
    page: &PageRequest,
) -> Result<Page<ClosedStep>, Failure> {
    let limit = page.checked_limit()?;
    let after = step_position(page.after.as_ref())?;
    let fetch = i64::try_from(limit).map_or(i64::MAX, |limit| limit + 1);
    let rows = conn
        .prepare_cached(
            "SELECT step, json FROM turn_steps WHERE turn_id = ?1 AND step > ?2 \
             ORDER BY step LIMIT ?3",
        )?
        .query_map(params![turn_id, after, fetch], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<Result<Vec<StepRow>, _>>()?;
    Ok(step_page(turn_id, rows, limit)?)
}
