//! The runner of a workflow task: it runs the task's body on a tokio task of its own, replaying
//! its journal, until the body ends or parks, and records how each run ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolwright_core::{CallOutput, ErrorCode, Tool, ToolError};

use crate::engine::work::CallTokens;
use crate::engine::{Engine, keeping};
use crate::error::RuntimeError;
use crate::event::Event;
use crate::exec::context::{self, Body, session_info};
use crate::exec::result::call_result;
use crate::host::{CallToken, Journal, TaskLink};
use crate::record::{CallResult, Outcome, TaskRecord, TaskResult, TaskStatus};
use crate::store::{Lease, StoreError};
use crate::transition::Suspension;
use crate::transition::task::{EndedRun, Ending, ParkedRun};

/// How one run of a task's body ended.
enum RunEnd {
    /// The body returned.
    Returned(CallResult),
    /// The body waits for something that outlives the run.
    Parked(Suspension),
    /// Cancelled, and the body did not finish its cleanup within the window.
    CleanupTimedOut,
    /// The run could not start.
    Broken(ToolError),
    /// The store failed; the run is tried again.
    StoreFailed(StoreError),
}

/// How many times a runner retries after a store failure before it leaves the task `running`
/// for [`Runtime::recover`] at the next start.
const STORE_RETRIES: u32 = 8;

/// Waits before retry `attempt` (from 1) after a store failure; `false` when retries are over.
async fn back_off(id: &str, attempt: &mut u32, error: &(dyn std::fmt::Display + Sync)) -> bool {
    *attempt += 1;
    if *attempt > STORE_RETRIES {
        tracing::error!(
            task_id = id,
            "the store keeps failing ({error}); the task is left running and `Runtime::recover` runs it at the next start"
        );
        return false;
    }
    tracing::warn!(
        task_id = id,
        attempt = *attempt,
        "the store failed ({error}); retrying"
    );
    tokio::time::sleep(Duration::from_millis(100 << (*attempt).min(6))).await;
    true
}

/// Runs task `id` on a tokio task of its own. The caller has claimed it (written it
/// `running` or `cancelling`), so exactly one runner works on each claim.
pub(crate) fn spawn(engine: &Arc<Engine>, id: &str, lease: Option<Lease>) {
    let token = CancellationToken::new();
    let calls = Arc::new(CallTokens::default());
    let tracked = engine.work().track_task(id, &token, lease.clone(), &calls);
    let engine = Arc::clone(engine);
    let id = id.to_owned();
    tokio::spawn(async move {
        run_task(&engine, &id, &token, &calls, lease.as_ref()).await;
        // Dropping it takes the task off this process's running work and wakes its waiters.
        drop(tracked);
    });
}

/// Runs the body of task `id` until it ends or parks, replaying its journal each time.
async fn run_task(
    engine: &Arc<Engine>,
    id: &str,
    token: &CancellationToken,
    calls: &Arc<CallTokens>,
    lease: Option<&Lease>,
) {
    let mut failures = 0;
    loop {
        let (task, _) = match engine.store().task(id).await {
            Ok(Some(found)) => found,
            Ok(None) => return,
            Err(error) => {
                if back_off(id, &mut failures, &error).await {
                    continue;
                }
                return;
            }
        };
        if !matches!(task.status, TaskStatus::Running | TaskStatus::Cancelling) {
            return;
        }
        if task.status == TaskStatus::Cancelling || task.cancel_requested {
            token.cancel();
        }
        // A body that may write makes cached reads of its toolset stale while it runs and
        // after.
        let tool = engine.tool(&task.tool);
        let _writing = tool.as_deref().map(|tool| engine.cache().writing(tool));
        let end = run_body(engine, &task, token, calls, lease).await;
        if let RunEnd::StoreFailed(error) = &end {
            if back_off(id, &mut failures, error).await {
                continue;
            }
            return;
        }
        let cancelled = token.is_cancelled();
        match settle_run(engine, id, end, cancelled, lease).await {
            Ok(true) => failures = 0,
            Ok(false) => return,
            // Another instance took the task over: its run is the one that counts.
            Err(RuntimeError::Store(error @ StoreError::Fenced { .. })) => {
                tracing::warn!(task_id = id, "{error}");
                return;
            }
            // The body runs again from its journal, reaching the same point, and the run is
            // recorded then.
            Err(error) => {
                if !back_off(id, &mut failures, &error).await {
                    return;
                }
            }
        }
    }
}

