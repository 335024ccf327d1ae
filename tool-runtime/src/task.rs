//! Workflow tasks: the bodies of `workflow = task` and `workflow = serve` tools run as tasks of
//! their own, outside the step that started them.
//!
//! A task is a [`TaskRecord`] in the store. Its body replays from its journal like any workflow
//! body; when it waits (a question, a durable sleep, a `serve` task between calls) the body is
//! dropped and the record says what it waits on, so a waiting task holds no tokio task and
//! survives a restart. Results go to the turn that made the call: as `task.result` events, through
//! [`Turn::task_results`] (the `task_result` messages for the model) and through the `task_wait`
//! meta-tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    CallContext, CallOutput, Caller, Entry, ErrorCode, ModelOutput, ResponseVerdict, SessionInfo,
    Tool, ToolError, ToolKind,
};

use crate::call::{InputResponse, RespondOutcome};
use crate::error::RuntimeError;
use crate::event::Event;
use crate::host::{Journal, RuntimeHost, TaskLink};
use crate::pipeline::keep;
use crate::record::{
    Approver, CallResult, EntryKind, JournalEntry, Outcome, SessionRecord, TaskCall, TaskRecord,
    TaskResult, TaskStatus, TurnRecord,
};
use crate::runtime::Running;
use crate::runtime::{Runtime, Turn};
use crate::store::{Claim, Lease, StoreError};
use crate::transition::Suspension;
use crate::transition::answer::{decision_of, response_verdict, workflow_answer};
use crate::transition::task::{EndedRun, Ending, ParkedRun};

/// The longest `task_wait` may wait, in seconds, and how long it waits when not told.
const WAIT_MAX_SECONDS: u64 = 300;
const WAIT_DEFAULT_SECONDS: u64 = 30;
/// How often waiters look at the store, for results recorded by another process.
const POLL: Duration = Duration::from_millis(200);

/// The model-facing name of the meta-tool that waits for task results.
pub(crate) const TASK_WAIT: &str = "task_wait";
/// The model-facing name of the meta-tool that cancels a task.
pub(crate) const TASK_CANCEL: &str = "task_cancel";

/// What a task's body (and its response policy) sees of its session: the starting turn's.
fn task_info(session: &SessionRecord, task: &TaskRecord) -> SessionInfo {
    SessionInfo {
        id: session.id.clone(),
        turn_id: task.turn_id.clone(),
        parent: session.parent.clone(),
        initiator: session.initiator.clone(),
        current: task.current.clone(),
        interactive: session.interactive && task.caller != Caller::Schedule,
    }
}

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

impl Runtime {
    /// A `task` or `serve` call: starts its task (or, for a `serve` call carrying `task_id`,
    /// hands the call to that task) and returns the receipt.
    pub(crate) async fn start_task(
        &self,
        session: &SessionRecord,
        turn: &TurnRecord,
        tool: &Arc<Tool>,
        call_id: &str,
        mut input: Value,
        approved_by: Option<Approver>,
    ) -> CallResult {
        let entry = match tool.kind() {
            ToolKind::Workflow(entry) => entry,
            _ => Entry::Task,
        };
        if entry == Entry::Serve {
            let target = input.as_object_mut().and_then(|map| map.remove("task_id"));
            if let Some(Value::String(target)) = target {
                return self
                    .route_call(session, turn, tool, call_id, input, &target)
                    .await;
            }
        }
        if session.ended {
            return CallResult::failed(
                call_id,
                tool.name(),
                ToolError::with_code(
                    ErrorCode::Cancelled,
                    format!(
                        "the session has ended; `{}` starts no task in it",
                        tool.name()
                    ),
                ),
            );
        }
        let id = crate::ids::task_id(tool.name(), &turn.id, turn.steps, call_id);
        let record = TaskRecord::start(
            id.clone(),
            tool.name(),
            entry,
            turn,
            call_id,
            input,
            approved_by,
        );
        match self.0.store.write_task(&record, None, self.take()).await {
            Ok(written) => {
                self.emit(Event::TaskStarted {
                    session_id: session.id.clone(),
                    turn_id: turn.id.clone(),
                    task_id: id.clone(),
                    tool: tool.name().to_owned(),
                    call_id: call_id.to_owned(),
                });
                self.spawn_task(&id, written.lease);
            }
            // An earlier run of this call started it (the call ran again after a crash): the
            // task goes on, and recovery runs it if nothing does.
            Err(StoreError::Conflict(_)) => {}
            Err(error) => {
                return CallResult::failed(
                    call_id,
                    tool.name(),
                    ToolError::with_code(
                        ErrorCode::Journal,
                        format!(
                            "the task of `{}` could not be recorded: {error}; call it again",
                            tool.name()
                        ),
                    ),
                );
            }
        }
        let text = match entry {
            Entry::Serve => format!(
                "Started task {id}. Its result will arrive in a task_result message. To send it more, call `{}` again with \"task_id\": \"{id}\".",
                tool.name()
            ),
            _ => format!("Started task {id}. Its result will arrive in a task_result message."),
        };
        receipt(tool, call_id, &id, "started", text)
    }

