//! Turn and task rows: the write of one with its claim, its request index, a turn's closed
//! step in its history and, when a waiter on some instance needs it, its notification, in one
//! transaction.
//!
//! A notifying commit is costly beyond its own statement: PostgreSQL serialises the commits of
//! every transaction that sent a `NOTIFY`, cluster-wide, so that they cannot share a WAL flush.
//! A write therefore notifies only what a waiter of [`Store::changed`](crate::Store::changed)
//! acts on (see [`Announce`]); nothing else needs one: an answer, a claim or a closed step is
//! taken up by the instance that wrote it, and an expired lease is found by the take-over
//! scan's poll (a lease expires with time, not with a write).

use std::collections::BTreeSet;
use std::ops::Range;

use super::claims::{check_claim, take_lease};
use super::tables::RecordSql;
use super::{CHANNEL, Failure, PostgresStore};
use crate::record::{StepPatch, TaskRecord, TurnRecord};
use crate::store::rows::{decode_turn, encode, requests_to_index, stored_versions, written};
use crate::store::{Appended, Claim, LeaseKind, Written};
use sqlx_core::query::query;
use sqlx_core::query_as::query_as;

/// A `NOTIFY` payload must stay under 8000 bytes; the id in it is for people reading the
/// channel (the listener reads only the kind and the wake-up time), so a long one is cut.
const PAYLOAD_ID_BYTES: usize = 200;

impl PostgresStore {
    /// A turn or task write: the claim check, the versioned write, the lease, the request
    /// index and, when [`Announce`] says a waiter needs it, the notification, in one
    /// transaction.
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
        let (stored, stored_wake): (Option<String>, Option<i64>) = match expected {
            None => (None, None),
            Some(_) => query_as(sql.marker)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .unwrap_or_default(),
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
        // The closed step a turn write carries goes into its history with the marker, in one
        // statement (see `RecordSql::mark_step`).
        match (&row.step, sql.mark_step) {
            (Some((index, range)), Some(mark_step)) => {
                query(mark_step)
                    .bind(id)
                    .bind(&marker)
                    .bind(index)
                    .bind(&row.json[range.clone()])
                    .execute(&mut *tx)
                    .await?
            }
            _ => {
                query(sql.mark)
                    .bind(id)
                    .bind(&marker)
                    .execute(&mut *tx)
                    .await?
            }
        };
        if let Some(payload) = row.announce.payload(sql.kind, id, row.wake_at, stored_wake) {
            query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(&mut *tx)
                .await?;
        }
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
    /// [`crate::Store::settle_request`]). It notifies nobody: the instance that answers takes
    /// the turn up itself, and a patch changes no wake-up time (the row's `wake_at` stays as the
    /// last whole write left it; a question answered early only costs the timer scan a look).
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
    /// The closed step a turn's write keeps in its step history, its index and where its JSON
    /// is in `json` (none for a task, or a turn without one).
    pub(super) step: Option<(i64, Range<usize>)>,
    /// Whether the write notifies.
    pub(super) announce: Announce,
}

/// What a record write tells the other instances (`NOTIFY`), for the two kinds of waiters of
/// [`Store::changed`](crate::Store::changed):
///
/// - the timer scan of every instance's worker needs to know when a wake-up comes due: a write
///   that sets a wake-up time other than the one its row held says when (a turn's sleeping call
///   or question deadline, a task's sleep or question deadline); the listener wakes the waiters
///   at that time, not at the write;
/// - waiters of a task's results (`task_wait`, a cancel waiting for the cleanup) need a task
///   write that gives them something to read: a result not yet delivered, or the task's end.
///
/// Every other write stays silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Announce {
    /// Only a new wake-up time.
    WakeUp,
    /// Always: the write gives a waiter of the record something to read (and its wake-up time,
    /// if it has one).
    Always,
}

impl Announce {
    /// How a write of `task` announces itself.
    pub(super) fn task(task: &TaskRecord) -> Announce {
        let result_to_read = task
            .calls
            .iter()
            .any(|call| call.result.is_some() && !call.delivered);
        if task.status.is_over() || result_to_read {
            Announce::Always
        } else {
            Announce::WakeUp
        }
    }