/// One run of a task's body.
async fn run_body(
    engine: &Arc<Engine>,
    task: &TaskRecord,
    token: &CancellationToken,
    calls: &Arc<CallTokens>,
    lease: Option<&Lease>,
) -> RunEnd {
    let Some(tool) = engine.tool(&task.tool) else {
        return RunEnd::Broken(ToolError::with_code(
            ErrorCode::UnknownTool,
            format!("tool `{}` is no longer registered", task.tool),
        ));
    };
    let session = match engine.store().session(&task.session_id).await {
        Ok(Some((session, _))) => session,
        Ok(None) => {
            return RunEnd::Broken(ToolError::with_code(
                ErrorCode::Journal,
                format!("the session `{}` of the task is gone", task.session_id),
            ));
        }
        Err(error) => return RunEnd::StoreFailed(error),
    };
    // The record keeps the calls' sensitive input sealed; the body gets it opened.
    let mut calls_in = task.calls.clone();
    let sealing = &engine.options().sealing;
    for call in &mut calls_in {
        if let Err(unsealable) = sealing.open(
            &tool.sensitivity().input,
            crate::sealing::SealScope {
                tool: tool.name(),
                session: &task.session_id,
            },
            &mut call.input,
        ) {
            return RunEnd::Broken(ToolError::with_code(
                ErrorCode::Unavailable,
                unsealable.message(tool.name()),
            ));
        }
    }
    let Some(first) = calls_in.first() else {
        return RunEnd::Broken(ToolError::with_code(
            ErrorCode::Journal,
            "the task has no starting call",
        ));
    };
    let run_id = task.run_id();
    let recorded = match engine.store().journal(&run_id).await {
        Ok(recorded) => recorded,
        Err(error) => return RunEnd::StoreFailed(error),
    };
    let (replies, mut incoming) = tokio::sync::mpsc::unbounded_channel();
    let journal = Journal::new(run_id, Arc::clone(engine.store()), lease.cloned(), recorded);
    let link = TaskLink {
        task_id: task.id.clone(),
        calls: calls_in.clone(),
        next: AtomicUsize::new(1),
        replies,
        answers: task.answers.clone(),
        discarding: AtomicBool::new(false),
        call_tokens: Arc::clone(calls),
    };
    let info = session_info(&session, &task.turn_id, task.current.as_ref(), task.caller);
    let (host, cx) = context::build(
        engine,
        Body {
            tool: &tool,
            info: Arc::new(info),
            call_id: &Arc::from(first.call_id.as_str()),
            caller: task.caller,
            input: &first.input,
            approved_by: task.approved_by.as_ref(),
            token: CallToken::given(token.clone()),
            journal: Some(journal),
            task: Some(link),
            // A task outlives the step that started it: it asks the runtime's model.
            model: None,
            step_input: first.step_input.clone(),
        },
    );
    let span = tracing::info_span!("task", task_id = %task.id, tool = tool.name());
    let run = tracing::Instrument::instrument(tool.invoke(first.input.clone(), cx), span);
    let mut run = std::pin::pin!(run);
    let mut deadline: Option<tokio::time::Instant> = None;
    let end = loop {
        let cleanup_over =
            tokio::time::sleep_until(deadline.unwrap_or_else(|| {
                tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600)
            }));
        tokio::select! {
            biased;
            Some((call, output)) = incoming.recv() => {
                record_reply(engine, &task.id, &tool, call, output, lease).await;
            }
            outcome = run.as_mut() => {
                let result = call_result(engine, &session.id, &first.turn_id, &tool, &first.call_id, outcome).await;
                break RunEnd::Returned(result);
            }
            () = host.parked.notified() => {
                let suspension = host.suspended.lock().ok().and_then(|mut s| s.take());
                break match suspension {
                    Some(suspension) => RunEnd::Parked(suspension),
                    None => RunEnd::Broken(ToolError::with_code(ErrorCode::Journal, "the body stopped without saying why")),
                };
            }
            // Cancelled: the body keeps running, with its token fired, for the cleanup
            // window; it ends on its own or is dropped when the window closes.
            () = token.cancelled(), if deadline.is_none() => {
                deadline = Some(tokio::time::Instant::now() + engine.options().task_cleanup);
            }
            () = cleanup_over, if deadline.is_some() => break RunEnd::CleanupTimedOut,
        }
    };
    if let Some(link) = &host.task {
        link.discarding.store(true, Ordering::SeqCst);
    }
    // Replies sent before the body stopped are recorded; none is lost with the body.
    while let Ok((call, output)) = incoming.try_recv() {
        record_reply(engine, &task.id, &tool, call, output, lease).await;
    }
    // The body is dropped as this fn returns, after `discarding` is set.
    end
}

