//! Workflow tasks in the SQLite file: one row each, the record as JSON with a version, its
//! creation order, its timer, its lease and its finish time in columns of their own.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::Failure;
use super::claims::{OwnedClaim, check_claim, now_ms, take_lease};
use super::requests::{index_requests, indexed_marker};
use crate::record::TaskRecord;
use crate::store::rows::{clamp, decode, encode, stored_versions, task_status_name, written};
use crate::store::{Claim, LeaseKind, StoreError, Written};

/// Task `id` with its version.
pub(super) fn read(conn: &mut Connection, id: &str) -> Result<Option<(TaskRecord, u64)>, Failure> {
    let row = conn
        .prepare_cached("SELECT json, version FROM tasks WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(row
        .map(|(json, version): (String, i64)| decode(id, &json, version))
        .transpose()?)
}

/// A task write, taken from the record before it moves to the connection's thread.
pub(super) struct TaskWrite {
    id: String,
    session_id: String,
    status: &'static str,
    json: String,
    wake_at: Option<i64>,
    requests: Vec<String>,
    expected: Option<u64>,
    claim: OwnedClaim,
}

impl TaskWrite {
    /// The write of `record` at version `expected` (`None`: a new task) under `claim`.
    pub(super) fn new(
        record: &TaskRecord,
        expected: Option<u64>,
        claim: Claim<'_>,
    ) -> Result<TaskWrite, StoreError> {
        Ok(TaskWrite {
            json: encode(&record.id, record)?,
            id: record.id.clone(),
            session_id: record.session_id.clone(),
            status: task_status_name(record.status),
            wake_at: record.wake_at().map(clamp),
            requests: record
                .request_ids()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            expected,
            claim: OwnedClaim::from(claim),
        })
    }
}

/// Inserts the task (`expected` is `None`) or replaces it at version `expected`, in one
/// transaction with its claim checked and taken and its new requests indexed.
pub(super) fn write(conn: &mut Connection, write: &TaskWrite) -> Result<Written, Failure> {
    let TaskWrite {
        id,
        session_id,
        status,
        json,
        wake_at,
        requests,
        expected,
        claim,
    } = write;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now_ms();
    check_claim(&tx, LeaseKind::Task, id, claim, now)?;
    let stored_marker = indexed_marker(&tx, LeaseKind::Task, id, *expected)?;
    let version = match expected {
        None => {
            let created: i64 = tx
                .prepare_cached("SELECT coalesce(max(created), 0) + 1 FROM tasks")?
                .query_row([], |row| row.get(0))?;
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO tasks (id, session_id, status, version, json, created, \
                     wake_at, finished_ms) VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, \
                     CASE WHEN ?3 IN ('finished', 'cancelled') THEN ?7 END) \
                     ON CONFLICT (id) DO NOTHING",
                )?
                .execute(params![id, session_id, status, json, created, wake_at, now])?;
            written(inserted, id)?;
            1
        }
        Some(expected) => {
            let (stored, next) = stored_versions(id, *expected)?;
            let updated = tx
                .prepare_cached(
                    "UPDATE tasks SET status = ?2, version = ?3, json = ?4, wake_at = ?6, \
                     finished_ms = CASE WHEN ?2 IN ('finished', 'cancelled') \
                     THEN coalesce(finished_ms, ?7) END WHERE id = ?1 AND version = ?5",
                )?
                .execute(params![id, status, next, json, stored, wake_at, now])?;
            written(updated, id)?;
            expected + 1
        }
    };
    let lease = take_lease(&tx, LeaseKind::Task, id, claim, now)?;
    index_requests(&tx, LeaseKind::Task, id, requests, stored_marker)?;
    tx.commit()?;
    Ok(Written { version, lease })
}
