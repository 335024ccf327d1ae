//! The set-up the integration tests share: principals, runtimes, sessions and turns, unpacking
//! step outcomes, draining events, a clock the test moves ([`clock`]), a side-effect log
//! ([`effects`]), the crash points, crash store and child runner of the crash harnesses
//! ([`crash`], Unix only) and the programs the tests start ([`programs`]).
//!
//! Every test binary includes this module (`mod support;`, or `#[path = "../support/mod.rs"]`
//! from `tests/it/`). It defines no `#[tool]`: the binaries that call `Registry::collect()` would
//! collect it.

#![allow(
    dead_code,
    reason = "every test binary includes the module and uses only part of it"
)]

pub(crate) mod clock;
// Unix only, like the crash harnesses: a child is SIGKILLed.
#[cfg(unix)]
pub(crate) mod crash;
pub(crate) mod effects;
pub(crate) mod programs;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;
use toolwright::registry::ToolDescriptor;
use toolwright::runtime::{
    CallResult, Event, InputRequest, RespondOutcome, Runtime, RuntimeBuilder, SessionSpec,
    SqliteStore, StepOutcome, ToolCall, Turn,
};
use toolwright::{Caller, ErrorCode, ModelOutput, Principal, Registry};

// ---------------------------------------------------------------------------------------------
// Principals.

pub(crate) fn alice() -> Principal {
    Principal::user("oidc", "alice")
}

pub(crate) fn bob() -> Principal {
    Principal::user("oidc", "bob")
}

pub(crate) fn dana() -> Principal {
    Principal::user("oidc", "dana")
}

// ---------------------------------------------------------------------------------------------
// Runtimes, sessions, turns.

/// A runtime builder over a registry of `tools`, on a store in memory, for the state, options
/// and other store (`.store(...)` replaces this one) a test adds.
pub(crate) fn builder(tools: impl IntoIterator<Item = &'static ToolDescriptor>) -> RuntimeBuilder {
    builder_over(Registry::from_tools(tools).expect("valid tools"))
}

/// A runtime builder over `registry`, on a store in memory, as [`builder`].
pub(crate) fn builder_over(registry: Registry) -> RuntimeBuilder {
    Runtime::builder(registry).store(SqliteStore::in_memory().expect("a memory store"))
}

/// A runtime over `registry` on a copy of the store file `fixture` (a file an earlier release
/// wrote, opened and migrated by this build), and the directory the copy is in.
pub(crate) fn upgraded(fixture: &str, registry: Registry) -> (tempfile::TempDir, Runtime) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::copy(fixture, &path).unwrap();
    let runtime = Runtime::builder(registry)
        .store(SqliteStore::open(&path).unwrap())
        .build()
        .unwrap();
    (dir, runtime)
}

/// A runtime of `tools` that need no state, on the in-memory store.
pub(crate) fn runtime(tools: impl IntoIterator<Item = &'static ToolDescriptor>) -> Runtime {
    builder(tools).build().expect("no state needed")
}

/// Opens session `spec` and begins a turn with `current` acting, called by `caller`.
pub(crate) async fn open_turn(
    rt: &Runtime,
    spec: SessionSpec,
    current: Option<Principal>,
    caller: Caller,
) -> Turn {
    rt.open_session(spec)
        .await
        .unwrap()
        .begin_turn(current, caller)
        .await
        .unwrap()
}

/// A model's turn in session `session`, which alice opened, with `current` acting.
pub(crate) async fn turn_in(rt: &Runtime, session: &str, current: Option<Principal>) -> Turn {
    open_turn(
        rt,
        SessionSpec::new(session).initiator(alice()),
        current,
        Caller::Model,
    )
    .await
}

/// A call of tool `name` with JSON `arguments`.
pub(crate) fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments.to_string())
}

// ---------------------------------------------------------------------------------------------
// Outcomes and results.

/// The results of a step that completed.
pub(crate) fn completed(outcome: StepOutcome) -> Vec<CallResult> {
    completed_step(outcome).0
}

/// The results of a step that completed, and whether it ended the turn.
pub(crate) fn completed_ending(outcome: StepOutcome) -> (Vec<CallResult>, bool) {
    let (results, ends_turn, _) = completed_step(outcome);
    (results, ends_turn)
}

/// The results of a step that completed, and its notices for the model.
pub(crate) fn completed_with_notices(outcome: StepOutcome) -> (Vec<CallResult>, Vec<String>) {
    let (results, _, notices) = completed_step(outcome);
    (results, notices)
}

fn completed_step(outcome: StepOutcome) -> (Vec<CallResult>, bool, Vec<String>) {
    match outcome {
        StepOutcome::Completed {
            results,
            ends_turn,
            notices,
            ..
        } => (owned(results), ends_turn, notices),
        other => panic!("expected a completed step, got {other:?}"),
    }
}

/// The results known so far and the open requests of a step that waits.
pub(crate) fn waiting(outcome: StepOutcome) -> (Vec<CallResult>, Vec<InputRequest>) {
    match outcome {
        StepOutcome::Waiting {
            results, requests, ..
        } => (owned(results), requests),
        other => panic!("expected a waiting step, got {other:?}"),
    }
}

/// A step's results as values of their own (the step shares them with the turn's record).
pub(crate) fn owned(results: Vec<Arc<CallResult>>) -> Vec<CallResult> {
    results.into_iter().map(Arc::unwrap_or_clone).collect()
}

/// The results of a turn that an answer resumed and whose step then completed.
pub(crate) fn resumed(outcome: RespondOutcome) -> Vec<CallResult> {
    match outcome {
        RespondOutcome::Resumed(step) => completed(step),
        other => panic!("expected the turn to resume, got {other:?}"),
    }
}

/// The code of an error result.
pub(crate) fn code(result: &CallResult) -> ErrorCode {
    result.error.as_ref().expect("an error result").code()
}

/// The text the model reads; the result must be a text.
pub(crate) fn model_text(result: &CallResult) -> String {
    match &*result.model() {
        ModelOutput::Text(text) => text.clone(),
        other => panic!("expected a text for the model, got {other:?}"),
    }
}

/// The text the model reads, or the model output as JSON when it is not a text.
pub(crate) fn text(result: &CallResult) -> String {
    match &*result.model() {
        ModelOutput::Text(text) => text.clone(),
        other => serde_json::to_string(other).unwrap(),
    }
}

// ---------------------------------------------------------------------------------------------
// Events.

/// The events received so far, without waiting.
pub(crate) fn drain(events: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        out.push(event);
    }
    out
}
