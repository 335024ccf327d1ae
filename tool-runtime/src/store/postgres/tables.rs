//! The statements of the record tables with leases: turns and tasks.

use crate::store::LeaseKind;

/// The statements of a record table with leases (turns or tasks). Binds: `insert` takes
/// `$1 id, $2 session_id, $3 status, $4 json, $5 wake_at`; `update` those and `$6` the new
/// version, `$7` the expected one; `index` `$1` the request ids and `$2` the record id.
pub(super) struct RecordSql {
    pub(super) kind: LeaseKind,
    /// Locks the row and reads its lease and the database clock.
    pub(super) lock: &'static str,
    pub(super) insert: &'static str,
    pub(super) update: &'static str,
    /// Gives the row a new token and lease: `$1 id, $2 owner, $3 ttl (ms)`.
    pub(super) take: &'static str,
    pub(super) index: &'static str,
    /// Reads the `indexed` marker of the record's last write and the wake-up time it set:
    /// `$1 id`.
    pub(super) marker: &'static str,
    /// Stores the `indexed` marker of this write: `$1 id, $2 marker`.
    pub(super) mark: &'static str,
    /// `mark` for a write that also keeps a closed step in the record's step history (turns
    /// only): `$3` the step's index, `$4` its JSON. The upsert rides in the same statement, so
    /// keeping the step costs the write no round trip.
    pub(super) mark_step: Option<&'static str>,
    /// Drops what was recorded beside the record and the update has taken in: `$1 id`.
    pub(super) absorbed: Option<&'static str>,
}

pub(super) const TURNS: RecordSql = RecordSql {
    kind: LeaseKind::Turn,
    lock: concat!(
        "SELECT lease_token, lease_expires, ",
        now_ms!(),
        " FROM turns WHERE id = $1 FOR UPDATE"
    ),
    // `updated` takes the next number of the store-wide write sequence at every write.
    // `finished_ms` is set by the server's clock when the status becomes a finished one, and
    // kept while it stays one.
    insert: concat!(
        "INSERT INTO turns (id, session_id, status, version, json, updated, wake_at, \
         finished_ms) VALUES ($1, $2, $3, 1, $4, nextval('turns_updated'), $5, \
         CASE WHEN $3 IN ('completed', 'cancelled') THEN ",
        now_ms!(),
        " END) ON CONFLICT (id) DO NOTHING"
    ),
    update: concat!(
        "UPDATE turns SET session_id = $2, status = $3, version = $6, json = $4, \
         updated = nextval('turns_updated'), wake_at = $5, finished_ms = CASE WHEN $3 IN \
         ('completed', 'cancelled') THEN coalesce(finished_ms, ",
        now_ms!(),
        ") END WHERE id = $1 AND version = $7"
    ),
    take: concat!(
        "UPDATE turns SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO requests (request_id, turn_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET turn_id = excluded.turn_id",
    marker: "SELECT indexed, wake_at FROM turns WHERE id = $1",
    mark: "UPDATE turns SET indexed = $2 WHERE id = $1",
    // A step closed again with the same index replaces its row; a row already holding the same
    // JSON (the step the previous write carried, unchanged) is not written again. A
    // data-modifying CTE runs whether or not the statement reads it.
    mark_step: Some(
        "WITH kept AS (INSERT INTO turn_steps (turn_id, step, json) VALUES ($1, $3, $4) \
         ON CONFLICT (turn_id, step) DO UPDATE SET json = excluded.json \
         WHERE turn_steps.json <> excluded.json) \
         UPDATE turns SET indexed = $2 WHERE id = $1",
    ),
    absorbed: Some("DELETE FROM turn_patches WHERE turn_id = $1"),
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
    insert: concat!(
        "INSERT INTO tasks (id, session_id, status, version, json, created, wake_at, \
         finished_ms) VALUES ($1, $2, $3, 1, $4, nextval('tasks_created'), $5, \
         CASE WHEN $3 IN ('finished', 'cancelled') THEN ",
        now_ms!(),
        " END) ON CONFLICT (id) DO NOTHING"
    ),
    update: concat!(
        "UPDATE tasks SET status = $3, version = $6, json = $4, wake_at = $5, \
         finished_ms = CASE WHEN $3 IN ('finished', 'cancelled') THEN coalesce(finished_ms, ",
        now_ms!(),
        ") END WHERE id = $1 AND version = $7"
    ),
    take: concat!(
        "UPDATE tasks SET lease_owner = $2, lease_token = lease_token + 1, lease_expires = ",
        now_ms!(),
        " + $3 WHERE id = $1 RETURNING lease_token"
    ),
    index: "INSERT INTO task_requests (request_id, task_id) SELECT unnest($1::text[]), $2 \
            ON CONFLICT (request_id) DO UPDATE SET task_id = excluded.task_id",
    marker: "SELECT indexed, wake_at FROM tasks WHERE id = $1",
    mark: "UPDATE tasks SET indexed = $2 WHERE id = $1",
    mark_step: None,
    absorbed: None,
};
