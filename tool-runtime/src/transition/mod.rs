//! Every change of state the runtime persists: a turn's status, the calls and requests of its
//! parked step, and a workflow task's status. Each transition is a fn on the records that
//! changes them in memory and returns what changed; none reads or writes the store, emits an
//! event or reads a clock, so each has a unit test of its own. The async code around them is
//! load → transition → write → emit.
//!
//! No other module assigns a `TurnStatus`, `CallState`, `RequestStatus` or `TaskStatus`
//! (`tests/lints.rs` checks it).
//!
//! ## A turn ([`TurnStatus`](crate::record::TurnStatus))
//!
//! | from | what happens | to | fn |
//! |---|---|---|---|
//! | — | a session begins a turn | `active` | [`TurnRecord::begin`] |
//! | `active` | a step whose call ids repeat: nothing runs | `active` (one more step) | [`TurnRecord::refuse_step`] |
//! | `active` | a step with calls that run or wait is recorded before they run | `running` | [`TurnRecord::begin_step`] |
//! | `running` | its ready calls ran; some wait for a person or a timer | `waiting` | [`TurnRecord::park`] |
//! | `active`, `running` | every call has its result | `active`, or `completed` when it may end | [`TurnRecord::close_step`] |
//! | `waiting` | nothing is pending and no call sleeps: its ready calls are claimed | `running` | [`TurnRecord::claim_step`] |
//! | `waiting` | a sleeping call's timer is due (then claimed as above) | `waiting` | [`TurnRecord::wake_sleepers`] |
//! | `active` | the host ends it | `completed` | [`TurnRecord::complete`] |
//! | not ended | it is cancelled | `cancelled` | [`TurnRecord::cancel`] |
//! | `cancelled` | a write of its running step lost to the cancel | `cancelled`, step closed | [`TurnRecord::close_cancelled_step`] |
//!
//! ## A call of the pending step ([`CallState`](crate::record::CallState))
//!
//! | from | what happens | to | fn |
//! |---|---|---|---|
//! | — | the step is recorded | `running` (may run), `waiting` (on a request), `finished` (refused, answered at once) | [`PendingCall::running`], [`PendingCall::waiting`], [`PendingCall::finished`] |
//! | `running` | it returned | `finished` | [`TurnRecord::park`], [`TurnRecord::close_step`] |
//! | `running` | its workflow body waits for a person or a timer | `waiting`, `sleeping` | [`TurnRecord::park`] |
//! | `waiting` | its request is approved, or its body's question answered | `ready` | [`PendingStep::settle`] |
//! | `waiting` | its request is declined, or its `ask_question` answered | `finished` | [`PendingStep::settle`] |
//! | `waiting` | a message revokes its request | `finished` (not approved) | [`PendingStep::revoke`] |
//! | `sleeping` | its timer is due | `ready` | [`TurnRecord::wake_sleepers`] |
//! | `ready` | the step is claimed | `running` | [`TurnRecord::claim_step`] |
//! | not `finished` | the turn is cancelled | `finished` (cancelled) | [`TurnRecord::cancel`] |
//!
//! ## A request ([`RequestStatus`](crate::record::RequestStatus))
//!
//! | from | what happens | to | fn |
//! |---|---|---|---|
//! | — | a call needs approval, asks a question, or a workflow body asks or waits on a hook | `pending` | [`InputRequest::approval`], [`InputRequest::question`], [`InputRequest::workflow_ask`], [`InputRequest::task_ask`], [`InputRequest::hook_wait`], [`InputRequest::task_hook_wait`] |
//! | `pending` | the first valid answer, a hook's delivery, or a deadline passing (settled with no responder; its body gets `timeout`) | `settled` | [`PendingStep::settle`], [`TaskRecord::settle_answer`] |
//! | `pending` | a message that answers nothing, or a cancel | `revoked` | [`PendingStep::revoke`], [`TurnRecord::cancel`], [`TaskRecord::begin_cancel`], [`TaskRecord::end_run`] |
//!
//! ## A workflow task ([`TaskStatus`](crate::record::TaskStatus))
//!
//! | from | what happens | to | fn |
//! |---|---|---|---|
//! | — | a `task` or `serve` call starts it | `running` | [`TaskRecord::start`] |
//! | `idle` | a `serve` call reaches it | `running` | [`TaskRecord::queue_call`] |
//! | `running` | its body waits for a person / a timer / its next call | `waiting` / `sleeping` / `idle` | [`TaskRecord::park_run`] |
//! | `running` | its body parked while a cancel was asked for | `cancelling` | [`TaskRecord::park_run`] |
//! | `running`, `cancelling` | its body returned, failed, or its cleanup ended | `finished`, `cancelled` | [`TaskRecord::end_run`] |
//! | `waiting` | its last pending question is answered | `running` | [`TaskRecord::settle_answer`] |
//! | `sleeping` | its timer is due | `running` | [`TaskRecord::wake`] |
//! | `running`, `cancelling` | a cancel while its body runs (recorded for the runner) | unchanged | [`TaskRecord::request_cancel`] |
//! | parked | it is cancelled | `cancelling` | [`TaskRecord::begin_cancel`] |
//! | any but over (`serve` only) | one of its calls is cancelled on its own: the call gets a `CANCELLED` result | unchanged | [`TaskRecord::cancel_calls`] |
//!
//! [`TaskRecord::cancel_calls`]: crate::record::TaskRecord::cancel_calls
//! [`TurnRecord::begin`]: crate::record::TurnRecord::begin
//! [`TurnRecord::refuse_step`]: crate::record::TurnRecord::refuse_step
//! [`TurnRecord::begin_step`]: crate::record::TurnRecord::begin_step
//! [`TurnRecord::park`]: crate::record::TurnRecord::park
//! [`TurnRecord::close_step`]: crate::record::TurnRecord::close_step
//! [`TurnRecord::claim_step`]: crate::record::TurnRecord::claim_step
//! [`TurnRecord::wake_sleepers`]: crate::record::TurnRecord::wake_sleepers
//! [`TurnRecord::complete`]: crate::record::TurnRecord::complete
//! [`TurnRecord::cancel`]: crate::record::TurnRecord::cancel
//! [`TurnRecord::close_cancelled_step`]: crate::record::TurnRecord::close_cancelled_step
//! [`PendingCall::running`]: crate::record::PendingCall::running
//! [`PendingCall::waiting`]: crate::record::PendingCall::waiting
//! [`PendingCall::finished`]: crate::record::PendingCall::finished
//! [`PendingStep::settle`]: crate::record::PendingStep::settle
//! [`PendingStep::revoke`]: crate::record::PendingStep::revoke
//! [`InputRequest::approval`]: crate::record::InputRequest::approval
//! [`InputRequest::question`]: crate::record::InputRequest::question
//! [`InputRequest::workflow_ask`]: crate::record::InputRequest::workflow_ask
//! [`InputRequest::task_ask`]: crate::record::InputRequest::task_ask
//! [`InputRequest::hook_wait`]: crate::record::InputRequest::hook_wait
//! [`InputRequest::task_hook_wait`]: crate::record::InputRequest::task_hook_wait
//! [`TaskRecord::settle_answer`]: crate::record::TaskRecord::settle_answer
//! [`TaskRecord::begin_cancel`]: crate::record::TaskRecord::begin_cancel
//! [`TaskRecord::end_run`]: crate::record::TaskRecord::end_run
//! [`TaskRecord::start`]: crate::record::TaskRecord::start
//! [`TaskRecord::queue_call`]: crate::record::TaskRecord::queue_call
//! [`TaskRecord::park_run`]: crate::record::TaskRecord::park_run
//! [`TaskRecord::wake`]: crate::record::TaskRecord::wake
//! [`TaskRecord::request_cancel`]: crate::record::TaskRecord::request_cancel

