//! The call pipeline, stage by stage as the spec orders them: for each call of a step,
//! resolve the name and check that the caller may see the tool ([`resolve`]), parse and
//! validate its input ([`validate`]), decide its approval ([`decide`]) and run its input
//! guardrails ([`guard`]), or answer a meta-tool ([`meta`]); then run what may run,
//! concurrently ([`execute`], output guardrails in [`guard`]), and park or close the step
//! ([`close`]). [`scope`] reads what a step works with once, at its start, and [`listing`]
//! which tools it offers (`enabled`, `prepare`). [`limit`] parks a
//! turn on a session-limit request, a step without calls.

pub(crate) mod close;
pub(crate) mod decide;
pub(crate) mod execute;
pub(crate) mod guard;
pub(crate) mod limit;
pub(crate) mod listing;
pub(crate) mod meta;
pub(crate) mod prepared;
pub(crate) mod resolve;
pub(crate) mod scope;
pub(crate) mod validate;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_core::error::quoted_prefix;
use toolwright_core::sensitive::REDACTED;
use toolwright_core::{ErrorCode, Registry, ToolError, names};
use tracing::Instrument;

use crate::call::{StepOptions, StepOutcome, ToolCall};
use crate::engine::Engine;
use crate::engine::kept::KeptTurn;
use crate::engine::work::TrackedTurn;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{CallResult, InputRequest, StepInput, TurnRecord, TurnStatus};
use crate::sealing::CalledTool;
use crate::store::Claim;
use close::Claimed;
use prepared::Prepared;
use resolve::Routed;
use scope::StepScope;

/// How a step begins: refused whole (its call ids repeat; the refusal is written), or
/// prepared, every call resolved, validated and decided, nothing run yet.
pub(crate) enum Begun {
    /// The step's outcome: none of its calls ran.
    Refused(StepOutcome),
    /// The calls, ready to run (boxed: a step's scope is large, and it moves to a task when
    /// the step must finish).
    Ready(Box<Ready>),
}

/// A step whose calls are prepared and announced and have not run: [`Ready::finish`] records
/// what must be durable before they run, runs them and closes or parks the step.
pub(crate) struct Ready {
    engine: Arc<Engine>,
    scope: StepScope,
    prepared: Vec<Prepared>,
    /// The turn's version the step started from.
    version: u64,
    session_version: u64,
    running: TrackedTurn,
    token: CancellationToken,
}

/// Begins one step of turn `turn_id`, the batch of calls from one model response: reads what
/// it works with and prepares every call (stages 1 to 4). Nothing runs and nothing is written,
/// except a step refused whole.
pub(crate) async fn begin_step(
    engine: &Arc<Engine>,
    (turn_id, session_id): (&str, &str),
    token: &CancellationToken,
    calls: Vec<ToolCall>,
    options: StepOptions,
) -> Result<Begun, RuntimeError> {
    let KeptTurn {
        turn,
        version,
        session,
        session_version,
    } = engine.step_records(turn_id, session_id).await?;
    takes_steps(&turn)?;
    let running = engine.work().track_turn(turn_id, token);
    let mut scope = StepScope::load(engine, turn, session, token).await?;
    scope.model = options.model;
    scope.input = match (options.messages, &options.conversation) {
        (Some(messages), _) => Some(StepInput::Messages(messages)),
        (None, Some((first, _))) => Some(StepInput::Conversation { end: *first }),
        (None, None) => None,
    };
    scope.conversation = options.conversation;
    scope.delivered = options.delivered;
    if let Some(refused) = refuse_repeated_ids(engine, &mut scope, version, &calls).await? {
        keep(engine, scope, session_version);
        return Ok(Begun::Refused(refused));
    }
    let prepared = prepare_all(engine, &scope, &calls).await;
    announce_calls(engine, &scope, &calls, &prepared);
    Ok(Begun::Ready(Box::new(Ready {
        engine: Arc::clone(engine),
        scope,
        prepared,
        version,
        session_version,
        running,
        token: token.clone(),
    })))
}

impl Ready {
    /// Whether the step writes before its calls run, or may park: then it must finish once
    /// begun, whoever waits for it (see [`Prepared::needs_record`]), so the caller runs it on a
    /// task of its own. A step of plain `read` calls (and calls settled before they ran) writes
    /// only when it closes: stopped before, it leaves the turn as it was, and it may run again.
    pub(crate) fn must_finish(&self) -> bool {
        self.prepared.iter().any(|p| p.needs_record() || p.asks())
    }

