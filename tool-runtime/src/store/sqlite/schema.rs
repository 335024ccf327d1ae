//! The file's schema: one script per version, the header that marks a file as a toolwright
//! store, and the migration that brings a file up to date.

use std::collections::BTreeSet;

use rusqlite::{Connection, TransactionBehavior, params};
use toolwright_core::Principal;

use super::{Failure, backend};
use crate::record::{TaskRecord, TurnRecord};
use crate::store::rows::{clamp, decode};
use crate::store::{StoreError, UNKNOWN_REQUESTER, requester_key};

/// `PRAGMA application_id` of a toolwright store (ASCII `TWst`), so that opening some other
/// application's SQLite file is refused instead of adding tables to it.
const APPLICATION_ID: i32 = 0x5457_7374;

/// The schema, one script per version: `MIGRATIONS[n]` takes a file from `user_version` `n` to
/// `n + 1`. A released script is never edited; a schema change appends one.
const MIGRATIONS: &[&str] = &[
    SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4, SCHEMA_V5, SCHEMA_V6, SCHEMA_V7, SCHEMA_V8,
    SCHEMA_V9, SCHEMA_V10,
];

/// Version 1.
///
/// `turns.updated` is a store-wide write sequence, not a clock: clocks of two processes disagree
/// and repeat within a millisecond, while the sequence, assigned under the write lock, orders
/// every write exactly. The partial index keeps listing waiting turns proportional to their
/// number, however many finished turns the file holds.
const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    id      TEXT PRIMARY KEY NOT NULL,
    version INTEGER NOT NULL,
    json    TEXT NOT NULL
);
CREATE TABLE turns (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    status     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    json       TEXT NOT NULL,
    updated    INTEGER NOT NULL
);
CREATE INDEX turns_by_update ON turns (updated);
CREATE INDEX turns_waiting ON turns (updated, id) WHERE status = 'waiting';
CREATE INDEX turns_running ON turns (updated, id) WHERE status = 'running';
CREATE TABLE requests (
    request_id TEXT PRIMARY KEY NOT NULL,
    turn_id    TEXT NOT NULL
);
CREATE INDEX requests_by_turn ON requests (turn_id);
CREATE TABLE journal (
    run_id   TEXT NOT NULL,
    position INTEGER NOT NULL,
    json     TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE TABLE approvals (
    session_id TEXT NOT NULL,
    key        TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
";

/// Version 2: workflow tasks, and the index of the questions their bodies ask.
const SCHEMA_V2: &str = "
CREATE TABLE tasks (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    status     TEXT NOT NULL,
    version    INTEGER NOT NULL,
    json       TEXT NOT NULL,
    created    INTEGER NOT NULL
);
CREATE INDEX tasks_by_session ON tasks (session_id, created);
CREATE INDEX tasks_open ON tasks (created, id) WHERE status NOT IN ('finished', 'cancelled');
CREATE TABLE task_requests (
    request_id TEXT PRIMARY KEY NOT NULL,
    task_id    TEXT NOT NULL
);
";

/// Version 3: leases with fencing tokens on running work, and the due times of durable timers.
///
/// `lease_expires` is Unix milliseconds by the system clock of the writing process (processes
/// sharing a SQLite file share a machine, hence a clock); `0` means no lease. `wake_at` is set
/// only while a turn waits or a task sleeps on a timer (and backfilled by the migration).
const SCHEMA_V3: &str = "
ALTER TABLE turns ADD COLUMN wake_at INTEGER;
ALTER TABLE turns ADD COLUMN lease_owner TEXT;
ALTER TABLE turns ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN lease_expires INTEGER NOT NULL DEFAULT 0;
CREATE INDEX turns_due ON turns (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX turns_by_owner ON turns (lease_owner) WHERE status = 'running';
ALTER TABLE tasks ADD COLUMN wake_at INTEGER;
ALTER TABLE tasks ADD COLUMN lease_owner TEXT;
ALTER TABLE tasks ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN lease_expires INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_due ON tasks (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX tasks_leased ON tasks (created, id) WHERE status IN ('running', 'cancelling');
";

/// Version 4: the pinned definitions of remote tools (one row per connection and tool; `json` is
/// the [`PinRecord`](crate::record::PinRecord)).
const SCHEMA_V4: &str = "
CREATE TABLE pins (
    connection TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (connection, tool)
);
";

/// Version 5: `once` grants per requester (`grants` replaces `approvals`, whose rows the
/// migration carries over: see [`carry_grants`]), and what the last write of a turn or task
/// indexed of its requests (`indexed`, see `rows::requests_to_index`), so that a write indexes
/// only the requests it adds.
const SCHEMA_V5: &str = "
CREATE TABLE grants (
    session_id TEXT NOT NULL,
    requester  TEXT NOT NULL,
    key        TEXT NOT NULL,
    PRIMARY KEY (session_id, requester, key)
) WITHOUT ROWID;
ALTER TABLE turns ADD COLUMN indexed TEXT;
ALTER TABLE tasks ADD COLUMN indexed TEXT;
";

/// Version 6: answers recorded beside their turn (`turn_patches`, one
/// [`StepPatch`](crate::record::StepPatch) per answer, `seq` the turn version it made) until the
/// next write of the whole turn takes them in, so that answering one request of a big parked
/// step does not write the step again.
const SCHEMA_V6: &str = "
CREATE TABLE turn_patches (
    turn_id TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
) WITHOUT ROWID;
";

/// Version 7: the model loop's conversation, one row per message, appended and never
/// rewritten, so that a round costs the messages it adds however long the session is.
const SCHEMA_V7: &str = "
CREATE TABLE conversation (
    session_id TEXT NOT NULL,
    position   INTEGER NOT NULL,
    turn_id    TEXT NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (session_id, position)
) WITHOUT ROWID;
";

/// Version 8: attachments, the files tools return, stored once per session and named by id in
/// results, events and conversations. A row holds the bytes (`data`) or, when the runtime keeps
/// them in its sandbox, their path there (`path`): exactly one of the two. A plain rowid table,
/// as rows can be large. And what deleting and retention walk: the indexes of a session's turns
/// and of a task's questions, and when a session was last written and a turn or task finished (Unix
/// milliseconds by the writing process's clock, as leases; rows from before the migration count
/// from the migration).
const SCHEMA_V8: &str = "
CREATE TABLE attachments (
    session_id TEXT NOT NULL,
    id         TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL,
    data       BLOB,
    path       TEXT,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX turns_by_session ON turns (session_id);
CREATE INDEX task_requests_by_task ON task_requests (task_id);
ALTER TABLE sessions ADD COLUMN updated_ms INTEGER;
ALTER TABLE turns ADD COLUMN finished_ms INTEGER;
ALTER TABLE tasks ADD COLUMN finished_ms INTEGER;
UPDATE sessions SET updated_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER);
UPDATE turns SET finished_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER)
    WHERE status IN ('completed', 'cancelled');
UPDATE tasks SET finished_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER)
    WHERE status IN ('finished', 'cancelled');
CREATE INDEX turns_finished ON turns (finished_ms) WHERE finished_ms IS NOT NULL;
";

/// Version 9: the indexes the paged listings read newest first from where the last page
/// ended (`Store::list_sessions`, `list_turns`, `list_tasks`), so that a page costs the same
/// however many records the file holds: sessions by their last write, turns in the statuses
/// without a partial index of their own and turns by session in write order, tasks in
/// creation order. (Turns in write order alone have `turns_by_update`, waiting and running
/// ones `turns_waiting` and `turns_running`, open tasks `tasks_open`, a session's tasks
/// `tasks_by_session`.)
const SCHEMA_V9: &str = "
CREATE INDEX sessions_by_update ON sessions (updated_ms, id);
CREATE INDEX turns_by_status ON turns (status, updated) WHERE status NOT IN ('waiting', 'running');
CREATE INDEX turns_by_session_update ON turns (session_id, updated);
CREATE INDEX tasks_by_creation ON tasks (created);
";

/// Version 10: the history of a turn's closed steps (`Store::turn_steps`), one row per step
/// index holding its [`ClosedStep`](crate::record::ClosedStep) as the turn's write last
/// carried it (`TurnRecord::last_step`), written in the transaction of that write and deleted
/// with the turn. The turns the file holds keep the one closed step their record has: it is
/// copied in (a record that is not valid JSON is left out, not failed on; its turn reads as
/// corrupt anyway).
const SCHEMA_V10: &str = "
CREATE TABLE turn_steps (
    turn_id TEXT NOT NULL,
    step    INTEGER NOT NULL,
    json    TEXT NOT NULL,
    PRIMARY KEY (turn_id, step)
) WITHOUT ROWID;
INSERT INTO turn_steps (turn_id, step, json)
    SELECT id, json_extract(json, '$.last_step.index'), json_extract(json, '$.last_step')
    FROM turns
    WHERE CASE WHEN json_valid(json) THEN json_type(json, '$.last_step') = 'object'
               AND json_type(json, '$.last_step.index') = 'integer' ELSE 0 END;
";

/// The file's schema version, after checking the file is a toolwright store this build can use.
pub(super) fn schema_version(conn: &Connection, place: &str) -> Result<usize, StoreError> {
    let fail = |error: rusqlite::Error| backend(place, "cannot read the file header", &error);
    let application: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(fail)?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(fail)?;
    let not_ours = || {
        StoreError::Backend(format!(
            "sqlite `{place}` is not a toolwright store (application_id {application:#x}, \
             user_version {version}); give the path of a toolwright store or of a new file"
        ))
    };
    if application != APPLICATION_ID {
        if application != 0 || version != 0 {
            return Err(not_ours());
        }
        // A file that was never migrated must be empty: anything else belongs to someone.
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .map_err(fail)?;
        if tables != 0 {
            return Err(not_ours());
        }
    }
    match usize::try_from(version) {
        Ok(version) if version <= MIGRATIONS.len() => Ok(version),
        _ => Err(StoreError::Backend(format!(
            "sqlite `{place}` has schema version {version}, but this build of toolwright knows \
             versions up to {known}: a newer toolwright wrote it. Run the newer toolwright, or \
             restore a copy of the file made before the upgrade",
            known = MIGRATIONS.len()
        ))),
    }
}

/// Brings the schema to the newest version. Idempotent; the check is repeated under the write
/// lock because another process may be migrating the same file at the same moment.
pub(super) fn migrate(conn: &mut Connection, place: &str) -> Result<(), StoreError> {
    if schema_version(conn, place)? == MIGRATIONS.len() {
        return Ok(());
    }
    let fail = |error: rusqlite::Error| backend(place, "cannot migrate the schema", &error);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(fail)?;
    let from = schema_version(&tx, place)?;
    for script in &MIGRATIONS[from..] {
        tx.execute_batch(script).map_err(fail)?;
    }
    let failed = |error| match error {
        Failure::Sqlite(error) => fail(error),
        Failure::Store(error) => error,
    };
    if (1..3).contains(&from) {
        backfill_wake_at(&tx).map_err(failed)?;
    }
    if from < 5 {
        carry_grants(&tx).map_err(failed)?;
    }
    // Both pragmas write the file header inside the transaction: the schema and its version
    // commit together or not at all.
    tx.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(fail)?;
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)
        .map_err(fail)?;
    tx.commit().map_err(fail)
}

/// Version 5 remembers `once` grants per requester. A grant remembered before had none: in a
/// session whose turns were all taken on behalf of one requester, it was given for that
/// requester's calls and stays theirs; in any other session it goes to
/// [`UNKNOWN_REQUESTER`], which matches no call (each requester is asked again, once). A turn
/// whose record cannot be read counts as a requester of its own: when in doubt, ask.
fn carry_grants(tx: &rusqlite::Transaction<'_>) -> Result<(), Failure> {
    let sessions: Vec<String> = tx
        .prepare("SELECT DISTINCT session_id FROM approvals")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for session in sessions {
        let records: Vec<String> = tx
            .prepare("SELECT json FROM turns WHERE session_id = ?1")?
            .query_map([&session], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        let acted: BTreeSet<String> = records
            .iter()
            .map(|json| {
                serde_json::from_str::<serde_json::Value>(json)
                    .ok()
                    .and_then(|turn| {
                        let current = turn.get("current").cloned().unwrap_or_default();
                        serde_json::from_value::<Option<Principal>>(current).ok()
                    })
                    .map_or_else(
                        || UNKNOWN_REQUESTER.to_owned(),
                        |current| requester_key(current.as_ref()),
                    )
            })
            .collect();
        let requester = match acted.into_iter().collect::<Vec<_>>().as_slice() {
            [one] => one.clone(),
            _ => UNKNOWN_REQUESTER.to_owned(),
        };
        tx.execute(
            "INSERT INTO grants (session_id, requester, key) \
             SELECT session_id, ?2, key FROM approvals WHERE session_id = ?1 \
             ON CONFLICT DO NOTHING",
            params![session, requester],
        )?;
    }
    tx.execute_batch("DROP TABLE approvals;")?;
    Ok(())
}

/// Version 3 indexes due timers in `wake_at`: set it for the turns waiting and the tasks
/// sleeping when the file was migrated, from their records.
fn backfill_wake_at(tx: &rusqlite::Transaction<'_>) -> Result<(), Failure> {
    let turns: Vec<(String, String, i64)> = tx
        .prepare("SELECT id, json, version FROM turns WHERE status = 'waiting'")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (id, json, version) in turns {
        let (turn, _): (TurnRecord, u64) = decode(&id, &json, version)?;
        if let Some(at) = turn.wake_at() {
            tx.execute(
                "UPDATE turns SET wake_at = ?2 WHERE id = ?1",
                params![id, clamp(at)],
            )?;
        }
    }
    let tasks: Vec<(String, String, i64)> = tx
        .prepare("SELECT id, json, version FROM tasks WHERE status = 'sleeping'")?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (id, json, version) in tasks {
        let (task, _): (TaskRecord, u64) = decode(&id, &json, version)?;
        if let Some(at) = task.wake_at() {
            tx.execute(
                "UPDATE tasks SET wake_at = ?2 WHERE id = ?1",
                params![id, clamp(at)],
            )?;
        }
    }
    Ok(())
}
