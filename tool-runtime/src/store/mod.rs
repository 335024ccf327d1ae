//! Durable state: sessions, parked turns with their pending requests, approval memory.
//!
//! A parked turn lives only here: the process that parked it may exit, and any process with the
//! same store resumes it. Every record is written with optimistic concurrency (a version that must
//! match), so two processes answering the same request cannot both win, and a turn is claimed by
//! exactly one of them before its tools run.

pub mod conformance;
mod contract;
mod error;
pub mod page;
#[cfg(feature = "postgres")]
mod postgres;
mod rows;
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::{PgStep, PostgresStore};

/// sqlx 0.9 for Postgres, as [`PgStep`] work uses it: `query`, `query_as`, `query_scalar`
/// (from `sqlx-core`) and the connection types (from `sqlx-postgres`). The `sqlx` facade crate
/// cannot share a build with the SQLite store's bundled SQLite (both link `sqlite3`), so use
/// these re-exports, or depend on `sqlx-core` and `sqlx-postgres` 0.9 directly.
#[cfg(feature = "postgres")]
pub mod postgres_sql {
    pub use sqlx_core::query::query;
    pub use sqlx_core::query_as::query_as;
    pub use sqlx_core::query_scalar::query_scalar;
    pub use sqlx_core::{Error, sql_str::AssertSqlSafe};
    pub use sqlx_postgres::{PgConnection, PgPool, PgRow, Postgres};
    /// The crates themselves, for everything else.
    pub use {sqlx_core, sqlx_postgres};
}
pub use sqlite::SqliteStore;

pub(crate) use contract::update_session;
pub use contract::{
    ANONYMOUS_REQUESTER, Appended, ChangeMark, Claim, Deleted, Lease, Since, StepSince, Store,
    TurnRetention, UNKNOWN_REQUESTER, Written, requester_key,
};
pub use error::{LeaseKind, StoreError};
pub use page::{
    Cursor, MAX_PAGE_LIMIT, Page, PageRequest, SessionSummary, TaskFilter, TaskSummary, TurnFilter,
    TurnSummary,
};
