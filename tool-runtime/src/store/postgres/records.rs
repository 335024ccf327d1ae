//! Turn and task rows: the write of one with its claim, its request index and its
//! notification, in one transaction.

use std::collections::BTreeSet;

use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;

use super::claims::{check_claim, take_lease};
use super::tables::RecordSql;
use super::{CHANNEL, Failure, PostgresStore};
use crate::record::{StepPatch, TurnRecord};
use crate::store::rows::{decode_turn, encode, requests_to_index, stored_versions, written};
use crate::store::{Appended, Claim, LeaseKind, Written};

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
        let stored: Option<String> = match expected {
            None => None,
            Some(_) => query_scalar::<_, Option<String>>(sql.marker)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .flatten(),
        };
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
                if let Some(absorbed) = sql.absorbed {
                    query(absorbed).bind(id).execute(&mut *tx).await?;
                }
                expected + 1
            }
        };
        let lease = take_lease(&mut tx, sql, id, claim).await?;
        // The index only grows: a request of a closed step still resolves to its record, so a
        // late answer is recognised as an answer to a settled request. Only the requests the
        // record's last write did not hold are indexed (`rows::requests_to_index`).
        let ids: Vec<&str> = row.requests.iter().map(String::as_str).collect();
        let (new, marker) = requests_to_index(&ids, stored.as_deref());
        let new = request_index(new);
        if !new.is_empty() {
            query(sql.index)
                .bind(&new)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        let appended = row.appended;
        super::conversation::insert(
            &mut tx,
            row.session_id,
            id,
            appended.first,
            appended.messages,
        )
        .await?;
        query(sql.mark)
            .bind(id)
            .bind(&marker)
            .execute(&mut *tx)
            .await?;
        query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload(sql.kind, id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Written { version, lease })
    }
}

impl PostgresStore {
    /// Turn `id` with the answers recorded beside it applied, read in one statement (one
    /// snapshot: a write cannot fall between the record and its patches).
    pub(super) async fn read_turn(&self, id: &str) -> Result<Option<(TurnRecord, u64)>, Failure> {
        let row: Option<(String, i64, Vec<String>)> = query_as(
            "SELECT t.json, t.version, coalesce((SELECT array_agg(p.json ORDER BY p.seq) \
             FROM turn_patches p WHERE p.turn_id = t.id), '{}') FROM turns t WHERE t.id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row
            .map(|(json, version, patches)| decode_turn(id, &json, version, &patches))
            .transpose()?)
    }

    /// Records an answer's patch beside turn `id` at version `expected` (see
    /// [`crate::Store::settle_request`]), and wakes the other instances' waiters.
    pub(super) async fn settle_turn_request(
        &self,
        id: &str,
        patch: &StepPatch,
        expected: u64,
    ) -> Result<u64, Failure> {
        let json = encode(id, patch)?;
        let (stored, next) = stored_versions(id, expected)?;
        let mut tx = self.pool.begin().await?;
        let updated = query(
            "UPDATE turns SET version = $2, updated = nextval('turns_updated') \
             WHERE id = $1 AND version = $3",
        )
        .bind(id)
        .bind(next)
        .bind(stored)
        .execute(&mut *tx)
        .await?;
        written(updated.rows_affected(), id)?;
        query("INSERT INTO turn_patches (turn_id, seq, json) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(next)
            .bind(&json)
            .execute(&mut *tx)
            .await?;
        query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(payload(LeaseKind::Turn, id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(expected + 1)
    }
}

/// The columns of a record write.
pub(super) struct RecordRow<'a> {
    pub(super) id: &'a str,
    pub(super) session_id: &'a str,
    pub(super) status: &'static str,
    pub(super) json: String,
    pub(super) wake_at: Option<i64>,
    /// The record's request ids, in its order.
    pub(super) requests: Vec<String>,
    /// The conversation's messages a turn's write appends (none for a task).
    pub(super) appended: Appended<'a>,
}

/// The request ids of a record, owned.
pub(super) fn owned(ids: Vec<&str>) -> Vec<String> {
    ids.into_iter().map(str::to_owned).collect()
}

/// The request ids to index, sorted and without repeats: one upsert cannot touch a row twice,
/// and a fixed order keeps two writers indexing the same ids from deadlocking.
fn request_index(ids: Vec<&str>) -> Vec<String> {
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
