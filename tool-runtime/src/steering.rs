//! The messages steered into a turn ([`crate::Turn::steer`]), kept in the store as an
//! append-only journal of the turn: durable from the moment `steer` returns, readable from any
//! process, and never written through the turn's record (a step running meanwhile writes that
//! record under the version it read, and a second writer would make its close conflict).
//!
//! Each message takes the next position; the host that delivers them to its model counts what
//! it delivered. When the turn ends, the host (or a step that ends it) writes a closing entry at
//! the next free position: positions are recorded exactly once, so a message and the close race
//! for one position and exactly one wins. A message that loses learns the turn ended; a close
//! that loses learns of the message and the turn goes on.

use serde_json::json;

use crate::record::{EntryKind, JournalEntry};
use crate::store::{Store, StoreError};

/// The journal name of a steered message.
const MESSAGE: &str = "message";
/// The journal name of the entry that closes the log.
const CLOSED: &str = "closed";

/// The journal id of turn `turn_id`'s steered messages (a durable call's is
/// `<turn>/<call>`: the two never meet).
fn run_id(turn_id: &str) -> String {
    format!("{turn_id}#steering")
}

/// What the log of a turn holds.
#[derive(Debug, Default)]
pub(crate) struct Log {
    /// The messages, in the order they were recorded.
    pub(crate) messages: Vec<String>,
    /// Whether the log was closed (the turn ended, or its host gave its final answer).
    pub(crate) closed: bool,
    /// The next free position.
    next: u32,
}

/// Turn `turn_id`'s log.
pub(crate) async fn read(store: &dyn Store, turn_id: &str) -> Result<Log, StoreError> {
    let entries = store.journal(&run_id(turn_id)).await?;
    let mut log = Log::default();
    for entry in entries {
        // A position with none after it is a row no runtime wrote (positions count up from 0,
        // one per message): refused, or every write would conflict with it forever.
        let after = entry.position.checked_add(1).ok_or_else(|| {
            StoreError::Backend(format!(
                "the steering log of turn `{turn_id}` holds an entry at position {}, after which \
                 nothing can be recorded: the row is corrupt; delete it from the journal",
                entry.position
            ))
        })?;
        log.next = log.next.max(after);
        match entry.name.as_str() {
            CLOSED => log.closed = true,
            _ => log.messages.push(
                entry
                    .value
                    .get("text")
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_owned(),
            ),
        }
    }
    Ok(log)
}

/// Records `text` as the next message of turn `turn_id`, unless its log was closed first.
pub(crate) async fn record(
    store: &dyn Store,
    turn_id: &str,
    text: &str,
) -> Result<Recorded, StoreError> {
    loop {
        let log = read(store, turn_id).await?;
        if log.closed {
            return Ok(Recorded::Closed);
        }
        let entry = JournalEntry {
            position: log.next,
            kind: EntryKind::Step,
            name: MESSAGE.into(),
            value: json!({ "text": text }),
        };
        match store.record_journal(&run_id(turn_id), &entry, None).await {
            Ok(()) => return Ok(Recorded::At(log.messages.len())),
            // Another message (or the close) took the position: read again.
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error),
        }
    }
}

/// What [`record`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// Recorded, at this index among the turn's messages.
    At(usize),
    /// The log was closed: nothing was recorded.
    Closed,
}

/// Closes turn `turn_id`'s log unless it holds more than `delivered` messages: returns those
/// beyond the first `delivered` (the log stays open), or nothing once it is closed (closed
/// before too).
pub(crate) async fn close(
    store: &dyn Store,
    turn_id: &str,
    delivered: usize,
) -> Result<Vec<String>, StoreError> {
    loop {
        let mut log = read(store, turn_id).await?;
        if log.closed {
            return Ok(Vec::new());
        }
        if log.messages.len() > delivered {
            return Ok(log.messages.split_off(delivered));
        }
        let entry = JournalEntry {
            position: log.next,
            kind: EntryKind::Step,
            name: CLOSED.into(),
            value: serde_json::Value::Null,
        };
        match store.record_journal(&run_id(turn_id), &entry, None).await {
            Ok(()) => return Ok(Vec::new()),
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    #[tokio::test]
    async fn a_log_with_no_position_left_is_refused_not_retried() {
        let store = SqliteStore::in_memory().unwrap();
        let last = JournalEntry {
            position: u32::MAX,
            kind: EntryKind::Step,
            name: MESSAGE.into(),
            value: json!({ "text": "from nowhere" }),
        };
        store.append_journal(&run_id("t1"), &last).await.unwrap();
        let error = record(&store, "t1", "hello").await.unwrap_err();
        assert!(
            matches!(&error, StoreError::Backend(m) if m.contains("the row is corrupt")),
            "{error:?}"
        );
        assert!(close(&store, "t1", 0).await.is_err());
    }
}
