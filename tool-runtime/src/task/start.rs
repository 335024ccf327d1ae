//! Starting a workflow task: a `task` or `serve` call records its task and spawns its runner,
//! and a `serve` call carrying `task_id` is queued on its task; either way the call's result is
//! a receipt.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwright_core::{Entry, ErrorCode, ModelOutput, Tool, ToolError, ToolKind};

use super::runner::spawn;
use crate::engine::Engine;
use crate::event::Event;
use crate::record::{
    Approver, CallResult, SessionRecord, TaskCall, TaskRecord, TaskStatus, TurnRecord,
};
use crate::store::{Claim, StoreError};

/// A `task` or `serve` call: starts its task (or, for a `serve` call carrying `task_id`,
/// hands the call to that task) and returns the receipt.
pub(crate) async fn start(
    engine: &Arc<Engine>,
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
    // The task's record keeps the input until the body has served it: sealed.
    let sensitive = &tool.sensitivity().input;
    engine.options().sealing.seal(
        sensitive,
        crate::sealing::SealScope {
            tool: tool.name(),
            session: &session.id,
        },
        &mut input,
    );
    if entry == Entry::Serve {
        let target = input.as_object_mut().and_then(|map| map.remove("task_id"));
        if let Some(Value::String(target)) = target {
            return route_call(engine, session, turn, tool, call_id, input, &target).await;
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
    match engine
        .store()
        .write_task(&record, None, engine.claim_here())
        .await
    {
        Ok(written) => {
            engine.emit(Event::TaskStarted {
                session_id: session.id.clone(),
                turn_id: turn.id.clone(),
                task_id: id.clone(),
                tool: tool.name().to_owned(),
                call_id: call_id.to_owned(),
            });
            spawn(engine, &id, written.lease);
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
    engine: &Arc<Engine>,
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
        let (mut task, version) = match engine.store().task(target).await {
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
        let taking = if wake {
            engine.claim_here()
        } else {
            Claim::None
        };
        match engine
            .store()
            .write_task(&task, Some(version), taking)
            .await
        {
            Ok(written) => {
                if wake {
                    spawn(engine, target, written.lease);
                }
                return receipt(tool, call_id, target, "sent", text);
            }
            Err(StoreError::Conflict(_)) => {}
            Err(error) => return store_failure(call_id, tool.name(), &error),
        }
    }
}

fn receipt(tool: &Tool, call_id: &str, task_id: &str, status: &str, text: String) -> CallResult {
    CallResult {
        model_usage: None,
        call_id: call_id.to_owned(),
        tool: tool.name().to_owned(),
        is_error: false,
        output: json!({ "task_id": task_id, "status": status }),
        projection: Some(ModelOutput::Text(text)),
        error: None,
        ends_turn: false,
        label: None,
    }
}

pub(super) fn store_failure(call_id: &str, tool: &str, error: &StoreError) -> CallResult {
    CallResult::failed(call_id, tool, journal_failure(error))
}

fn journal_failure(error: &StoreError) -> ToolError {
    ToolError::with_code(
        ErrorCode::Journal,
        format!("the task store failed: {error}; try again"),
    )
}