pub(crate) mod answer;
pub(crate) mod request;
pub(crate) mod task;
pub(crate) mod turn;

use toolwright_core::AskRequest;

use crate::record::{CallState, InputRequest};

/// Why a workflow body stopped until later.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Suspension {
    /// `ctx.ask` at this journal position, with no answer recorded yet; withdrawn at
    /// `deadline_ms` when the question has a timeout.
    Ask {
        position: u32,
        request: AskRequest,
        deadline_ms: Option<u64>,
    },
    /// `ctx.wait_hook` at this journal position, with no delivery recorded yet; given up at
    /// `deadline_ms` when the wait has a timeout.
    Hook {
        position: u32,
        hook: HookRef,
        deadline_ms: Option<u64>,
    },
    /// `ctx.sleep` until this time (Unix milliseconds).
    Sleep { until_ms: u64 },
    /// A `serve` body waits for its call at this index, which has not arrived.
    Receive { index: usize },
}

/// The hook a body waits on: its public id and its name (never its token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HookRef {
    pub(crate) id: String,
    pub(crate) name: String,
}

impl HookRef {
    /// What a wait request shows: which hook the body waits on.
    pub(crate) fn prompt(&self) -> String {
        format!("waiting for a delivery to hook `{}`", self.name)
    }

    /// The `input` of a wait request: the hook it waits on.
    pub(crate) fn input(&self) -> serde_json::Value {
        serde_json::json!({ "hook": { "id": self.id, "name": self.name } })
    }

    /// The hook a wait request waits on, if it is one.
    pub(crate) fn of(request: &InputRequest) -> Option<HookRef> {
        if request.kind != crate::record::RequestKind::Hook {
            return None;
        }
        let hook = request.input.as_ref()?.get("hook")?;
        Some(HookRef {
            id: hook.get("id")?.as_str()?.to_owned(),
            name: hook.get("name")?.as_str()?.to_owned(),
        })
    }
}

/// A workflow call of a turn's step parked on a question or a timer: its new state, and the
/// request it opened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parked {
    pub(crate) call_id: String,
    pub(crate) state: CallState,
    pub(crate) request: Option<InputRequest>,
}
