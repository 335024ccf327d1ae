//! The request index in the SQLite file: which turn or task each request id belongs to, kept
//! up to date by the writes of those records (only the requests a write adds are indexed).

use rusqlite::{OptionalExtension, params};

use super::Failure;
use crate::store::LeaseKind;
use crate::store::rows::requests_to_index;

/// The `indexed` marker of the record a versioned write replaces (`None` for an insert).
pub(super) fn indexed_marker(
    tx: &rusqlite::Transaction<'_>,
    kind: LeaseKind,
    id: &str,
    expected: Option<u64>,
) -> Result<Option<String>, Failure> {
    if expected.is_none() {
        return Ok(None);
    }
    let sql = match kind {
        LeaseKind::Turn => "SELECT indexed FROM turns WHERE id = ?1",
        LeaseKind::Task => "SELECT indexed FROM tasks WHERE id = ?1",
    };
    Ok(tx
        .prepare_cached(sql)?
        .query_row([id], |row| row.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// Indexes the requests of record `id` that its last write (whose marker was `stored`) did not
/// hold, and stores the new marker (see `rows::requests_to_index`).
pub(super) fn index_requests(
    tx: &rusqlite::Transaction<'_>,
    kind: LeaseKind,
    id: &str,
    requests: &[String],
    stored: Option<String>,
) -> Result<(), Failure> {
    let ids: Vec<&str> = requests.iter().map(String::as_str).collect();
    let (new, marker) = requests_to_index(&ids, stored.as_deref());
    let (index, mark) = match kind {
        LeaseKind::Turn => (
            "INSERT INTO requests (request_id, turn_id) VALUES (?1, ?2) \
             ON CONFLICT (request_id) DO UPDATE SET turn_id = excluded.turn_id",
            "UPDATE turns SET indexed = ?2 WHERE id = ?1",
        ),
        LeaseKind::Task => (
            "INSERT INTO task_requests (request_id, task_id) VALUES (?1, ?2) \
             ON CONFLICT (request_id) DO UPDATE SET task_id = excluded.task_id",
            "UPDATE tasks SET indexed = ?2 WHERE id = ?1",
        ),
    };
    if new.is_empty() && stored.as_deref() == Some(marker.as_str()) {
        // The write holds the requests its last write held: nothing to index or mark.
        return Ok(());
    }
    let mut statement = tx.prepare_cached(index)?;
    for request in new {
        statement.execute([request, id])?;
    }
    tx.prepare_cached(mark)?.execute(params![id, marker])?;
    Ok(())
}
