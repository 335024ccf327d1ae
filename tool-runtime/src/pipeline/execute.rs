//! Stages 5 to 8 of a call: run what may run, concurrently. A `task` or `serve` workflow starts
//! its task (the call's result is the receipt); the task meta-tools wait on or cancel tasks;
//! anything else runs its body ([`crate::exec`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::FutureExt as _;
use futures_util::future::Either;
use tokio_util::sync::CancellationToken;
use toolwright_core::{Entry, SessionInfo, ToolKind};

use super::prepared::Prepared;
use super::scope::StepScope;
use crate::engine::Engine;
use crate::exec::{Executed, Execution, RunMode};
use crate::record::CallResult;
use crate::store::Lease;
use crate::transition::Suspension;

/// Runs one call that may run.
pub(crate) fn run_call<'a>(
    engine: &'a Arc<Engine>,
    run: Execution<'a>,
) -> impl Future<Output = Executed> + Send + 'a {
    if let ToolKind::Workflow(Entry::Task | Entry::Serve) = run.tool.kind() {
        // Boxed, as the output guard's check below: neither is on a plain call's path, and
        // each would otherwise size every call's future.
        return Either::Left(Box::pin(start_task(engine, run))
            as Pin<Box<dyn Future<Output = Executed> + Send + 'a>>);
    }
    let guard = super::guard::OutputGuard::of(engine, &run);
    // Made here, not in an `async fn` that would keep `run` beside it; a plain call's future
    // is its body's execution itself.
    let executing = crate::exec::execute(engine, run);
    match guard {
        None => Either::Right(executing),
        Some(guard) => Either::Left(Box::pin(async move {
            match executing.await {
                Executed::Done(result) => Executed::Done(guard.check(engine, result).await),
                executed => executed,
            }
        })),
    }
}

/// Starts the task of a `task` or `serve` workflow call: the call's result is the receipt.
async fn start_task(engine: &Arc<Engine>, run: Execution<'_>) -> Executed {
    // Cached reads of the toolset are stale while a write may start (the task's body makes
    // them stale again while it runs).
    let _writing = engine.cache().writing(run.tool);
    let receipt = crate::task::start::start(
        engine,
        run.session,
        run.turn,
        run.tool,
        &run.call_id,
        run.input,
        run.approved_by,
    )
    .await;
    Executed::Done(receipt)
}

/// What one call of a step came to when it ran: its result, shared from here on (by its event,
/// the step's outcome and the turn's record), or the workflow body's wait. Both boxed: a step
/// keeps one per call, and moves them.
pub(crate) enum Ran {
    /// With a result.
    Done(Arc<CallResult>),
    /// A workflow body waits for a person or a timer; the call parks.
    Suspended(Box<Suspension>),
}

impl From<Executed> for Ran {
    fn from(executed: Executed) -> Self {
        match executed {
            Executed::Done(result) => Ran::Done(Arc::new(result)),
            Executed::Suspended(suspension) => Ran::Suspended(Box::new(suspension)),
        }
    }
}

/// Runs the calls of the step that may run, concurrently: one outcome per prepared call,
/// `None` for those settled before anything ran. When several calls start or reach workflow
/// tasks, those run one after another in the model's order (each is a store write), beside the
/// others: two calls to one `serve` task in a step reach it in the order the model made them.
/// A call that runs takes its input out of `prepared` (closing the step needs only its id and
/// tool; its record, when it has one, was written before it ran).
pub(super) async fn execute_all(
    engine: &Arc<Engine>,
    scope: &StepScope,
    prepared: &mut [Prepared],
    token: &CancellationToken,
    steer: &CancellationToken,
    lease: Option<&Lease>,
) -> Vec<Option<Ran>> {
    // The calls' context sees one session, built once for the step.
    let info = Arc::new(scope.info());
    let run = |p| bounded(run_prepared(engine, scope, &info, p, token, steer, lease));
    if prepared.iter().filter(|p| starts_task(p)).count() < 2 {
        return run_together(prepared.iter_mut().map(run)).await;
    }
    // Boxed: the ordered chain holds a whole call's future, which would otherwise make every
    // step's future larger (and every spawn of one copy more).
    let count = prepared.len();
    let (tasks, others): (Vec<_>, Vec<_>) = prepared
        .iter_mut()
        .enumerate()
        .partition(|(_, p)| starts_task(p));
    let in_order = Box::pin(async move {
        let mut ran = Vec::with_capacity(tasks.len());
        for (index, p) in tasks {
            ran.push((index, run(p).await));
        }
        ran
    });
    let together = futures_util::future::join_all(
        others
            .into_iter()
            .map(|(i, p)| async move { (i, run(p).await) }),
    );
    let (tasks, others) = futures_util::future::join(in_order, together).await;
    let mut outcomes: Vec<Option<Ran>> = (0..count).map(|_| None).collect();
    for (index, outcome) in tasks.into_iter().chain(others) {
        outcomes[index] = outcome;
    }
    outcomes
}

