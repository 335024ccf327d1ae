//! The tokio runtime of toolwright: sessions, turns and steps, the call pipeline, approvals and
//! input requests, taint, and the stores that let a parked turn outlive its process.
//!
//! It discovers tools through [`toolwright_core::Registry`]; generated code never depends on it.

#![warn(missing_docs)]

pub mod event;
mod host;
mod pipeline;
pub mod record;
mod recover;
pub mod remote;
mod runtime;
pub mod sandbox;
pub mod store;
mod task;
pub mod toolset;
mod ui;

pub use event::{CandidateStatus, CompletionReason, Event};
pub use record::{
    Approver, CallResult, CallState, ClosedStep, Decision, DefinitionChange, EntryKind,
    InputRequest, JournalEntry, Outcome, PendingCall, PendingStep, Permission, PinRecord,
    RequestKind, RequestStatus, SessionRecord, TaskCall, TaskRecord, TaskResult, TaskStatus,
    TurnRecord, TurnStatus,
};
pub use runtime::{
    AutoRequest, AutoVerdict, Clock, Decider, InputResponse, Options, ProviderResult,
    RespondOutcome, Runtime, RuntimeBuilder, RuntimeError, Session, SessionSpec, StepOutcome,
    SystemClock, ToolCall, Turn,
};
pub use sandbox::LocalSandbox;
pub use store::{Claim, Lease, LeaseKind, SqliteStore, Store, StoreError, Written};
#[cfg(feature = "postgres")]
pub use store::{PgStep, PostgresStore};
pub use toolwright_core::Registry;
pub use ui::Invoked;