/// Records a `serve` reply on call `index` (once) and announces it.
async fn record_reply(
    engine: &Arc<Engine>,
    id: &str,
    tool: &Tool,
    index: usize,
    output: Result<CallOutput, ToolError>,
    lease: Option<&Lease>,
) {
    let mut output = Some(output);
    let mut result: Option<CallResult> = None;
    loop {
        let (mut task, version) = match engine.store().task(id).await {
            Ok(Some(found)) => found,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(task_id = id, "recording a reply failed: {error}");
                return;
            }
        };
        let Some(call) = task.calls.get_mut(index) else {
            return;
        };
        let call_id = call.call_id.clone();
        if call.result.is_some() {
            return;
        }
        let result = match (&result, output.take()) {
            (Some(result), _) => result.clone(),
            (None, Some(output)) => {
                let made = call_result(
                    engine,
                    &task.session_id,
                    &call.turn_id,
                    tool,
                    &call_id,
                    output,
                )
                .await;
                result = Some(made.clone());
                made
            }
            (None, None) => return,
        };
        call.result = Some(result.clone());
        let turn_id = call.turn_id.clone();
        match engine
            .store()
            .write_task(&task, Some(version), keeping(lease))
            .await
        {
            Ok(_) => {
                if let Some(tokens) = engine.work().task_calls(id) {
                    tokens.forget(index);
                }
                engine.emit(Event::TaskResult {
                    session_id: task.session_id.clone(),
                    result: TaskResult {
                        task_id: id.to_owned(),
                        call_id,
                        turn_id,
                        result,
                    },
                });
                engine.work().task_changed().notify_waiters();
                return;
            }
            Err(StoreError::Conflict(_)) => {}
            Err(error) => {
                tracing::warn!(task_id = id, "recording a reply failed: {error}");
                return;
            }
        }
    }
}

/// Records how a run ended. Returns whether the body should run again now (a call or an
/// answer arrived meanwhile, a sleep is already over, or a cancel came in).
async fn settle_run(
    engine: &Arc<Engine>,
    id: &str,
    end: RunEnd,
    cancelled: bool,
    lease: Option<&Lease>,
) -> Result<bool, RuntimeError> {
    loop {
        let Some((mut task, version)) = engine.store().task(id).await? else {
            return Ok(false);
        };
        if task.status.is_over() {
            return Ok(false);
        }
        let cancelling =
            cancelled || task.status == TaskStatus::Cancelling || task.cancel_requested;
        let cleanup_timed_out = format!(
            "task {id} was cancelled; its cleanup did not finish within {:?} and was stopped",
            engine.options().task_cleanup
        );
        let ending = match &end {
            RunEnd::Returned(result) => Some(Ending::Returned(result)),
            RunEnd::CleanupTimedOut => Some(Ending::Failed(&cleanup_timed_out)),
            RunEnd::Broken(error) => Some(Ending::Failed(error.message())),
            // Handled by the runner, which runs the body again.
            RunEnd::StoreFailed(_) => return Ok(true),
            RunEnd::Parked(_) => None,
        };
        let (parked, ended) = match (&end, ending) {
            (_, Some(ending)) => (ParkedRun::default(), task.end_run(ending, cancelling)),
            (RunEnd::Parked(suspension), None) => {
                let now = engine.options().clock.now_ms();
                (
                    task.park_run(suspension, now, cancelling),
                    EndedRun::default(),
                )
            }
            _ => return Ok(true),
        };
        let ParkedRun { again, asked } = parked;
        let EndedRun { delivered, revoked } = ended;
        match engine
            .store()
            .write_task(&task, Some(version), keeping(lease))
            .await
        {
            Ok(_) => {}
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        }
        engine.emit_resolved(&task.session_id, &task.turn_id, revoked, Outcome::Cancelled);
        for result in delivered {
            engine.emit(Event::TaskResult {
                session_id: task.session_id.clone(),
                result,
            });
        }
        if let Some(request) = asked {
            super::recheck(engine, id, &request);
            engine.emit(Event::InputRequested { request });
        }
        if task.status.is_over() {
            engine.emit(Event::TaskEnded {
                session_id: task.session_id.clone(),
                task_id: id.to_owned(),
                status: task.status,
            });
        }
        engine.work().task_changed().notify_waiters();
        return Ok(again);
    }
}