    /// Records the step as running where a call needs it, runs what may run, concurrently,
    /// and closes or parks the step.
    pub(crate) async fn finish(self: Box<Self>) -> Result<StepOutcome, RuntimeError> {
        let Ready {
            engine,
            mut scope,
            mut prepared,
            version,
            session_version,
            running,
            token,
        } = *self;
        let engine = &engine;
        let claimed = record_running(engine, &mut scope, version, &prepared, &running).await?;
        let lease = claimed.lease.as_ref();
        let steer = running.steer_token();
        let ran = execute::execute_all(engine, &scope, &mut prepared, &token, steer, lease).await;
        let outcome =
            close::close_or_park(engine, &mut scope, prepared, ran, claimed, steer).await?;
        keep(engine, scope, session_version);
        Ok(outcome)
    }
}

/// Keeps the turn and session as the step's last write left them, for the next step (when
/// that write succeeded).
fn keep(engine: &Engine, scope: StepScope, session_version: u64) {
    if let Some(version) = scope.stored {
        engine.kept().keep(KeptTurn {
            turn: scope.turn,
            version,
            session: scope.session,
            session_version,
        });
    }
}

/// Only an active turn takes a step.
fn takes_steps(turn: &TurnRecord) -> Result<(), RuntimeError> {
    if turn.status == TurnStatus::Active {
        return Ok(());
    }
    Err(RuntimeError::TurnState {
        turn: turn.id.clone(),
        status: turn.status,
        what: match turn.status {
            TurnStatus::Waiting => "it waits for input; answer, message or cancel it first",
            TurnStatus::Running => "its calls are running; wait for their results",
            _ => "it has ended; begin a new turn",
        },
    })
}

/// Results, approvals and resumption are keyed by call id: a step whose ids repeat could run
/// one call twice, so none of its calls run. Returns the refused step's outcome, if so.
async fn refuse_repeated_ids(
    engine: &Engine,
    scope: &mut StepScope,
    version: u64,
    calls: &[ToolCall],
) -> Result<Option<StepOutcome>, RuntimeError> {
    let mut seen = HashSet::new();
    let repeated: Vec<String> = calls
        .iter()
        .filter(|c| !seen.insert(c.call_id.as_str()))
        .map(|c| format!("`{}`", quoted_prefix(&c.call_id)))
        .collect();
    if repeated.is_empty() {
        return Ok(None);
    }
    let message = format!(
        "call ids must be unique within one response, and {} repeat; none of these calls ran, call them again with distinct ids",
        repeated.join(", ")
    );
    let results: Vec<Arc<CallResult>> = calls
        .iter()
        .map(|call| {
            let error = ToolError::with_code(ErrorCode::InvalidInput, message.clone());
            Arc::new(CallResult::failed(&call.call_id, &call.name, error))
        })
        .collect();
    for result in &results {
        engine.emit(Event::ActionResult {
            session_id: scope.session.id.clone(),
            turn_id: scope.turn.id.clone(),
            result: Arc::clone(result),
        });
    }
    scope.turn.refuse_step();
    let appended = scope.appended();
    let written = engine
        .store()
        .write_turn_appending(&scope.turn, Some(version), Claim::None, appended)
        .await?;
    scope.conversation = None;
    scope.stored = Some(written.version);
    Ok(Some(StepOutcome::Completed {
        results,
        ends_turn: false,
        notices: std::mem::take(&mut scope.notices),
    }))
}

/// Stages 1 to 4 of every call, in the model's order; nothing runs yet.
async fn prepare_all(engine: &Engine, scope: &StepScope, calls: &[ToolCall]) -> Vec<Prepared> {
    let span = tracing::info_span!("step", turn_id = %scope.turn.id, calls = calls.len());
    let mut prepared = Vec::with_capacity(calls.len());
    for call in calls {
        prepared.push(prepare(engine, scope, call).instrument(span.clone()).await);
    }
    prepared
}

/// Resolves, checks and decides one call; runs nothing.
async fn prepare(engine: &Engine, scope: &StepScope, call: &ToolCall) -> Prepared {
    let stages = async {
        let Routed { name, arguments } = resolve::route(scope, call)?;
        let tool = resolve::target(scope, call, &name)?;
        let arguments =
            arguments.map_err(|error| prepared::refused(&call.call_id, tool.name(), error))?;
        let tool = resolve::refreshed(engine, tool).await;
        if let Some(change) = crate::remote::definition_change(&tool) {
            return Ok(decide::withheld(scope, call, tool, arguments, change));
        }
        let sealing = &engine.options().sealing;
        let input = validate::input(sealing, &scope.session.id, call, &tool, arguments)?;
        if tool.is_ask_question() {
            return Ok(meta::ask_question(scope, call, tool, input));
        }
        let mut decided = decide::decide(engine, scope, &tool, &input, &call.call_id).await;
        let asked = guard::input(engine, scope, &tool, &input, &call.call_id, &mut decided).await;
        let prepared = decide::into_prepared(scope, call, tool, input, decided);
        Ok(guard::explained(prepared, asked))
    };
    stages
        .await
        .unwrap_or_else(|settled: Box<Prepared>| *settled)
}