    /// A `serve` call carrying `task_id`: queued on the task, which receives it in order.
    async fn route_call(
        &self,
        session: &SessionRecord,
        turn: &TurnRecord,
        tool: &Tool,
        call_id: &str,
        input: Value,
        target: &str,
    ) -> CallResult {
        let unknown = |why: &str| {
            CallResult::failed(
                call_id,
                tool.name(),
                ToolError::with_code(
                    ErrorCode::UnknownTask,
                    format!(
                        "`{}` has no running task `{target}` in this session ({why}); leave `task_id` out to start a new task",
                        tool.name()
                    ),
                ),
            )
        };
        loop {
            let (mut task, version) = match self.0.store.task(target).await {
                Ok(Some(found)) => found,
                Ok(None) => return unknown("no task has that id"),
                Err(error) => return store_failure(call_id, tool.name(), &error),
            };
            if task.session_id != session.id || task.tool != tool.name() {
                return unknown("no task has that id");
            }
            if task.status.is_over() || task.status == TaskStatus::Cancelling {
                return unknown("it has ended");
            }
            let text =
                format!("Sent to task {target}. Its result will arrive in a task_result message.");
            if task
                .calls
                .iter()
                .any(|c| c.call_id == call_id && c.turn_id == turn.id && c.step == turn.steps)
            {
                // This call was queued by an earlier run of it.
                return receipt(tool, call_id, target, "sent", text);
            }
            let wake = task.queue_call(TaskCall::new(turn, call_id, input.clone()));
            let taking = if wake { self.take() } else { Claim::None };
            match self.0.store.write_task(&task, Some(version), taking).await {
                Ok(written) => {
                    if wake {
                        self.spawn_task(target, written.lease);
                    }
                    return receipt(tool, call_id, target, "sent", text);
                }
                Err(StoreError::Conflict(_)) => {}
                Err(error) => return store_failure(call_id, tool.name(), &error),
            }
        }
    }

