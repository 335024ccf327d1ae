//! Sessions in the SQLite file: one row each, its record as JSON with a version.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Failure;
use super::claims::now_ms;
use crate::record::SessionRecord;
use crate::store::Since;
use crate::store::rows::{decode, stored_versions, written};

/// Session `id` with its version.
pub(super) fn read(
    conn: &mut Connection,
    id: &str,
) -> Result<Option<(SessionRecord, u64)>, Failure> {
    let row = conn
        .prepare_cached("SELECT json, version FROM sessions WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(row
        .map(|(json, version): (String, i64)| decode(id, &json, version))
        .transpose()?)
}

/// Session `id`'s version, with the record only when the version is not `known` (see
/// [`crate::Store::session_since`]): an unchanged session is not decoded.
pub(super) fn read_since(
    conn: &mut Connection,
    id: &str,
    known: u64,
) -> Result<Since<SessionRecord>, Failure> {
    let stored = i64::try_from(known).unwrap_or(-1);
    let row: Option<(Option<String>, i64)> = conn
        .prepare_cached(
            "SELECT CASE WHEN version = ?2 THEN NULL ELSE json END, version \
             FROM sessions WHERE id = ?1",
        )?
        .query_row(params![id, stored], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    since_row(id, known, row)
}

/// What [`read_since`] answers for the row its statement read (`None`: no such session).
pub(super) fn since_row(
    id: &str,
    known: u64,
    row: Option<(Option<String>, i64)>,
) -> Result<Since<SessionRecord>, Failure> {
    Ok(match row {
        None => None,
        Some((None, _)) => Some((None, known)),
        Some((Some(json), version)) => {
            let (session, version) = decode(id, &json, version)?;
            Some((Some(session), version))
        }
    })
}

/// Writes session `id`'s encoded record: inserted when `expected` is `None`, else replaced if
/// it is still at version `expected`. Returns the new version.
pub(super) fn write(
    conn: &mut Connection,
    id: &str,
    json: &str,
    expected: Option<u64>,
) -> Result<u64, Failure> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version = match expected {
        None => {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO sessions (id, version, json, updated_ms) \
                     VALUES (?1, 1, ?2, ?3) ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![id, json, now_ms()])?;
            written(inserted, id)?;
            1
        }
        Some(expected) => {
            let (stored, next) = stored_versions(id, expected)?;
            let updated = tx
                .prepare_cached(
                    "UPDATE sessions SET version = ?3, json = ?2, updated_ms = ?5 \
                     WHERE id = ?1 AND version = ?4",
                )?
                .execute(params![id, json, next, stored, now_ms()])?;
            written(updated, id)?;
            expected + 1
        }
    };
    tx.commit()?;
    Ok(version)
}
