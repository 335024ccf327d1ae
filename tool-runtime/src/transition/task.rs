//! Transitions of a workflow task (`workflow = task` or `serve`).

use std::collections::BTreeMap;

use serde_json::Value;
use toolwright_core::{AskAnswer, Entry, ErrorCode, Principal, ToolError};

use super::Suspension;
use crate::record::{
    Approver, CallResult, Decision, InputRequest, Outcome, RequestStatus, TaskCall, TaskRecord,
    TaskResult, TaskStatus, TurnRecord,
};

/// What recording a parked run changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ParkedRun {
    /// The body should run again now (an answer, a call or a cancel arrived meanwhile, or its
    /// sleep is already over).
    pub(crate) again: bool,
    /// The question the body asked, newly recorded.
    pub(crate) asked: Option<InputRequest>,
}

/// What ending a task changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct EndedRun {
    /// The results of the calls that had none, for the turns that made them.
    pub(crate) delivered: Vec<TaskResult>,
    /// The questions revoked (`cancelled`).
    pub(crate) revoked: Vec<String>,
}

/// How a task's run ended, as far as its calls' results go.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ending<'a> {
    /// The body returned this result.
    Returned(&'a CallResult),
    /// The run failed (could not start, or its cleanup window closed), saying why.
    Failed(&'a str),
}

impl TaskRecord {
    /// The task `id` that call `call` (with `input`, of `tool` with entry point `entry`) of
    /// `turn`'s current step starts: running.
    pub(crate) fn start(
        id: String,
        tool: &str,
        entry: Entry,
        turn: &TurnRecord,
        call_id: &str,
        input: Value,
        approved_by: Option<Approver>,
    ) -> TaskRecord {
        TaskRecord {
            id,
            tool: tool.to_owned(),
            entry,
            session_id: turn.session_id.clone(),
            turn_id: turn.id.clone(),
            caller: turn.caller,
            current: turn.current.clone(),
            approved_by,
            status: TaskStatus::Running,
            cancel_requested: false,
            calls: vec![TaskCall::new(turn, call_id, input)],
            requests: Vec::new(),
            answers: BTreeMap::new(),
        }
    }

    /// Cancels, on their own, the calls with id `call_id` (made by turn `turn_id`, when given)
    /// that have no result yet: each gets a `CANCELLED` result now, and the body sees it
    /// cancelled. The task keeps serving. Returns the indexes of the calls cancelled.
    pub(crate) fn cancel_calls(
        &mut self,
        call_id: Option<&str>,
        turn_id: Option<&str>,
    ) -> Vec<usize> {
        // A `task` has one call, its body: it is cancelled whole (`cancel_task`).
        if self.status.is_over() || self.entry != Entry::Serve {
            return Vec::new();
        }
        let tool = self.tool.clone();
        let mut cancelled = Vec::new();
        for (index, call) in self.calls.iter_mut().enumerate() {
            let chosen = call_id.is_none_or(|id| call.call_id == id)
                && turn_id.is_none_or(|id| call.turn_id == id);
            if chosen && call.result.is_none() {
                call.cancelled = true;
                call.result = Some(CallResult::failed(
                    &call.call_id,
                    &tool,
                    ToolError::with_code(
                        ErrorCode::Cancelled,
                        format!(
                            "this call to task `{}` was cancelled; the task keeps serving: call it again with its task_id for a new revision",
                            self.id
                        ),
                    ),
                ));
                cancelled.push(index);
            }
        }
        cancelled
    }

    /// Queues `call` (a `serve` call carrying the task's id); an idle task wakes up to receive
    /// it. Returns whether it woke (its runner must be started).
    pub(crate) fn queue_call(&mut self, call: TaskCall) -> bool {
        self.calls.push(call);
        let wake = self.status == TaskStatus::Idle;
        if wake {
            self.status = TaskStatus::Running;
        }
        wake
    }

    /// Records a cancel asked for while the body runs (here or in another process): its
    /// runner sees it when it records the run, and runs the cleanup instead of parking.
    /// Returns whether the record changed.
    pub(crate) fn request_cancel(&mut self) -> bool {
        let changed = !self.cancel_requested;
        self.cancel_requested = true;
        changed
    }

    /// Cancels a parked task: its body runs again with its token fired for the cleanup, and its
    /// pending questions are revoked. Returns the revoked requests' ids.
    pub(crate) fn begin_cancel(&mut self) -> Vec<String> {
        self.status = TaskStatus::Cancelling;
        self.revoke_pending()
    }

    /// A sleeping task whose timer is due at `now_ms` runs again. Returns whether it does.
    pub(crate) fn wake(&mut self, now_ms: u64) -> bool {
        match self.status {
            TaskStatus::Sleeping { until_ms } if until_ms <= now_ms => {
                self.status = TaskStatus::Running;
                true
            }
            _ => false,
        }
    }

    /// Settles the task's pending question `request_id` with `answer` (recorded by journal
    /// position too: the body journals it when it next runs, if nobody did first). When no
    /// other question is pending the task runs again. Returns the requests still pending, or
    /// `None` (changing nothing) when the task waits on no such question.
    pub(crate) fn settle_answer(
        &mut self,
        request_id: &str,
        answer: AskAnswer,
        decision: Decision,
        responder: Option<Principal>,
        note: Option<String>,
    ) -> Option<Vec<String>> {
        if self.status != TaskStatus::Waiting {
            return None;
        }
        let request = self
            .requests
            .iter_mut()
            .find(|r| r.request_id == request_id && r.is_pending())?;
        request.status = RequestStatus::Settled {
            decision,
            responder,
            note: super::answer::answer_text(&answer).or(note),
        };
        let position = request.journal_position.unwrap_or_default();
        self.answers.insert(position, answer);
        let pending: Vec<String> = self
            .requests
            .iter()
            .filter(|r| r.is_pending())
            .map(|r| r.request_id.clone())
            .collect();
        if pending.is_empty() {
            self.status = TaskStatus::Running;
        }
        Some(pending)
    }

    /// Records that a run of the body parked with `suspension`, at `now_ms`. With `cancelling`
    /// (the task is being cancelled) it runs again at once with its token fired: pending waits
    /// return and the body's cleanup runs.
    pub(crate) fn park_run(
        &mut self,
        suspension: &Suspension,
        now_ms: u64,
        cancelling: bool,
    ) -> ParkedRun {
        let mut parked = ParkedRun::default();
        if cancelling {
            self.status = TaskStatus::Cancelling;
            parked.again = true;
            return parked;
        }
        match suspension {
            Suspension::Ask {
                position,
                request,
                deadline_ms,
            } => self.park_on(position, &mut parked, |task| {
                InputRequest::task_ask(task, *position, request, *deadline_ms)
            }),
            Suspension::Hook {
                position,
                hook,
                deadline_ms,
            } => self.park_on(position, &mut parked, |task| {
                InputRequest::task_hook_wait(task, *position, hook, *deadline_ms)
            }),
            Suspension::Sleep { until_ms } => {
                if now_ms >= *until_ms {
                    parked.again = true;
                } else {
                    self.status = TaskStatus::Sleeping {
                        until_ms: *until_ms,
                    };
                }
            }
            Suspension::Receive { index } => {
                if self.calls.len() > *index {
                    parked.again = true;
                } else {
                    self.status = TaskStatus::Idle;
                }
            }
        }
        parked
    }

    /// Parks on the request at journal `position` (a question, a hook's wait), opened with
    /// `open` the first time the body reaches it.
    fn park_on(
        &mut self,
        position: &u32,
        parked: &mut ParkedRun,
        open: impl FnOnce(&TaskRecord) -> InputRequest,
    ) {
        let existing = self
            .requests
            .iter()
            .find(|r| r.journal_position == Some(*position));
        match existing {
            Some(existing) if existing.is_pending() => self.status = TaskStatus::Waiting,
            // Answered (and journaled) while the body ran: replay to it.
            Some(_) => parked.again = true,
            None => {
                let asked = open(self);
                self.requests.push(asked.clone());
                self.status = TaskStatus::Waiting;
                parked.asked = Some(asked);
            }
        }
    }

    /// Ends the task after its last run (`cancelling`: it was being cancelled): every call
    /// without a result gets one (the body's result for the starting call of a `task`; for
    /// `serve` calls, which only replies answer, a failure), pending questions are revoked, and
    /// the task is `finished` or `cancelled`.
    pub(crate) fn end_run(&mut self, ending: Ending<'_>, cancelling: bool) -> EndedRun {
        let mut ended = EndedRun::default();
        let (id, tool, entry) = (self.id.clone(), self.tool.clone(), self.entry);
        for (position, call) in self.calls.iter_mut().enumerate() {
            if call.result.is_some() {
                continue;
            }
            let mut result = call_ending(&id, &tool, entry, position, call, ending, cancelling);
            result.call_id.clone_from(&call.call_id);
            call.result = Some(result.clone());
            ended.delivered.push(TaskResult {
                task_id: id.clone(),
                call_id: call.call_id.clone(),
                turn_id: call.turn_id.clone(),
                result,
            });
        }
        ended.revoked = self.revoke_pending();
        self.status = if cancelling {
            TaskStatus::Cancelled
        } else {
            TaskStatus::Finished
        };
        self.cancel_requested = false;
        ended
    }

    fn revoke_pending(&mut self) -> Vec<String> {
        let mut revoked = Vec::new();
        for request in self.requests.iter_mut().filter(|r| r.is_pending()) {
            request.status = RequestStatus::Revoked {
                outcome: Outcome::Cancelled,
            };
            revoked.push(request.request_id.clone());
        }
        revoked
    }
}

impl TaskCall {
    /// Call `call_id` of `turn`'s current step, with `input`, waiting for its result.
    pub(crate) fn new(turn: &TurnRecord, call_id: &str, input: Value) -> TaskCall {
        TaskCall {
            call_id: call_id.to_owned(),
            turn_id: turn.id.clone(),
            step: turn.steps,
            input,
            result: None,
            delivered: false,
            cancelled: false,
            step_input: turn.pending.as_ref().and_then(|step| step.input.clone()),
        }
    }
}

/// The result call `call` (at `position` among the task's calls) gets when the task ends so.
fn call_ending(
    id: &str,
    tool: &str,
    entry: Entry,
    position: usize,
    call: &TaskCall,
    ending: Ending<'_>,
    cancelling: bool,
) -> CallResult {
    let failed = |code: ErrorCode, message: String| {
        CallResult::failed(&call.call_id, tool, ToolError::with_code(code, message))
    };
    if cancelling {
        let message = match ending {
            Ending::Failed(why) => why.to_owned(),
            Ending::Returned(_) => {
                format!("task {id} was cancelled before it produced this result")
            }
        };
        return failed(ErrorCode::Cancelled, message);
    }
    match (entry, ending) {
        (Entry::Serve, Ending::Returned(result)) if result.is_error => failed(
            result
                .error
                .as_ref()
                .map_or(ErrorCode::ToolFailed, |e| e.code()),
            format!(
                "task {id} failed before replying: {}",
                result.model().to_text()
            ),
        ),
        (Entry::Serve, Ending::Returned(_)) => failed(
            ErrorCode::ToolFailed,
            format!("task {id} ended without replying to this call"),
        ),
        (_, Ending::Returned(result)) if position == 0 => result.clone(),
        (_, Ending::Failed(why)) => failed(ErrorCode::ToolFailed, why.to_owned()),
        (_, Ending::Returned(_)) => failed(
            ErrorCode::ToolFailed,
            format!("task {id} ended without a result"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolwright_core::{AskRequest, Caller, ErrorCode, ModelOutput, Principal, ToolError};

    use super::*;

    fn turn() -> TurnRecord {
        let alice = Principal::user("test", "alice");
        TurnRecord::begin("t1".into(), "s1".into(), Some(alice), Caller::Model, false)
    }

    fn new_task(entry: Entry) -> TaskRecord {
        TaskRecord::start(
            "deploy-1".into(),
            "deploy",
            entry,
            &turn(),
            "c1",
            json!({}),
            None,
        )
    }

    fn ok(call_id: &str) -> CallResult {
        CallResult {
            model_usage: None,
            call_id: call_id.into(),
            tool: "deploy".into(),
            is_error: false,
            output: json!("done"),
            projection: Some(ModelOutput::Text("done".into())),
            error: None,
            ends_turn: false,
            label: None,
        }
    }

    fn ask(position: u32) -> Suspension {
        Suspension::Ask {
            position,
            request: AskRequest::new("Go?"),
            deadline_ms: None,
        }
    }

    /// A task waiting on the question at journal position 0; the request's id.
    fn waiting() -> (TaskRecord, String) {
        let mut task = new_task(Entry::Task);
        let parked = task.park_run(&ask(0), 0, false);
        let id = parked.asked.unwrap().request_id;
        (task, id)
    }

    fn message(result: &CallResult) -> (ErrorCode, String) {
        let error = result.error.as_ref().unwrap();
        (error.code(), error.message().to_owned())
    }

    #[test]
    fn a_task_starts_running_with_its_starting_call() {
        let task = new_task(Entry::Serve);
        assert_eq!(task.status, TaskStatus::Running);
        assert_eq!(
            (task.session_id.as_str(), task.turn_id.as_str()),
            ("s1", "t1")
        );
        assert_eq!(task.calls.len(), 1);
        assert_eq!(
            (task.calls[0].call_id.as_str(), task.calls[0].step),
            ("c1", 0)
        );
        assert!(task.owes("t1"));
    }

    #[test]
    fn a_queued_call_wakes_an_idle_task_only() {
        let mut task = new_task(Entry::Serve);
        assert!(!task.queue_call(TaskCall::new(&turn(), "c2", json!({}))));
        assert_eq!(task.status, TaskStatus::Running);
        let parked = task.park_run(&Suspension::Receive { index: 3 }, 0, false);
        assert!(!parked.again);
        assert_eq!(task.status, TaskStatus::Idle);
        assert!(task.queue_call(TaskCall::new(&turn(), "c3", json!({}))));
        assert_eq!(task.status, TaskStatus::Running);
    }

    #[test]
    fn a_receive_whose_call_arrived_runs_again() {
        let mut task = new_task(Entry::Serve);
        task.queue_call(TaskCall::new(&turn(), "c2", json!({})));
        let parked = task.park_run(&Suspension::Receive { index: 1 }, 0, false);
        assert!(parked.again);
        assert_eq!(task.status, TaskStatus::Running);
    }

    #[test]
    fn a_cancel_while_the_body_runs_is_recorded_once() {
        let mut task = new_task(Entry::Task);
        assert!(task.request_cancel());
        assert!(!task.request_cancel());
        assert_eq!(task.status, TaskStatus::Running);
    }

    #[test]
    fn cancelling_a_parked_task_revokes_its_questions() {
        let (mut task, id) = waiting();
        assert_eq!(task.begin_cancel(), vec![id]);
        assert_eq!(task.status, TaskStatus::Cancelling);
        assert!(task.is_leased());
        assert_eq!(
            task.requests[0].status,
            RequestStatus::Revoked {
                outcome: Outcome::Cancelled
            }
        );
    }

    #[test]
    fn a_sleep_parks_until_its_timer_and_wakes_when_due() {
        let mut task = new_task(Entry::Task);
        let parked = task.park_run(&Suspension::Sleep { until_ms: 100 }, 10, false);
        assert!(!parked.again);
        assert_eq!(task.status, TaskStatus::Sleeping { until_ms: 100 });
        assert_eq!(task.wake_at(), Some(100));
        assert!(!task.wake(99));
        assert!(task.wake(100));
        assert_eq!(task.status, TaskStatus::Running);
        assert!(!task.wake(200), "only a sleeping task wakes");
    }

    #[test]
    fn a_sleep_already_over_runs_again() {
        let mut task = new_task(Entry::Task);
        assert!(
            task.park_run(&Suspension::Sleep { until_ms: 100 }, 100, false)
                .again
        );
        assert_eq!(task.status, TaskStatus::Running);
    }

    #[test]
    fn a_question_parks_the_task_once_and_an_answer_on_record_replays() {
        let (mut task, id) = waiting();
        assert_eq!(task.status, TaskStatus::Waiting);
        let request = &task.requests[0];
        assert_eq!(
            (
                request.task_id.as_deref(),
                request.call_id.as_deref(),
                request.journal_position
            ),
            (Some("deploy-1"), Some("c1"), Some(0))
        );
        // The same question again (a replay): no second request.
        let again = task.park_run(&ask(0), 0, false);
        assert_eq!(again, ParkedRun::default());
        assert_eq!(task.requests.len(), 1);
        // Answered while the body ran: replay to the answer.
        let answer = AskAnswer::Answered {
            option_id: None,
            text: Some("yes".into()),
        };
        task.settle_answer(&id, answer, Decision::Approved, None, None);
        let parked = task.park_run(&ask(0), 0, false);
        assert!(parked.again);
        assert!(parked.asked.is_none());
    }

    #[test]
    fn a_parked_run_of_a_cancelled_task_runs_again_for_its_cleanup() {
        let mut task = new_task(Entry::Task);
        let parked = task.park_run(&ask(0), 0, true);
        assert_eq!((parked.again, parked.asked), (true, None));
        assert_eq!(task.status, TaskStatus::Cancelling);
        assert!(task.requests.is_empty());
    }

    #[test]
    fn the_last_answer_runs_the_task_again() {
        let mut task = new_task(Entry::Task);
        let first = task.park_run(&ask(0), 0, false).asked.unwrap().request_id;
        let second = task.park_run(&ask(1), 0, false).asked.unwrap().request_id;
        let answer = |text: &str| AskAnswer::Answered {
            option_id: Some(text.into()),
            text: None,
        };
        let alice = Some(Principal::user("test", "alice"));
        assert_eq!(
            task.settle_answer(&first, answer("a"), Decision::Approved, alice.clone(), None),
            Some(vec![second.clone()])
        );
        assert_eq!(task.status, TaskStatus::Waiting);
        assert_eq!(
            task.settle_answer(&first, answer("b"), Decision::Approved, None, None),
            None,
            "the first answer wins"
        );
        assert_eq!(
            task.settle_answer(
                &second,
                AskAnswer::Cancelled,
                Decision::Cancelled,
                None,
                Some("no".into())
            ),
            Some(Vec::new())
        );
        assert_eq!(task.status, TaskStatus::Running);
        assert_eq!(task.answers.get(&0), Some(&answer("a")));
        assert_eq!(task.answers.get(&1), Some(&AskAnswer::Cancelled));
        assert!(matches!(
            &task.requests[0].status,
            RequestStatus::Settled { decision: Decision::Approved, responder, note: Some(note) } if *responder == alice && note == "a"
        ));
        assert!(matches!(
            &task.requests[1].status,
            RequestStatus::Settled { decision: Decision::Cancelled, note: Some(note), .. } if note == "no"
        ));
    }

    #[test]
    fn a_task_body_that_returns_delivers_its_result_to_the_starting_call() {
        let mut task = new_task(Entry::Task);
        let ended = task.end_run(Ending::Returned(&ok("other")), false);
        assert_eq!(task.status, TaskStatus::Finished);
        assert_eq!(ended.delivered.len(), 1);
        let delivered = &ended.delivered[0];
        assert_eq!(
            (delivered.task_id.as_str(), delivered.call_id.as_str()),
            ("deploy-1", "c1")
        );
        assert_eq!(delivered.result.call_id, "c1", "the call's own id");
        assert_eq!(*delivered.result.model(), ModelOutput::Text("done".into()));
        assert_eq!(task.calls[0].result.as_ref(), Some(&delivered.result));
    }

    #[test]
    fn serve_calls_without_a_reply_fail_when_the_body_ends() {
        let mut task = new_task(Entry::Serve);
        task.calls[0].result = Some(ok("c1"));
        task.queue_call(TaskCall::new(&turn(), "c2", json!({})));
        let ended = task.end_run(Ending::Returned(&ok("c1")), false);
        assert_eq!(ended.delivered.len(), 1, "replied calls keep their reply");
        assert_eq!(
            message(&ended.delivered[0].result),
            (
                ErrorCode::ToolFailed,
                "task deploy-1 ended without replying to this call".to_owned()
            )
        );

        let mut failing = new_task(Entry::Serve);
        let error = CallResult::failed(
            "c1",
            "deploy",
            ToolError::with_code(ErrorCode::Timeout, "slow"),
        );
        let ended = failing.end_run(Ending::Returned(&error), false);
        assert_eq!(
            message(&ended.delivered[0].result),
            (
                ErrorCode::Timeout,
                "task deploy-1 failed before replying: slow".to_owned()
            )
        );
    }

    #[test]
    fn a_failed_run_fails_every_open_call_with_its_reason() {
        let mut task = new_task(Entry::Task);
        let ended = task.end_run(Ending::Failed("the session is gone"), false);
        assert_eq!(
            message(&ended.delivered[0].result),
            (ErrorCode::ToolFailed, "the session is gone".to_owned())
        );
        assert_eq!(task.status, TaskStatus::Finished);
    }

    #[test]
    fn ending_a_cancelled_task_cancels_its_calls_and_revokes_its_questions() {
        let (mut task, id) = waiting();
        task.request_cancel();
        let ended = task.end_run(Ending::Returned(&ok("c1")), true);
        assert_eq!(task.status, TaskStatus::Cancelled);
        assert!(!task.cancel_requested);
        assert_eq!(ended.revoked, vec![id]);
        assert_eq!(
            message(&ended.delivered[0].result),
            (
                ErrorCode::Cancelled,
                "task deploy-1 was cancelled before it produced this result".to_owned()
            )
        );

        let mut timed_out = new_task(Entry::Task);
        let ended = timed_out.end_run(Ending::Failed("cleanup too slow"), true);
        assert_eq!(
            message(&ended.delivered[0].result),
            (ErrorCode::Cancelled, "cleanup too slow".to_owned())
        );
    }

    #[test]
    fn a_serve_call_is_cancelled_on_its_own_and_a_task_call_is_not() {
        let mut task = new_task(Entry::Serve);
        task.queue_call(TaskCall::new(&turn(), "c2", json!({})));
        assert_eq!(task.cancel_calls(Some("c2"), None), vec![1]);
        let call = &task.calls[1];
        assert!(call.cancelled);
        assert_eq!(
            call.result
                .as_ref()
                .and_then(|r| r.error.as_ref())
                .map(ToolError::code),
            Some(ErrorCode::Cancelled)
        );
        assert_eq!(task.status, TaskStatus::Running, "the task keeps serving");
        assert!(task.cancel_calls(Some("c2"), None).is_empty(), "once");

        let mut single = new_task(Entry::Task);
        assert!(single.cancel_calls(Some("c1"), None).is_empty());
        assert!(single.calls[0].result.is_none());
    }
}
