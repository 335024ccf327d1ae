//! How both SQL stores put records into rows: status columns, versions, JSON, fencing tokens.
//! One definition, so the two backends cannot drift apart.

use serde::de::DeserializeOwned;

mod turn_json;

pub(super) use turn_json::encode_turn;

use super::{Lease, StoreError};
use crate::record::{
    AttachmentPlace, AttachmentRecord, ClosedStep, ConversationEntry, StepPatch, TaskStatus,
    TurnRecord, TurnStatus,
};

/// The column value of a turn status. It is part of both schemas (their partial indexes name
/// `waiting` and `running`), so it is spelt here rather than borrowed from the JSON encoding.
pub(super) fn status_name(status: TurnStatus) -> &'static str {
    match status {
        TurnStatus::Active => "active",
        TurnStatus::Waiting => "waiting",
        TurnStatus::Running => "running",
        TurnStatus::Completed => "completed",
        TurnStatus::Cancelled => "cancelled",
    }
}

/// The column value of a task status (part of the schemas, like [`status_name`]).
pub(super) fn task_status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Running => "running",
        TaskStatus::Waiting => "waiting",
        TaskStatus::Sleeping { .. } => "sleeping",
        TaskStatus::Idle => "idle",
        TaskStatus::Cancelling => "cancelling",
        TaskStatus::Finished => "finished",
        TaskStatus::Cancelled => "cancelled",
    }
}

/// `expected` and its successor as 64-bit SQL integers. A version the column cannot hold
/// matches no row: a conflict, like any other version that is not the stored one.
pub(super) fn stored_versions(id: &str, expected: u64) -> Result<(i64, i64), StoreError> {
    i64::try_from(expected)
        .ok()
        .and_then(|expected| Some((expected, expected.checked_add(1)?)))
        .ok_or_else(|| StoreError::Conflict(id.to_owned()))
}

/// A conflict when the version check (or the insert's uniqueness) left the table as it was.
/// `rows` is the count the statement reports (`usize` in rusqlite, `u64` in sqlx).
pub(super) fn written<N: PartialEq + Default>(rows: N, id: &str) -> Result<(), StoreError> {
    if rows == N::default() {
        Err(StoreError::Conflict(id.to_owned()))
    } else {
        Ok(())
    }
}

pub(super) fn encode<T: serde::Serialize>(id: &str, record: &T) -> Result<String, StoreError> {
    serde_json::to_string(record)
        .map_err(|error| StoreError::Backend(format!("cannot encode record `{id}`: {error}")))
}

pub(super) fn decode<T: DeserializeOwned>(
    id: &str,
    json: &str,
    version: i64,
) -> Result<(T, u64), StoreError> {
    let corrupt = |error: String| StoreError::Corrupt {
        id: id.to_owned(),
        error,
    };
    let version = u64::try_from(version)
        .map_err(|_| corrupt(format!("the stored version {version} is negative")))?;
    let record = serde_json::from_str(json).map_err(|error| corrupt(error.to_string()))?;
    Ok((record, version))
}

/// Turn `id` as stored (`json`, `version`) with the patches recorded beside it since
/// (`patches`, oldest first) applied: what [`super::Store::turn`] returns.
pub(super) fn decode_turn(
    id: &str,
    json: &str,
    version: i64,
    patches: &[String],
) -> Result<(TurnRecord, u64), StoreError> {
    let (mut turn, version): (TurnRecord, u64) = decode(id, json, version)?;
    for patch in patches {
        let patch: StepPatch =
            serde_json::from_str(patch).map_err(|error| StoreError::Corrupt {
                id: id.to_owned(),
                error: format!("an answer stored beside the turn: {error}"),
            })?;
        if !turn.apply(&patch) {
            return Err(super::contract::unpatchable(id, &patch));
        }
    }
    Ok((turn, version))
}

/// One stored message of session `session_id`'s conversation (`position`, `turn_id`, `json`).
pub(super) fn decode_message(
    session_id: &str,
    (position, turn_id, json): (i64, String, String),
) -> Result<ConversationEntry, StoreError> {
    let corrupt = |error: String| StoreError::Corrupt {
        id: format!("{session_id}#{position}"),
        error,
    };
    let message = serde_json::from_str(&json).map_err(|error| corrupt(error.to_string()))?;
    let position = u64::try_from(position)
        .map_err(|_| corrupt(format!("the stored position {position} is negative")))?;
    Ok(ConversationEntry {
        position,
        turn_id,
        message,
    })
}

/// The columns a page of a turn's steps reads: the index and the JSON.
pub(super) type StepRow = (i64, String);