/// Runs `calls` concurrently, as `join_all` does, their outcomes in their order: each is
/// polled once as it is made, in order, and only those that did not finish then are kept and
/// run on together. A call that finishes when first polled (most reads) ran in a box the next
/// call reuses, so a step of such calls holds one call's future at a time instead of one per
/// call side by side (about 1 KB each, a large allocation for a step of many calls).
async fn run_together<F>(calls: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future,
    F::Output: Default,
{
    let mut outcomes = Vec::with_capacity(calls.size_hint().0);
    let mut waiting = Vec::new();
    let mut spare: Option<Pin<Box<F>>> = None;
    for (index, call) in calls.enumerate() {
        let mut slot = match spare.take() {
            // The finished call's future is dropped in place and this one takes its box.
            Some(mut slot) => {
                slot.set(call);
                slot
            }
            None => Box::pin(call),
        };
        // Polled with this task's context: a call that waits is woken as under `join_all`.
        match std::future::poll_fn(|cx| Poll::Ready(slot.as_mut().poll(cx))).await {
            Poll::Ready(outcome) => {
                outcomes.push(outcome);
                spare = Some(slot);
            }
            Poll::Pending => {
                outcomes.push(F::Output::default());
                waiting.push(slot.map(move |outcome| (index, outcome)));
            }
        }
    }
    drop(spare);
    for (index, outcome) in futures_util::future::join_all(waiting).await {
        outcomes[index] = outcome;
    }
    outcomes
}

/// The most a call's future may take, in bytes (about 1 KB now). A step keeps one per call
/// side by side and moves them between its stages: a rare path's state (a task's start, a
/// meta-tool, an output guard, storing files) is boxed, not carried by every call.
const CALL_FUTURE_MAX: usize = 1536;

/// `future`, checked at compile time to be no larger than [`CALL_FUTURE_MAX`].
fn bounded<F: Future>(future: F) -> F {
    const {
        assert!(
            std::mem::size_of::<F>() <= CALL_FUTURE_MAX,
            "a call's future outgrew CALL_FUTURE_MAX: box the rare path that grew it"
        );
    };
    future
}

/// Whether `prepared` runs a `task` or `serve` workflow tool.
fn starts_task(prepared: &Prepared) -> bool {
    matches!(prepared, Prepared::Run { tool, .. } if matches!(tool.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve)))
}

/// Runs one prepared call, if it runs, taking its input.
fn run_prepared<'a>(
    engine: &'a Arc<Engine>,
    scope: &'a StepScope,
    info: &Arc<SessionInfo>,
    prepared: &'a mut Prepared,
    token: &'a CancellationToken,
    steer: &'a CancellationToken,
    lease: Option<&'a Lease>,
) -> impl Future<Output = Option<Ran>> + Send + use<'a> {
    match prepared {
        Prepared::Run {
            call_id,
            tool,
            input,
        } => {
            let run = Execution {
                session: &scope.session,
                turn: &scope.turn,
                info: Arc::clone(info),
                tool,
                call_id: Arc::clone(call_id),
                input: std::mem::take(input),
                approved_by: None,
                token,
                // A `task` or `serve` call only starts its task: steering leaves the body
                // running (it has a token of its own).
                steer: Some(steer),
                lease,
                mode: RunMode::Normal,
                model: scope.model.clone(),
            };
            Either::Left(run_call(engine, run).map(|executed| Some(executed.into())))
        }
        Prepared::Meta {
            call_id,
            name,
            arguments,
        } => {
            // Boxed: a meta-tool's future would otherwise size every call's.
            let meta: Pin<Box<dyn Future<Output = Option<Ran>> + Send + 'a>> =
                Box::pin(async move {
                    let meta = crate::task::meta::MetaCall {
                        session_id: &scope.session.id,
                        turn_id: &scope.turn.id,
                        call_id,
                        name,
                        arguments,
                    };
                    Some(Ran::Done(Arc::new(
                        crate::task::meta::run(engine, &meta, token).await,
                    )))
                });
            Either::Right(Either::Left(meta))
        }
        _ => Either::Right(Either::Right(std::future::ready(None))),
    }
}
