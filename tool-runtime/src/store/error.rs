//! What a store operation fails with ([`StoreError`]), and what a lease covers
//! ([`LeaseKind`], which a fenced write's error names): apart from the contract, so that the
//! contract's companions ([`super::page`]) can fail without importing it.

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer changed the record since it was read; re-read and retry.
    #[error("the record `{0}` was changed by another writer; read it again")]
    Conflict(String),
    /// The backend failed (I/O, corruption, a closed connection).
    #[error("store backend: {0}")]
    Backend(String),
    /// The write was made under a lease that another instance has taken over since (its fencing
    /// token is no longer the record's): this instance must drop its work on the record.
    #[error(
        "the lease on {kind} `{id}` was taken over by another instance (fencing token {token} is stale); this instance's work on it is void"
    )]
    Fenced {
        /// What the lease covers.
        kind: LeaseKind,
        /// The record's id.
        id: String,
        /// The stale token the write carried.
        token: u64,
    },
    /// Session `session_id` still has work that is not over, so it cannot be deleted: nothing
    /// was deleted.
    #[error(
        "session `{session_id}` cannot be deleted yet: {what}; cancel it (`Turn::cancel`, `Runtime::cancel_task`) or let it end, then delete again"
    )]
    Busy {
        /// The session.
        session_id: String,
        /// What is not over, e.g. "turn `t1` is waiting".
        what: String,
    },
    /// The request cannot be served as asked (a page limit out of range, a cursor that is not
    /// one of the listing's): nothing was read or written; the message says what to change.
    #[error("{0}")]
    Invalid(String),
    /// A stored record could not be decoded.
    #[error("stored record `{id}` cannot be decoded: {error}")]
    Corrupt {
        /// The record's id.
        id: String,
        /// The decoder's message.
        error: String,
    },
}

/// What a lease covers: the running work of a turn or of a workflow task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseKind {
    /// A turn whose step is `running`.
    Turn,
    /// A workflow task that is `running` or `cancelling`.
    Task,
}

impl std::fmt::Display for LeaseKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeaseKind::Turn => "turn",
            LeaseKind::Task => "task",
        })
    }
}
