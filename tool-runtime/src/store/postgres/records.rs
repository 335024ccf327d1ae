//! Turn and task rows: the statements of their tables, and the write of one with its claim, its
//! request index and its notification, in one transaction.

use std::collections::BTreeSet;

use sqlx_core::query::query;

use super::claims::{check_claim, take_lease};
use super::{CHANNEL, Failure, PostgresStore};
use crate::store::rows::{stored_versions, written};
use crate::store::{Claim, LeaseKind, Written};

/// A `NOTIFY` payload must stay under 8000 bytes; the id in it is for people reading the
/// channel (the store wakes every waiter whatever it says), so a long one is cut.
const PAYLOAD_ID_BYTES: usize = 200;

impl PostgresStore {
    /// A turn or task write: the claim check, the versioned write, the lease, the request
    /// index and the notification, in one transaction.
    pub(super) async fn write_record(
        &self,
        sql: &RecordSql,
        row: RecordRow<'_>,
        expected: Option<u64>,
        claim: Claim<'_>,
    ) -> Result<Written, Failure> {
        let id = row.id;
        let mut tx = self.pool.begin().await?;
        check_claim(&mut tx, sql, id, claim).await?;
        let version = match expected {
            None => {
                let inserted = query(sql.insert)
                    .bind(id)
                    .bind(row.session_id)
                    .bind(row.status)
                    .bind(&row.json)
                    .bind(row.wake_at)
                    .execute(&mut *tx)
                    .await?;
                written(inserted.rows_affected(), id)?;
                1
            }
            Some(expected) => {
                let (stored, next) = stored_versions(id, expected)?;
                let updated = query(sql.update)
                    .bind(id)
                    .bind(row.session_id)
                    .bind(row.status)
                    .bind(&row.json)
                    .bind(row.wake_at)
                    .bind(next)
                    .bind(stored)
                    .execute(&mut *tx)
                    .await?;
                written(updated.rows_affected(), id)?;
                expected + 1
            }
        };
        let lease = take_lease(&mut tx, sql, id, claim).await?;
        if !row.requests.is_empty() {
            // The index only grows: a request of a closed step still resolves to its record,
            // so a late answer is recognised as an answer to a settled request.
            query(sql.index)
                .bind(&row.requests)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload(sql.kind, id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Written { version, lease })
    }
}

/// The statements of a record table with leases (turns or tasks). Binds: `insert` takes
/// `$1 id, $2 session_id, $3 status, $4 json, $5 wake_at`; `update` those and `$6` the new
/// version, `$7` the expected one; `index` `$1` the request ids and `$2` the record id.
pub(super) struct RecordSql {
    pub(super) kind: LeaseKind,
    /// Locks the row and reads its lease and the database clock.
    pub(super) lock: &'static str,
    insert: &'static str,
    update: &'static str,
    /// Gives the row a new token and lease: `$1 id, $2 owner, $3 ttl (ms)`.
    pub(super) take: &'static str,
    index: &'static str,
}

pub(super) const TURNS: RecordSql = RecordSql {
    kind: LeaseKind::Turn,
    lock: concat!(
        "SELECT lease_token, lease_expires, ",
        now_ms!(),
        " FROM turns WHERE id = $1 FOR UPDATE"
    ),
    // `updated` takes the next number of the store-wide write sequence at every write.
    insert: "INSERT INTO turns (id, session_id, status, version, json, updated, wake_at) \
             VALUES ($1, $2, $3, 1, $4, nextval('turns_updated'), $5) ON CONFLICT (id) DO NOTHING",
    update: "UPDATE turns SET session_id = $2, status = $3, version = $6, json = $4, \
             updated = nextval('turns_updated'), wake_at = $5 WHERE id = $1 AND version = $7",
    take: concat!(
        "UPDATE turns SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO requests (request_id, turn_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET turn_id = excluded.turn_id",
};

pub(super) const TASKS: RecordSql = RecordSql {
    kind: LeaseKind::Task,
    lock: concat!(
        "SELECT lease_token, lease_expires, ",
        now_ms!(),
        " FROM tasks WHERE id = $1 FOR UPDATE"
    ),
    // A task keeps its session and its place in creation order: `update` leaves `$2` unused
    // (sqlx declares every parameter's type, so Postgres accepts that).
    insert: "INSERT INTO tasks (id, session_id, status, version, json, created, wake_at) \
             VALUES ($1, $2, $3, 1, $4, nextval('tasks_created'), $5) ON CONFLICT (id) DO NOTHING",
    update: "UPDATE tasks SET status = $3, version = $6, json = $4, wake_at = $5 \
             WHERE id = $1 AND version = $7",
    take: concat!(
        "UPDATE tasks SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO task_requests (request_id, task_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET task_id = excluded.task_id",
};

/// The columns of a record write.
pub(super) struct RecordRow<'a> {
    pub(super) id: &'a str,
    pub(super) session_id: &'a str,
    pub(super) status: &'static str,
    pub(super) json: String,
    pub(super) wake_at: Option<i64>,
    pub(super) requests: Vec<String>,
}

/// The request ids to index, sorted and without repeats: one upsert cannot touch a row twice,
/// and a fixed order keeps two writers indexing the same ids from deadlocking.
pub(super) fn request_index(ids: Vec<&str>) -> Vec<String> {
    let ids: BTreeSet<&str> = ids.into_iter().collect();
    ids.into_iter().map(str::to_owned).collect()
}

fn payload(kind: LeaseKind, id: &str) -> String {
    let mut end = id.len().min(PAYLOAD_ID_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{kind}:{}", &id[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_is_cut_in_the_payload_at_a_char_boundary() {
        let id = "é".repeat(PAYLOAD_ID_BYTES);
        let payload = payload(LeaseKind::Task, &id);
        assert!(payload.starts_with("task:é"), "{payload}");
        assert!(payload.len() <= "task:".len() + PAYLOAD_ID_BYTES);
    }

    #[test]
    fn the_request_index_is_sorted_without_repeats() {
        assert_eq!(request_index(vec!["b", "a", "b"]), ["a", "b"]);
    }
}