    /// The payload of the write of record `id` of `kind` with wake-up time `wake_at`, its row
    /// having held `stored`; `None` when the write notifies nobody.
    fn payload(
        self,
        kind: LeaseKind,
        id: &str,
        wake_at: Option<i64>,
        stored: Option<i64>,
    ) -> Option<String> {
        // A wake-up time the row already held was announced by the write that set it.
        let wake = wake_at.filter(|at| Some(*at) != stored);
        match self {
            Announce::WakeUp => wake.map(|at| payload(Heard::WakeUp(at), kind, id)),
            Announce::Always => Some(payload(Heard::Change(wake), kind, id)),
        }
    }
}

/// What the listener makes of a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Heard {
    /// A wake-up comes due at this time (Unix milliseconds): wake the waiters then.
    WakeUp(i64),
    /// A record a waiter reads changed (and sets this wake-up time): wake them now.
    Change(Option<i64>),
}

impl Heard {
    /// What `payload` announces. Any other shape (a notification of a toolwright before this
    /// one, during a rolling deploy) is a change: waiters look at once, as they did then.
    pub(super) fn of(payload: &str) -> Heard {
        let mut parts = payload.splitn(4, ':');
        let (what, _kind, wake) = (parts.next(), parts.next(), parts.next());
        let wake = wake.and_then(|wake| wake.parse().ok());
        match (what, wake) {
            (Some("wake"), Some(at)) => Heard::WakeUp(at),
            _ => Heard::Change(wake),
        }
    }
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

/// `what:kind:wake:id`: `wake` or `change`, `turn` or `task`, the wake-up time (Unix
/// milliseconds, empty when none), then the id, last since it may hold a `:`, cut at
/// [`PAYLOAD_ID_BYTES`].
fn payload(heard: Heard, kind: LeaseKind, id: &str) -> String {
    let mut end = id.len().min(PAYLOAD_ID_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    let (what, wake) = match heard {
        Heard::WakeUp(at) => ("wake", Some(at)),
        Heard::Change(wake) => ("change", wake),
    };
    let wake = wake.map(|at| at.to_string()).unwrap_or_default();
    format!("{what}:{kind}:{wake}:{}", &id[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_is_cut_in_the_payload_at_a_char_boundary() {
        let id = "é".repeat(PAYLOAD_ID_BYTES);
        let payload = payload(Heard::Change(None), LeaseKind::Task, &id);
        assert!(payload.starts_with("change:task::é"), "{payload}");
        assert!(payload.len() <= "change:task::".len() + PAYLOAD_ID_BYTES);
    }

    #[test]
    fn a_write_notifies_a_new_wake_up_time_or_what_a_waiter_reads() {
        let wake = Announce::WakeUp;
        assert_eq!(wake.payload(LeaseKind::Turn, "t", None, None), None);
        assert_eq!(wake.payload(LeaseKind::Turn, "t", None, Some(5)), None);
        assert_eq!(wake.payload(LeaseKind::Turn, "t", Some(5), Some(5)), None);
        assert_eq!(
            wake.payload(LeaseKind::Turn, "t:1", Some(7), Some(5))
                .as_deref(),
            Some("wake:turn:7:t:1")
        );
        assert_eq!(
            wake.payload(LeaseKind::Task, "k", Some(7), None).as_deref(),
            Some("wake:task:7:k")
        );
        let always = Announce::Always;
        assert_eq!(
            always
                .payload(LeaseKind::Task, "k", Some(5), Some(5))
                .as_deref(),
            Some("change:task::k")
        );
        assert_eq!(
            always
                .payload(LeaseKind::Task, "k", Some(6), Some(5))
                .as_deref(),
            Some("change:task:6:k")
        );
    }

    #[test]
    fn the_listener_reads_what_a_payload_announces() {
        let heard = |h, id| Heard::of(&payload(h, LeaseKind::Turn, id));
        assert_eq!(heard(Heard::WakeUp(42), "a:b"), Heard::WakeUp(42));
        assert_eq!(heard(Heard::Change(None), "a:1"), Heard::Change(None));
        assert_eq!(heard(Heard::Change(Some(3)), "a"), Heard::Change(Some(3)));
        // An older toolwright's payload, `kind:id`: a change, looked at at once.
        assert_eq!(Heard::of("turn:12"), Heard::Change(None));
        assert_eq!(Heard::of("task:some-id"), Heard::Change(None));
        assert_eq!(Heard::of(""), Heard::Change(None));
    }

    #[test]
    fn the_request_index_is_sorted_without_repeats() {
        assert_eq!(request_index(vec!["b", "a", "b"]), ["a", "b"]);
    }
}