/// Announces every call (`action.requested`). Without subscribers nobody sees the events, so
/// their inputs are not cloned and their labels not rendered.
fn announce_calls(engine: &Engine, scope: &StepScope, calls: &[ToolCall], prepared: &[Prepared]) {
    if !engine.has_subscribers() {
        return;
    }
    for (call, prep) in calls.iter().zip(prepared) {
        let (tool, input, label) = match prep {
            Prepared::Run { tool, input, .. } | Prepared::Ask { tool, input, .. } => (
                tool.name().to_owned(),
                tool.sensitivity().input.redacted(input).into_owned(),
                decide::start_label(tool, input),
            ),
            Prepared::Done(result) | Prepared::Provided(result, _) => (
                result.tool.clone(),
                raw_arguments(&scope.registry, &call.name, &call.arguments),
                names::humanize(&result.tool),
            ),
            Prepared::Meta {
                name, arguments, ..
            } => (
                (*name).to_owned(),
                Value::String(arguments.clone()),
                names::humanize(name),
            ),
        };
        engine.emit(Event::ActionRequested {
            session_id: scope.session.id.clone(),
            turn_id: scope.turn.id.clone(),
            call_id: call.call_id.clone(),
            tool,
            input,
            label,
            caller: scope.turn.caller,
            principal: scope.turn.current.clone(),
        });
    }
}

/// The arguments of a call refused before validation, as `action.requested` shows them: as
/// they came for a tool without sensitive input; for one with, parsed and redacted (the input
/// under `input` for a call through `tool_call`), or left out whole when they do not parse.
/// A tool this runtime does not know (a connection down, a name the model made up) may have
/// sensitive input: its arguments are left out.
fn raw_arguments(registry: &Registry, name: &str, arguments: &str) -> Value {
    let hidden = || Value::String(REDACTED.to_owned());
    let mut called = CalledTool::parse(name, arguments);
    let Some(tool) = registry.get(&called.name) else {
        return hidden();
    };
    let paths = &tool.sensitivity().input;
    if paths.is_empty() {
        return Value::String(arguments.to_owned());
    }
    let Some(input) = called.input_mut() else {
        return hidden();
    };
    paths.redact(input);
    Value::String(called.text())
}

/// Records the step as running before anything runs, when a call that runs needs it (see
/// [`Prepared::needs_record`]): a second handle cannot step the turn meanwhile, and after a
/// crash `recover` re-runs durable calls from their journals and settles the others, the
/// step's `read` calls with them, as "result unknown" (never run twice). A step of `read`
/// calls (and calls that wait for a person) records nothing before its calls run: its one
/// write closes or parks it, fenced by the turn's version, so a crash leaves the turn as it
/// was and the step can run again, and a second handle's step that lost the race fails its
/// write (a cancel that won it closes the step as cancelled, as for any step).
async fn record_running(
    engine: &Engine,
    scope: &mut StepScope,
    version: u64,
    prepared: &[Prepared],
    running: &TrackedTurn,
) -> Result<Claimed, RuntimeError> {
    if !prepared.iter().any(Prepared::runs) {
        return Ok(Claimed {
            version,
            lease: None,
        });
    }
    if !prepared.iter().any(|p| p.needs_record() || p.asks()) {
        // Nothing is written before the write that closes the step (no call can park it),
        // and that write replaces the step: its calls need no record, only the input they
        // read (`ctx.messages()`).
        scope
            .turn
            .begin_step(Vec::new(), Vec::new(), scope.input.clone());
        return Ok(Claimed {
            version,
            lease: None,
        });
    }
    let sealing = &engine.options().sealing;
    let session = &scope.session.id;
    let calls = prepared
        .iter()
        .map(|p| p.pending_call(sealing, session))
        .collect();
    let requests: Vec<InputRequest> = prepared
        .iter()
        .filter_map(|p| match p {
            Prepared::Ask { request, .. } => Some((**request).clone()),
            _ => None,
        })
        .collect();
    // `running` while the ready calls run: the requests are not announced yet, so no answer
    // can arrive before the step is parked.
    scope.turn.begin_step(calls, requests, scope.input.clone());
    if !prepared.iter().any(Prepared::needs_record) {
        return Ok(Claimed {
            version,
            lease: None,
        });
    }
    let written = engine
        .store()
        .write_turn_appending(
            &scope.turn,
            Some(version),
            engine.claim_here(),
            scope.appended(),
        )
        .await?;
    scope.conversation = None;
    running.hold(written.lease.clone());
    Ok(Claimed {
        version: written.version,
        lease: written.lease,
    })
}
