//! The tokio runtime of toolwright: sessions, turns and steps, the call pipeline, approvals and
//! input requests, taint, and the stores that let a parked turn outlive its process.
//!
//! It discovers tools through [`toolwright_core::Registry`]; generated code never depends on it.
//!
//! Its modules form layers whose imports only go down (`ARCHITECTURE.md` at the workspace root
//! has the table, and a test checks it):
//!
//! - leaves: ids, errors, [`Options`], the [`Decider`], the runtime's guardrails, the host's services, what hosts hand in
//!   and get back ([`ToolCall`], [`StepOutcome`], [`InputResponse`], [`RespondOutcome`]),
//!   [`event`], [`record`], [`store`], the local sandbox (feature `sandbox`) and the declarations
//!   of [`remote`] connections;
//! - `transition`: every change of a turn's, call's, request's or task's state, as pure fns
//!   with the transition tables in their docs;
//! - components with state of their own: the work running here and its leases, the UI's result
//!   cache, [`toolset`]s, the connections, the host behind a body's context;
//! - the engine, which owns them, privately;
//! - behaviour: running one body (`exec`), workflow tasks, the pipeline stage by stage
//!   (resolve, validate, decide, execute, close), the input protocol that resumes parked steps,
//!   and recovery;
//! - the handles: [`Runtime`] and its builder, [`Session`], [`Turn`], calls from the user
//!   interface ([`Invoked`]).

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod attachments;
mod call;
mod decider;
mod engine;
mod error;
pub mod event;
mod exec;
mod hooks;
mod host;
mod ids;
mod input;
mod options;
mod pipeline;
pub mod record;
mod recovery;
pub mod remote;
mod retention;
mod runtime;
#[cfg(feature = "sandbox")]
pub mod sandbox;
mod sealing;
mod services;
mod session;
mod steering;
pub mod store;
mod task;
pub mod toolset;
mod transition;
mod turn;
mod ui;

pub use attachments::Attachment;
pub use call::{
    HookDelivery, InputResponse, ProviderResult, RespondOutcome, Steered, StepOptions, StepOutcome,
    ToolCall,
};
pub use decider::{AutoRequest, AutoVerdict, Decider};
pub use error::{HookRefused, RuntimeError};
pub use event::{CandidateStatus, CompletionReason, Event, GuardrailAction, StepProgress};
pub use exec::slot::waiting_on_calls;
pub use options::{Clock, Options, Retention, SystemClock};
pub use record::{
    Approver, AttachmentPlace, AttachmentRecord, CallResult, CallState, ClosedStep,
    ConversationEntry, Decision, DefinitionChange, EntryKind, InputRequest, JournalEntry, Outcome,
    PendingCall, PendingStep, Permission, PinRecord, RequestKind, RequestStatus, SessionRecord,
    StepInput, StepPatch, TaskCall, TaskRecord, TaskResult, TaskStatus, TurnRecord, TurnStatus,
};
pub use retention::Swept;
pub use runtime::{Runtime, RuntimeBuilder, WeakRuntime};
#[cfg(feature = "sandbox")]
pub use sandbox::LocalSandbox;
pub use sealing::{Sealing, SealingKeyError};
pub use session::{Session, SessionSpec};
pub use store::{
    Appended, ChangeMark, Claim, Cursor, Deleted, Lease, LeaseKind, MAX_PAGE_LIMIT, Page,
    PageRequest, SessionSummary, Since, SqliteStore, StepSince, Store, StoreError, TaskFilter,
    TaskSummary, TurnFilter, TurnRetention, TurnSummary, Written,
};
#[cfg(feature = "postgres")]
pub use store::{PgStep, PostgresStore};
pub use toolwright_core::Registry;
pub use turn::Turn;
pub use ui::Invoked;
