//! How both SQL stores put records into rows: status columns, versions, JSON, fencing tokens.
//! One definition, so the two backends cannot drift apart.

use serde::de::DeserializeOwned;

use super::{Lease, StoreError};
use crate::record::{TaskStatus, TurnStatus};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