    /// Runs task `id` on a tokio task of its own. The caller has claimed it (written it
    /// `running` or `cancelling`), so exactly one runner works on each claim.
    pub(crate) fn spawn_task(&self, id: &str, lease: Option<Lease>) {
        let token = CancellationToken::new();
        let registration = self.0.registrations.fetch_add(1, Ordering::Relaxed);
        let leased = lease.is_some();
        if let Ok(mut running) = self.0.tasks.lock() {
            running.insert(
                id.to_owned(),
                Running {
                    registration,
                    token: token.clone(),
                    lease: lease
                        .clone()
                        .map(|lease| (lease, std::time::Instant::now())),
                },
            );
        }
        if leased {
            self.ensure_heartbeat();
        }
        let runtime = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            runtime.run_task(&id, &token, lease.as_ref()).await;
            if let Ok(mut running) = runtime.0.tasks.lock()
                && running
                    .get(&id)
                    .is_some_and(|r| r.registration == registration)
            {
                running.remove(&id);
            }
            runtime.0.task_changed.notify_waiters();
        });
    }

    /// Runs the body of task `id` until it ends or parks, replaying its journal each time.
    async fn run_task(&self, id: &str, token: &CancellationToken, lease: Option<&Lease>) {
        let mut failures = 0;
        loop {
            let (task, _) = match self.0.store.task(id).await {
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
            let tool = crate::runtime::find_tool(&self.registry(), &task.tool);
            let _writing = tool.as_deref().map(|tool| self.0.cache.writing(tool));
            let end = self.run_body(&task, token, lease).await;
            if let RunEnd::StoreFailed(error) = &end {
                if back_off(id, &mut failures, error).await {
                    continue;
                }
                return;
            }
            let cancelled = token.is_cancelled();
            match self.settle_run(id, end, cancelled, lease).await {
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
        &self,
        task: &TaskRecord,
        token: &CancellationToken,
        lease: Option<&Lease>,
    ) -> RunEnd {
        let Some(tool) = crate::runtime::find_tool(&self.registry(), &task.tool) else {
            return RunEnd::Broken(ToolError::with_code(
                ErrorCode::UnknownTool,
                format!("tool `{}` is no longer registered", task.tool),
            ));
        };
        let session = match self.0.store.session(&task.session_id).await {
            Ok(Some((session, _))) => session,
            Ok(None) => {
                return RunEnd::Broken(ToolError::with_code(
                    ErrorCode::Journal,
                    format!("the session `{}` of the task is gone", task.session_id),
                ));
            }
            Err(error) => return RunEnd::StoreFailed(error),
        };
        let Some(first) = task.calls.first() else {
            return RunEnd::Broken(ToolError::with_code(
                ErrorCode::Journal,
                "the task has no starting call",
            ));
        };
        let run_id = task.run_id();
        let recorded = match self.0.store.journal(&run_id).await {
            Ok(recorded) => recorded,
            Err(error) => return RunEnd::StoreFailed(error),
        };
        let info = task_info(&session, task);
        let (replies, mut incoming) = tokio::sync::mpsc::unbounded_channel();
        let host = Arc::new(RuntimeHost {
            token: token.clone(),
            events: self.0.events.clone(),
            states: self.0.states.clone(),
            tool: tool.clone(),
            sandbox: self.0.sandbox.clone(),
            session_id: session.id.clone(),
            turn_id: task.turn_id.clone(),
            call_id: first.call_id.clone(),
            input: if tool.label().delta.is_some() {
                first.input.clone()
            } else {
                Value::Null
            },
            interactive: info.interactive,
            steps: toolwright_core::StepNames::default(),
            journal: Some(Journal {
                run_id,
                store: self.0.store.clone(),
                fence: lease.cloned(),
                recorded,
                cursor: AtomicU32::new(0),
            }),
            suspended: std::sync::Mutex::new(None),
            parked: tokio::sync::Notify::new(),
            clock: self.0.options.clock.clone(),
            task: Some(TaskLink {
                calls: task.calls.clone(),
                next: AtomicUsize::new(1),
                replies,
                answers: task.answers.clone(),
                discarding: AtomicBool::new(false),
            }),
        });
        let mut builder = CallContext::builder()
            .session(info)
            .call_id(first.call_id.clone())
            .tool_name(tool.name())
            .caller(task.caller)
            .host(Arc::clone(&host) as Arc<dyn toolwright_core::CallHost>);
        if let Some(approver) = &task.approved_by {
            builder = builder.approved_by(approver.principal.clone());
        }
        let span = tracing::info_span!("task", task_id = %task.id, tool = tool.name());
        let run = tracing::Instrument::instrument(
            tool.invoke(first.input.clone(), builder.build()),
            span,
        );
        let mut run = std::pin::pin!(run);
        let mut deadline: Option<tokio::time::Instant> = None;
        let end = loop {
            let cleanup_over = tokio::time::sleep_until(deadline.unwrap_or_else(|| {
                tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600)
            }));
            tokio::select! {
                biased;
                Some((call, output)) = incoming.recv() => {
                    self.record_reply(&task.id, &tool, call, output, lease).await;
                }
                outcome = run.as_mut() => {
                    let result = self.call_result(&session.id, &first.turn_id, &tool, &first.call_id, outcome);
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
                    deadline = Some(tokio::time::Instant::now() + self.0.options.task_cleanup);
                }
                () = cleanup_over, if deadline.is_some() => break RunEnd::CleanupTimedOut,
            }
        };
        if let Some(link) = &host.task {
            link.discarding.store(true, Ordering::SeqCst);
        }
        // Replies sent before the body stopped are recorded; none is lost with the body.
        while let Ok((call, output)) = incoming.try_recv() {
            self.record_reply(&task.id, &tool, call, output, lease)
                .await;
        }
        // The body is dropped as this fn returns, after `discarding` is set.
        end
    }

    /// Records a `serve` reply on call `index` (once) and announces it.
    async fn record_reply(
        &self,
        id: &str,
        tool: &Tool,
        index: usize,
        output: Result<CallOutput, ToolError>,
        lease: Option<&Lease>,
    ) {
        let mut output = Some(output);
        let mut result: Option<CallResult> = None;
        loop {
            let (mut task, version) = match self.0.store.task(id).await {
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
                    let made =
                        self.call_result(&task.session_id, &call.turn_id, tool, &call_id, output);
                    result = Some(made.clone());
                    made
                }
                (None, None) => return,
            };
            call.result = Some(result.clone());
            let turn_id = call.turn_id.clone();
            match self
                .0
                .store
                .write_task(&task, Some(version), keep(lease))
                .await
            {
                Ok(_) => {
                    self.emit(Event::TaskResult {
                        session_id: task.session_id.clone(),
                        result: TaskResult {
                            task_id: id.to_owned(),
                            call_id,
                            turn_id,
                            result,
                        },
                    });
                    self.0.task_changed.notify_waiters();
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
        &self,
        id: &str,
        end: RunEnd,
        cancelled: bool,
        lease: Option<&Lease>,
    ) -> Result<bool, RuntimeError> {
        loop {
            let Some((mut task, version)) = self.0.store.task(id).await? else {
                return Ok(false);
            };
            if task.status.is_over() {
                return Ok(false);
            }
            let cancelling =
                cancelled || task.status == TaskStatus::Cancelling || task.cancel_requested;
            let cleanup_timed_out = format!(
                "task {id} was cancelled; its cleanup did not finish within {:?} and was stopped",
                self.0.options.task_cleanup
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
                    let now = self.0.options.clock.now_ms();
                    (
                        task.park_run(suspension, now, cancelling),
                        EndedRun::default(),
                    )
                }
                _ => return Ok(true),
            };
            let ParkedRun { again, asked } = parked;
            let EndedRun { delivered, revoked } = ended;
            match self
                .0
                .store
                .write_task(&task, Some(version), keep(lease))
                .await
            {
                Ok(_) => {}
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
            for request_id in revoked {
                self.emit(Event::InputResolved {
                    session_id: task.session_id.clone(),
                    turn_id: task.turn_id.clone(),
                    request_id,
                    outcome: Outcome::Cancelled,
                });
            }
            for result in delivered {
                self.emit(Event::TaskResult {
                    session_id: task.session_id.clone(),
                    result,
                });
            }
            if let Some(request) = asked {
                self.emit(Event::InputRequested { request });
            }
            if task.status.is_over() {
                self.emit(Event::TaskEnded {
                    session_id: task.session_id.clone(),
                    task_id: id.to_owned(),
                    status: task.status,
                });
            }
            self.0.task_changed.notify_waiters();
            return Ok(again);
        }
    }

    /// Answers a question asked by a task's body: the answer is journaled (the first valid one
    /// wins) and the task, if nothing else is pending, runs again.
    pub(crate) async fn settle_task(
        &self,
        id: &str,
        response: InputResponse,
    ) -> Result<RespondOutcome, RuntimeError> {
        loop {
            let Some((mut task, version)) = self.0.store.task(id).await? else {
                return Ok(RespondOutcome::Dropped);
            };
            let Some(request) = task
                .requests
                .iter()
                .find(|r| r.request_id == response.request_id)
                .cloned()
            else {
                return Ok(RespondOutcome::Dropped);
            };
            if !request.is_pending() || task.status != TaskStatus::Waiting {
                return Ok(RespondOutcome::Dropped);
            }
            let Some((session, _)) = self.0.store.session(&task.session_id).await? else {
                return Err(RuntimeError::UnknownSession(task.session_id.clone()));
            };
            let registry = self.registry();
            let verdict = response_verdict(
                registry.get(&task.tool),
                &task_info(&session, &task),
                &request,
                &response,
            );
            if let ResponseVerdict::Rejected(reason) = verdict {
                return Ok(RespondOutcome::Rejected { reason });
            }
            let answer = match workflow_answer(&request, &response) {
                Ok(answer) => answer,
                Err(reason) => return Ok(RespondOutcome::Rejected { reason }),
            };
            let position = request.journal_position.unwrap_or_default();
            // The answer is claimed on the task record first (the first valid answer wins
            // there, and a cancel that revoked the question wins over it); the journal records it
            // after, or, if this process stops in between, when the body next runs.
            let Some(pending) = task.settle_answer(
                &response.request_id,
                answer.clone(),
                decision_of(response.decision),
                response.principal.clone(),
                response.note.clone(),
            ) else {
                return Ok(RespondOutcome::Dropped);
            };
            let resume = pending.is_empty();
            let taking = if resume { self.take() } else { Claim::None };
            let lease = match self.0.store.write_task(&task, Some(version), taking).await {
                Ok(written) => written.lease,
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            };
            let entry = JournalEntry {
                position,
                kind: EntryKind::Ask,
                name: crate::ids::ask_name(position),
                value: serde_json::to_value(&answer).unwrap_or(Value::Null),
            };
            match self.0.store.append_journal(&task.run_id(), &entry).await {
                Ok(()) | Err(StoreError::Conflict(_)) => {}
                Err(error) => {
                    tracing::warn!(
                        task_id = id,
                        "journaling an answer failed: {error}; the body journals it when it runs"
                    );
                }
            }
            self.emit(Event::InputResolved {
                session_id: task.session_id.clone(),
                turn_id: task.turn_id.clone(),
                request_id: request.request_id.clone(),
                outcome: Outcome::Answered,
            });
            if !resume {
                return Ok(RespondOutcome::Settled { pending });
            }
            self.spawn_task(id, lease);
            return Ok(RespondOutcome::TaskResumed {
                task_id: id.to_owned(),
            });
        }
    }

    /// The task `id`.
    pub async fn task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        self.0
            .store
            .task(id)
            .await?
            .map(|(task, _)| task)
            .ok_or_else(|| RuntimeError::UnknownTask(id.to_owned()))
    }

    /// The tasks of session `session_id`, oldest first.
    pub async fn tasks(&self, session_id: &str) -> Result<Vec<TaskRecord>, RuntimeError> {
        let mut tasks = Vec::new();
        for id in self.0.store.session_tasks(session_id).await? {
            if let Some((task, _)) = self.0.store.task(&id).await? {
                tasks.push(task);
            }
        }
        Ok(tasks)
    }

    /// Cancels task `id`: its body's token fires and the body gets up to
    /// [`crate::Options::task_cleanup`] to run its cleanup (a parked body is run again for it,
    /// with every wait returning at once: `ask` answers `cancelled`, `sleep` fails, a `serve`
    /// body's `next` returns `None`). Its pending questions are revoked and calls still waiting
    /// for a result fail with `CANCELLED`. Returns the task as it is after the cleanup (or when
    /// the window has passed, if another process runs it).
    pub async fn cancel_task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        loop {
            let Some((mut task, version)) = self.0.store.task(id).await? else {
                return Err(RuntimeError::UnknownTask(id.to_owned()));
            };
            if task.status.is_over() {
                return Ok(task);
            }
            match task.status {
                TaskStatus::Running | TaskStatus::Cancelling => {
                    let local = self
                        .0
                        .tasks
                        .lock()
                        .ok()
                        .and_then(|running| running.get(id).map(|r| r.token.clone()));
                    // Recorded as well as signalled: a runner that already looked at its token
                    // (or one in another process, or recovery) sees the request when it records
                    // the run, and runs the cleanup instead of parking.
                    if task.request_cancel() {
                        match self.0.store.put_task(&task, Some(version)).await {
                            Ok(_) => {}
                            Err(StoreError::Conflict(_)) => continue,
                            Err(error) => return Err(error.into()),
                        }
                    }
                    if let Some(token) = local {
                        token.cancel();
                    }
                }
                _ => {
                    let revoked = task.begin_cancel();
                    let lease = match self
                        .0
                        .store
                        .write_task(&task, Some(version), self.take())
                        .await
                    {
                        Ok(written) => written.lease,
                        Err(StoreError::Conflict(_)) => continue,
                        Err(error) => return Err(error.into()),
                    };
                    for request_id in revoked {
                        self.emit(Event::InputResolved {
                            session_id: task.session_id.clone(),
                            turn_id: task.turn_id.clone(),
                            request_id,
                            outcome: Outcome::Cancelled,
                        });
                    }
                    self.spawn_task(id, lease);
                }
            }
            break;
        }
        let deadline =
            tokio::time::Instant::now() + self.0.options.task_cleanup + Duration::from_secs(1);
        loop {
            let notified = self.0.task_changed.notified();
            let task = self.task(id).await?;
            if task.status.is_over() || tokio::time::Instant::now() >= deadline {
                return Ok(task);
            }
            tokio::select! {
                () = notified => {}
                // Another instance's writes (Postgres notifications), or a poll.
                () = self.0.store.changed(POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Cancels, in the background, the tasks turn `turn_id` started.
    pub(crate) async fn cancel_tasks_of_turn(&self, session_id: &str, turn_id: &str) {
        let Ok(tasks) = self.tasks(session_id).await else {
            return;
        };
        for task in tasks {
            if task.turn_id == turn_id && !task.status.is_over() {
                let runtime = self.clone();
                tokio::spawn(async move {
                    if let Err(error) = runtime.cancel_task(&task.id).await {
                        tracing::warn!(task_id = %task.id, "cancelling the task failed: {error}");
                    }
                });
            }
        }
    }

    /// Results of the calls turn `turn_id` made to tasks, not yet delivered; marks them
    /// delivered. With `only`, the results of that task alone.
    pub(crate) async fn take_results(
        &self,
        session_id: &str,
        turn_id: &str,
        only: Option<&str>,
    ) -> Result<Vec<TaskResult>, RuntimeError> {
        let ids = match only {
            Some(id) => vec![id.to_owned()],
            None => self.0.store.session_tasks(session_id).await?,
        };
        let mut taken = Vec::new();
        for id in ids {
            loop {
                let Some((mut task, version)) = self.0.store.task(&id).await? else {
                    break;
                };
                let mut found = Vec::new();
                for call in &mut task.calls {
                    if call.turn_id == turn_id
                        && !call.delivered
                        && let Some(result) = &call.result
                    {
                        call.delivered = true;
                        found.push(TaskResult {
                            task_id: id.clone(),
                            call_id: call.call_id.clone(),
                            turn_id: call.turn_id.clone(),
                            result: result.clone(),
                        });
                    }
                }
                if found.is_empty() {
                    break;
                }
                match self.0.store.put_task(&task, Some(version)).await {
                    Ok(_) => {
                        taken.extend(found);
                        break;
                    }
                    Err(StoreError::Conflict(_)) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(taken)
    }

    /// Tasks that still owe turn `turn_id` a result (not produced or not delivered yet).
    pub(crate) async fn owing(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<TaskRecord>, RuntimeError> {
        // Without task tools no task exists: turns end without reading the store for them.
        if !self.0.runs_tasks {
            return Ok(Vec::new());
        }
        Ok(self
            .tasks(session_id)
            .await?
            .into_iter()
            .filter(|t| t.owes(turn_id))
            .collect())
    }

    /// Waits until turn `turn_id` has task results, `timeout` passes, `cancel` fires, or no
    /// task owes the turn anything; returns the results taken.
    pub(crate) async fn wait_results(
        &self,
        session_id: &str,
        turn_id: &str,
        only: Option<&str>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Vec<TaskResult>, RuntimeError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.0.task_changed.notified();
            let results = self.take_results(session_id, turn_id, only).await?;
            if !results.is_empty() {
                return Ok(results);
            }
            let owing = self.owing(session_id, turn_id).await?;
            if !owing.iter().any(|t| only.is_none_or(|id| t.id == id))
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(Vec::new());
            }
            tokio::select! {
                () = notified => {}
                // Another instance's writes (Postgres notifications), or a poll.
                () = self.0.store.changed(POLL) => {}
                () = tokio::time::sleep_until(deadline) => {}
                () = cancel.cancelled() => return Ok(Vec::new()),
            }
        }
    }

    /// The `task_wait` and `task_cancel` meta-tools.
    pub(crate) async fn task_meta(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
        cancel: &CancellationToken,
    ) -> CallResult {
        let fail = |code: ErrorCode, message: String| {
            CallResult::failed(call_id, name, ToolError::with_code(code, message))
        };
        let input = match toolwright_core::json::parse_arguments(name, arguments) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return fail(ErrorCode::InvalidInput, format!("`{name}` takes an object"));
            }
            Err(error) => return CallResult::failed(call_id, name, error.into_tool_error()),
        };
        let allowed: &[&str] = if name == TASK_WAIT {
            &["task_id", "timeout_seconds"]
        } else {
            &["task_id"]
        };
        if let Some(key) = input.keys().find(|k| !allowed.contains(&k.as_str())) {
            return fail(
                ErrorCode::InvalidInput,
                format!(
                    "`{name}` has no field `{key}`; it takes {}",
                    allowed
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            );
        }
        let target = match input.get("task_id") {
            None | Some(Value::Null) if name == TASK_WAIT => None,
            Some(Value::String(id)) => Some(id.clone()),
            _ => {
                return fail(
                    ErrorCode::InvalidInput,
                    format!("`{name}` needs `task_id`, the id from a task's receipt (a string)"),
                );
            }
        };
        if let Some(id) = &target {
            match self.0.store.task(id).await {
                Ok(Some((task, _))) if task.session_id == session_id => {}
                Ok(_) => {
                    return fail(
                        ErrorCode::UnknownTask,
                        format!(
                            "there is no task `{id}` in this session; use the id from a task's receipt"
                        ),
                    );
                }
                Err(error) => return store_failure(call_id, name, &error),
            }
        }
        if name == TASK_CANCEL {
            let Some(id) = target else {
                return fail(
                    ErrorCode::InvalidInput,
                    "`task_cancel` needs `task_id`".into(),
                );
            };
            let before = match self.task(&id).await {
                Ok(task) => task.status,
                Err(error) => return fail(ErrorCode::Journal, error.to_string()),
            };
            if before.is_over() {
                return meta_result(
                    call_id,
                    name,
                    json!({ "task_id": id, "status": before }),
                    format!(
                        "Task {id} had already ended ({}); nothing to cancel.",
                        before.describe()
                    ),
                );
            }
            let after = match self.cancel_task(&id).await {
                Ok(task) => task,
                Err(error) => return fail(ErrorCode::Journal, error.to_string()),
            };
            // The model cancelled it itself: the cancellation results need no message, but
            // results the task produced before the cancel are handed over here.
            let taken = self
                .take_results(session_id, turn_id, Some(&id))
                .await
                .unwrap_or_default();
            let produced: Vec<TaskResult> = taken
                .into_iter()
                .filter(|r| {
                    r.result
                        .error
                        .as_ref()
                        .is_none_or(|e| e.code() != ErrorCode::Cancelled)
                })
                .collect();
            let mut text = if after.status.is_over() {
                format!("Task {id} was cancelled; its cleanup ran.")
            } else {
                format!("Task {id} is being cancelled; its cleanup is still running.")
            };
            for result in &produced {
                text.push('\n');
                text.push_str(&result.message());
            }
            return meta_result(
                call_id,
                name,
                json!({ "task_id": id, "status": after.status, "results": produced }),
                text,
            );
        }
        let seconds = match input.get("timeout_seconds") {
            None | Some(Value::Null) => WAIT_DEFAULT_SECONDS,
            Some(value) => match value.as_u64() {
                Some(s) if (1..=WAIT_MAX_SECONDS).contains(&s) => s,
                _ => {
                    return fail(
                        ErrorCode::InvalidInput,
                        format!(
                            "`timeout_seconds` must be a whole number from 1 to {WAIT_MAX_SECONDS}, not {value}"
                        ),
                    );
                }
            },
        };
        let results = match self
            .wait_results(
                session_id,
                turn_id,
                target.as_deref(),
                Duration::from_secs(seconds),
                cancel,
            )
            .await
        {
            Ok(results) => results,
            Err(error) => return fail(ErrorCode::Journal, error.to_string()),
        };
        if cancel.is_cancelled() {
            return fail(
                ErrorCode::Cancelled,
                "`task_wait` was cancelled with its turn".into(),
            );
        }
        if !results.is_empty() {
            let text = results
                .iter()
                .map(TaskResult::message)
                .collect::<Vec<_>>()
                .join("\n");
            return meta_result(call_id, name, json!({ "results": results }), text);
        }
        let owing = self.owing(session_id, turn_id).await.unwrap_or_default();
        let owing: Vec<&TaskRecord> = owing
            .iter()
            .filter(|t| target.as_deref().is_none_or(|id| t.id == id))
            .collect();
        if owing.is_empty() {
            let text = match &target {
                Some(id) => {
                    format!("Task {id} owes this turn nothing: its results were already delivered.")
                }
                None => "No task of this turn is running; there is nothing to wait for.".to_owned(),
            };
            return meta_result(
                call_id,
                name,
                json!({ "status": "none", "tasks": [] }),
                text,
            );
        }
        let tasks: Vec<Value> = owing
            .iter()
            .map(|t| json!({ "task_id": t.id, "status": t.status }))
            .collect();
        let text = format!(
            "Still running after {seconds} s: {}. Call task_wait again, or continue with other work; results will arrive in task_result messages.",
            owing
                .iter()
                .map(|t| format!("task {} ({})", t.id, t.status.describe()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        meta_result(
            call_id,
            name,
            json!({ "status": "running", "tasks": tasks }),
            text,
        )
    }

    /// Runs tasks a stopped process left `running` or `cancelling` again from their journals:
    /// `ids` (every open task when `None`), claimed with `take_over` (whether a live lease
    /// keeps a task with its holder) .
    pub(crate) async fn recover_tasks(
        &self,
        ids: Option<Vec<String>>,
        take_over: bool,
    ) -> Result<Vec<String>, RuntimeError> {
        let mut recovered = Vec::new();
        let ids = match ids {
            Some(ids) => ids,
            None => self.0.store.open_tasks().await?,
        };
        for id in ids {
            let local = self
                .0
                .tasks
                .lock()
                .is_ok_and(|running| running.contains_key(&id));
            if local {
                continue;
            }
            let (task, version) = match self.0.store.task(&id).await {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                // One record that cannot be read must not stop the take-over of the rest.
                Err(error) if take_over => {
                    tracing::warn!(task_id = id, "cannot take over a running task: {error}");
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            if !task.is_leased() {
                continue;
            }
            let claim = if take_over {
                Claim::TakeOver {
                    owner: &self.0.options.instance,
                    ttl: self.0.options.lease,
                }
            } else {
                self.take()
            };
            match self.0.store.write_task(&task, Some(version), claim).await {
                Ok(written) => {
                    self.spawn_task(&id, written.lease);
                    recovered.push(id);
                }
                // Taken (or changed) by another instance meanwhile.
                Err(StoreError::Conflict(_)) => {}
                Err(error) if take_over => {
                    tracing::warn!(task_id = id, "taking over a running task failed: {error}");
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(recovered)
    }

    /// Wakes tasks whose durable sleep is over.
    pub(crate) async fn wake_tasks(&self, now: u64) -> Result<Vec<String>, RuntimeError> {
        let mut woken = Vec::new();
        for id in self.0.store.due_tasks(now).await? {
            loop {
                let Some((mut task, version)) = self.0.store.task(&id).await? else {
                    break;
                };
                if !task.wake(now) {
                    break;
                }
                match self
                    .0
                    .store
                    .write_task(&task, Some(version), self.take())
                    .await
                {
                    Ok(written) => {
                        self.spawn_task(&id, written.lease);
                        woken.push(id.clone());
                        break;
                    }
                    Err(StoreError::Conflict(_)) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(woken)
    }
}

impl Turn {
    /// Results of this turn's task calls that have not reached the model yet, marked delivered
    /// as they are returned. Add each [`TaskResult::message`] to the model's history.
    pub async fn task_results(&self) -> Result<Vec<TaskResult>, RuntimeError> {
        self.runtime
            .take_results(&self.session_id, &self.id, None)
            .await
    }

    /// Like [`Turn::task_results`], for task `task_id` alone (a host that hands each task's
    /// result over on its own, e.g. through the MCP tasks extension).
    pub async fn task_results_of(&self, task_id: &str) -> Result<Vec<TaskResult>, RuntimeError> {
        self.runtime
            .take_results(&self.session_id, &self.id, Some(task_id))
            .await
    }

    /// Waits up to `timeout` for task results of this turn and takes them (see
    /// [`Turn::task_results`]). Returns an empty list at the timeout, or at once when no task
    /// owes the turn anything.
    pub async fn wait_task_results(
        &self,
        timeout: Duration,
    ) -> Result<Vec<TaskResult>, RuntimeError> {
        self.runtime
            .wait_results(&self.session_id, &self.id, None, timeout, &self.token)
            .await
    }

    /// Tasks that still owe this turn a result: while there are any, the turn cannot end.
    pub async fn open_tasks(&self) -> Result<Vec<TaskRecord>, RuntimeError> {
        self.runtime.owing(&self.session_id, &self.id).await
    }
}

fn receipt(tool: &Tool, call_id: &str, task_id: &str, status: &str, text: String) -> CallResult {
    CallResult {
        call_id: call_id.to_owned(),
        tool: tool.name().to_owned(),
        is_error: false,
        output: json!({ "task_id": task_id, "status": status }),
        model: ModelOutput::Text(text),
        error: None,
        ends_turn: false,
        label: None,
    }
}

fn meta_result(call_id: &str, name: &str, output: Value, text: String) -> CallResult {
    CallResult {
        call_id: call_id.to_owned(),
        tool: name.to_owned(),
        is_error: false,
        output,
        model: ModelOutput::Text(text),
        error: None,
        ends_turn: false,
        label: None,
    }
}

fn store_failure(call_id: &str, tool: &str, error: &StoreError) -> CallResult {
    CallResult::failed(call_id, tool, journal_failure(error))
}

fn journal_failure(error: &StoreError) -> ToolError {
    ToolError::with_code(
        ErrorCode::Journal,
        format!("the task store failed: {error}; try again"),
    )
}
