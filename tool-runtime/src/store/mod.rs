//! Durable state: sessions, parked turns with their pending requests, approval memory.
//!
//! A parked turn lives only here: the process that parked it may exit, and any process with the
//! same store resumes it. Every record is written with optimistic concurrency (a version that must
//! match), so two processes answering the same request cannot both win, and a turn is claimed by
//! exactly one of them before its tools run.

use std::collections::BTreeSet;

use futures_util::future::BoxFuture;

pub mod conformance;
mod sqlite;

pub use sqlite::SqliteStore;

use crate::record::{JournalEntry, SessionRecord, TaskRecord, TurnRecord};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another writer changed the record since it was read; re-read and retry.
    #[error("the record `{0}` was changed by another writer; read it again")]
    Conflict(String),
    /// The backend failed (I/O, corruption, a closed connection).
    #[error("store backend: {0}")]
    Backend(String),
    /// A stored record could not be decoded.
    #[error("stored record `{id}` cannot be decoded: {error}")]
    Corrupt {
        /// The record's id.
        id: String,
        /// The decoder's message.
        error: String,
    },
}

/// A durable backend for the runtime. Implementations: [`SqliteStore`] (embedded, one file) and,
/// for several instances, Postgres. [`conformance::run`] checks an implementation.
///
/// Versions: a record read with version `v` is written back with `expected = Some(v)`; the store
/// refuses the write with [`StoreError::Conflict`] if the stored version is not `v`, and stores it
/// with version `v + 1`. `expected = None` inserts and fails with a conflict if the record exists;
/// a versioned write to a record that does not exist is a conflict too. A refused write changes
/// nothing (record, version, request index, order of waiting turns). `waiting_turns` lists turns
/// oldest-written first. A request id belongs to the turn that last wrote it.
pub trait Store: Send + Sync + 'static {
    /// The session `id`, with its version.
    fn session(&self, id: &str) -> BoxFuture<'_, Result<Option<(SessionRecord, u64)>, StoreError>>;

    /// Writes a session (see the trait docs for `expected`). Returns the new version.
    fn put_session<'a>(
        &'a self,
        record: &'a SessionRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// The turn `id`, with its version.
    fn turn(&self, id: &str) -> BoxFuture<'_, Result<Option<(TurnRecord, u64)>, StoreError>>;

    /// Writes a turn and indexes its requests by id. The index only grows: a request id stays
    /// resolvable to its turn after its step closes. Returns the new version.
    fn put_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// The id of the turn that holds request `request_id`.
    fn turn_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// Ids of turns waiting for input, oldest first.
    fn waiting_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Ids of turns whose parked step was claimed for execution (`running`), oldest first. After
    /// a crash these are the calls whose result is unknown.
    fn running_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// The journal of durable run `run_id`, in position order.
    fn journal(&self, run_id: &str) -> BoxFuture<'_, Result<Vec<JournalEntry>, StoreError>>;

    /// Appends `entry` to run `run_id`'s journal. A position already recorded is a
    /// [`StoreError::Conflict`] (another process recorded it first; read the journal again and
    /// use its value), so a position is recorded exactly once.
    fn append_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Records that `key` is approved in session `session_id` (what `once` remembers).
    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The approval keys remembered in session `session_id`.
    fn approvals(&self, session_id: &str) -> BoxFuture<'_, Result<BTreeSet<String>, StoreError>>;

    /// The task `id`, with its version.
    fn task(&self, id: &str) -> BoxFuture<'_, Result<Option<(TaskRecord, u64)>, StoreError>>;

    /// Writes a task (versions as for turns) and indexes its requests by id, like
    /// [`Store::put_turn`]. Returns the new version.
    fn put_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// The id of the task that holds request `request_id`.
    fn task_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// Ids of the tasks of session `session_id`, oldest first.
    fn session_tasks(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Ids of the tasks that have not ended (neither `finished` nor `cancelled`), oldest first:
    /// what recovery and timers look at.
    fn open_tasks(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;
}