/// The page of turn `turn_id`'s steps that read up to `limit + 1` `rows`, oldest first (the
/// one more tells whether a next page exists); the next page's cursor is the last step's index.
pub(super) fn step_page(
    turn_id: &str,
    mut rows: Vec<StepRow>,
    limit: usize,
) -> Result<super::Page<ClosedStep>, StoreError> {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = rows
        .last()
        .filter(|_| more)
        .map(|(index, _)| super::Cursor::new(index.to_string()));
    let items = rows
        .into_iter()
        .map(|(index, json)| {
            serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
                id: format!("{turn_id}#{index}"),
                error: format!("a closed step of the turn's history: {error}"),
            })
        })
        .collect::<Result<Vec<ClosedStep>, _>>()?;
    Ok(super::Page { items, next })
}

/// A time in Unix milliseconds as a 64-bit SQL integer (saturating).
pub(super) fn clamp(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Refuses with [`StoreError::Fenced`] unless the record's stored token (`None`: no record) is
/// still `lease`'s.
pub(super) fn check_token(lease: &Lease, stored: Option<i64>) -> Result<(), StoreError> {
    if stored.and_then(|t| u64::try_from(t).ok()) == Some(lease.token) {
        Ok(())
    } else {
        Err(StoreError::Fenced {
            kind: lease.kind,
            id: lease.id.clone(),
            token: lease.token,
        })
    }
}

/// The requests of a turn or task write that the request index does not hold for it yet, and
/// the marker to store with the write (`indexed`): the number of request ids the record holds
/// and a digest of them. `stored` is the marker of the record's last write (`None` for an
/// insert, or a record written before markers existed).
///
/// Requests are appended as a step goes on, so a write usually holds the ids its last write
/// held, in the same order, and then some: when the first `n` ids still have the stored digest,
/// only the rest are new. Any other change indexes every id again. An answer to one of 1,000
/// parked requests thus touches no index row, where it used to rewrite 1,000.
pub(super) fn requests_to_index<'a>(
    ids: &[&'a str],
    stored: Option<&str>,
) -> (Vec<&'a str>, String) {
    /// 64-bit FNV-1a: stable across builds and platforms (a marker outlives the process), and
    /// enough to notice a changed list of random request ids.
    fn fold(hash: u64, id: &str) -> u64 {
        id.bytes().chain([0]).fold(hash, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
    const START: u64 = 0xcbf2_9ce4_8422_2325;
    if ids.is_empty() {
        // The marker of no requests (`format!` below would spell it so): the usual write of
        // a step of reads holds none, and neither did the one before it.
        return (Vec::new(), "0:cbf29ce484222325".to_owned());
    }
    let known = stored.and_then(|marker| {
        let (count, digest) = marker.split_once(':')?;
        Some((
            count.parse::<usize>().ok()?,
            u64::from_str_radix(digest, 16).ok()?,
        ))
    });
    let mut hash = START;
    let mut first_new = 0;
    for (position, id) in ids.iter().enumerate() {
        if known == Some((position, hash)) {
            first_new = position;
        }
        hash = fold(hash, id);
    }
    if known == Some((ids.len(), hash)) {
        first_new = ids.len();
    }
    let marker = format!("{}:{hash:016x}", ids.len());
    (ids[first_new..].to_vec(), marker)
}

/// The pins of `connection` from their JSON rows.
pub(super) fn decode_pins(
    connection: &str,
    rows: &[String],
) -> Result<Vec<crate::record::PinRecord>, StoreError> {
    rows.iter()
        .map(|json| {
            serde_json::from_str(json).map_err(|error| StoreError::Corrupt {
                id: format!("pins of `{connection}`"),
                error: error.to_string(),
            })
        })
        .collect()
}

/// The columns `data` and `path` of `place`.
pub(super) fn split(place: &AttachmentPlace) -> (Option<&[u8]>, Option<&str>) {
    match place {
        AttachmentPlace::Stored(bytes) => (Some(bytes.as_slice()), None),
        AttachmentPlace::Sandbox(path) => (None, Some(path.as_str())),
    }
}

/// The columns of an attachment's row (media type, size, bytes, sandbox path) as its record.
pub(super) fn decode_attachment(
    session_id: &str,
    id: &str,
    (media_type, size, data, path): (String, i64, Option<Vec<u8>>, Option<String>),
) -> Result<AttachmentRecord, StoreError> {
    Ok(AttachmentRecord {
        session_id: session_id.to_owned(),
        id: id.to_owned(),
        media_type,
        size: size.max(0) as u64,
        place: joined(session_id, id, data, path)?,
    })
}

/// The place stored as the columns `data` and `path`: exactly one of them is set.
fn joined(
    session_id: &str,
    id: &str,
    data: Option<Vec<u8>>,
    path: Option<String>,
) -> Result<AttachmentPlace, StoreError> {
    match (data, path) {
        (Some(bytes), None) => Ok(AttachmentPlace::Stored(bytes)),
        (None, Some(path)) => Ok(AttachmentPlace::Sandbox(path)),
        _ => Err(StoreError::Corrupt {
            id: format!("{session_id}/{id}"),
            error: "an attachment row must hold either its bytes or its sandbox path".into(),
        }),
    }
}

/// The refusal to delete session `session_id` while `what` is not over.
pub(super) fn busy(session_id: &str, what: &str) -> StoreError {
    StoreError::Busy {
        session_id: session_id.to_owned(),
        what: what.to_owned(),
    }
}

/// What a busy turn `id` in `status` is doing, for [`busy`]: a cancelled one is still held by a
/// step that runs (in this or another process).
pub(super) fn turn_busy(id: &str, status: &str) -> String {
    if status == "cancelled" {
        format!("turn `{id}` was cancelled while a step of it still runs")
    } else {
        format!("turn `{id}` is {status}")
    }
}

/// `n` as a column value (a count or a limit), saturating.
pub(super) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Milliseconds in `duration` as a column value, saturating.
pub(super) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The range of run ids of turn `turn_id`'s calls (`<turn>/<call>`): from `<turn>/` up to, not
/// including, `<turn>0` (`0` follows `/`), a prefix scan of the journal's key that no
/// character of a call id can escape.
pub(super) fn journal_range(turn_id: &str) -> (String, String) {
    (format!("{turn_id}/"), format!("{turn_id}0"))
}

/// The turn status whose column value is `name` ([`status_name`]); an unknown one makes the
/// row of turn `id` corrupt.
pub(super) fn turn_status_of(id: &str, name: &str) -> Result<TurnStatus, StoreError> {
    use TurnStatus::{Active, Cancelled, Completed, Running, Waiting};
    [Active, Waiting, Running, Completed, Cancelled]
        .into_iter()
        .find(|status| status_name(*status) == name)
        .ok_or_else(|| unknown_status(id, name))
}

/// The task status whose column value is `name` ([`task_status_name`]), a sleeping task's
/// end read from its `wake_at` column (which holds it while the task sleeps).
pub(super) fn task_status_of(
    id: &str,
    name: &str,
    wake_at: Option<i64>,
) -> Result<TaskStatus, StoreError> {
    use TaskStatus::{Cancelled, Cancelling, Finished, Idle, Running, Waiting};
    if name == "sleeping" {
        let until_ms = wake_at
            .and_then(|at| u64::try_from(at).ok())
            .ok_or_else(|| StoreError::Corrupt {
                id: id.to_owned(),
                error: "a sleeping task without the time it wakes at".to_owned(),
            })?;
        return Ok(TaskStatus::Sleeping { until_ms });
    }
    [Running, Waiting, Idle, Cancelling, Finished, Cancelled]
        .into_iter()
        .find(|status| task_status_name(*status) == name)
        .ok_or_else(|| unknown_status(id, name))
}

fn unknown_status(id: &str, name: &str) -> StoreError {
    StoreError::Corrupt {
        id: id.to_owned(),
        error: format!("the stored status `{name}` is not one this build knows"),
    }
}

/// A stored version or write position (never negative) of record `id`.
pub(super) fn unsigned(id: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        id: id.to_owned(),
        error: format!("the stored number {value} is negative"),
    })
}

/// The columns a session listing reads: id, version, `updated_ms`.
pub(super) type SessionRow = (String, i64, Option<i64>);
/// The columns a turn listing reads: id, session, status, version, `updated`.
pub(super) type TurnRow = (String, String, String, i64, i64);
/// The columns a task listing reads: id, session, status, version, `wake_at`, `created`.
pub(super) type TaskRow = (String, String, String, i64, Option<i64>, i64);

/// The page of listing `listing` that read up to `limit + 1` `rows` (the one more tells
/// whether a next page exists), each made an item by `item`; the next page's cursor is the
/// `position` of the last row kept.
pub(super) fn page_of<R, T>(
    mut rows: Vec<R>,
    limit: usize,
    listing: &str,
    position: impl Fn(&R) -> String,
    item: impl Fn(R) -> Result<T, StoreError>,
) -> Result<super::Page<T>, StoreError> {
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = rows
        .last()
        .filter(|_| more)
        .map(|last| super::page::sql::cursor(listing, &position(last)));
    let items = rows.into_iter().map(item).collect::<Result<Vec<T>, _>>()?;
    Ok(super::Page { items, next })
}

/// A session listing's page from its rows (see [`page_of`]): positions are `updated_ms:id`.
pub(super) fn session_page(
    rows: Vec<SessionRow>,
    limit: usize,
) -> Result<super::Page<super::SessionSummary>, StoreError> {
    page_of(
        rows,
        limit,
        "sessions",
        |(id, _, updated_ms)| format!("{}:{id}", updated_ms.unwrap_or(0)),
        |(id, version, updated_ms)| {
            Ok(super::SessionSummary {
                version: unsigned(&id, version)?,
                updated_ms: updated_ms.map(|ms| unsigned(&id, ms)).transpose()?,
                id,
            })
        },
    )
}

/// A turn listing's page from its rows (see [`page_of`]): positions are `updated`.
pub(super) fn turn_page(
    rows: Vec<TurnRow>,
    limit: usize,
) -> Result<super::Page<super::TurnSummary>, StoreError> {
    page_of(
        rows,
        limit,
        "turns",
        |row| row.4.to_string(),
        |(id, session_id, status, version, updated)| {
            Ok(super::TurnSummary {
                status: turn_status_of(&id, &status)?,
                version: unsigned(&id, version)?,
                position: unsigned(&id, updated)?,
                session_id,
                id,
            })
        },
    )
}

/// A task listing's page from its rows (see [`page_of`]): positions are `created`.
pub(super) fn task_page(
    rows: Vec<TaskRow>,
    limit: usize,
) -> Result<super::Page<super::TaskSummary>, StoreError> {
    page_of(
        rows,
        limit,
        "tasks",
        |row| row.5.to_string(),
        |(id, session_id, status, version, wake_at, _)| {
            Ok(super::TaskSummary {
                status: task_status_of(&id, &status, wake_at)?,
                version: unsigned(&id, version)?,
                session_id,
                id,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_indexes_only_the_requests_its_last_write_did_not_hold() {
        let (all, first) = requests_to_index(&["a", "b"], None);
        assert_eq!(all, ["a", "b"], "an insert indexes everything");
        let (none, same) = requests_to_index(&["a", "b"], Some(&first));
        assert!(none.is_empty(), "an unchanged list indexes nothing");
        assert_eq!(same, first);
        let (added, longer) = requests_to_index(&["a", "b", "c"], Some(&first));
        assert_eq!(added, ["c"], "an appended request alone");
        let (changed, _) = requests_to_index(&["a", "x", "c"], Some(&longer));
        assert_eq!(
            changed,
            ["a", "x", "c"],
            "a changed list indexes everything again"
        );
        let (replaced, _) = requests_to_index(&["b", "c"], Some(&first));
        assert_eq!(replaced, ["b", "c"]);
        let (garbled, _) = requests_to_index(&["a"], Some("nonsense"));
        assert_eq!(garbled, ["a"]);
        let (empty, marker) = requests_to_index(&[], Some(&first));
        assert!(empty.is_empty());
        assert_eq!(marker, format!("0:{:016x}", 0xcbf2_9ce4_8422_2325_u64));
        assert_eq!(requests_to_index(&["a"], Some(&marker)).0, ["a"]);
    }

    #[test]
    fn status_columns_match_the_json_encoding() {
        for status in [
            TurnStatus::Active,
            TurnStatus::Waiting,
            TurnStatus::Running,
            TurnStatus::Completed,
            TurnStatus::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                status_name(status),
                "{status:?}"
            );
        }
        for status in [
            TaskStatus::Running,
            TaskStatus::Waiting,
            TaskStatus::Sleeping { until_ms: 1 },
            TaskStatus::Idle,
            TaskStatus::Cancelling,
            TaskStatus::Finished,
            TaskStatus::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_value(status).unwrap()["status"],
                task_status_name(status),
                "{status:?}"
            );
        }
    }

    #[test]
    fn statuses_read_back_from_their_column_values() {
        use crate::record::{TaskStatus, TurnStatus};
        for status in [
            TurnStatus::Active,
            TurnStatus::Waiting,
            TurnStatus::Running,
            TurnStatus::Completed,
            TurnStatus::Cancelled,
        ] {
            assert_eq!(turn_status_of("t", status_name(status)).unwrap(), status);
        }
        for status in [
            TaskStatus::Running,
            TaskStatus::Waiting,
            TaskStatus::Sleeping { until_ms: 7 },
            TaskStatus::Idle,
            TaskStatus::Cancelling,
            TaskStatus::Finished,
            TaskStatus::Cancelled,
        ] {
            let read = task_status_of("k", task_status_name(status), Some(7)).unwrap();
            assert_eq!(read, status);
        }
        assert!(matches!(
            turn_status_of("t", "parked"),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            task_status_of("k", "sleeping", None),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
