//! The task meta-tools: `task_wait` waits for the results of the turn's tasks, `task_cancel`
//! cancels one.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolwright_core::error::quoted_prefix;
use toolwright_core::{ErrorCode, ModelOutput, ToolError};

use super::results::{cancel_task, owing, take_results, wait_results};
use super::start::store_failure;
use crate::engine::Engine;
use crate::record::{CallResult, TaskRecord, TaskResult};

/// The longest `task_wait` may wait, in seconds, and how long it waits when not told.
const WAIT_MAX_SECONDS: u64 = 300;
const WAIT_DEFAULT_SECONDS: u64 = 30;

/// The model-facing name of the meta-tool that waits for task results.
pub(crate) const TASK_WAIT: &str = "task_wait";
/// The model-facing name of the meta-tool that cancels a task.
pub(crate) const TASK_CANCEL: &str = "task_cancel";

/// A call of `task_wait` or `task_cancel` in a turn's step.
pub(crate) struct MetaCall<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) turn_id: &'a str,
    pub(crate) call_id: &'a str,
    /// [`TASK_WAIT`] or [`TASK_CANCEL`].
    pub(crate) name: &'a str,
    /// The arguments as the model wrote them.
    pub(crate) arguments: &'a str,
}

impl MetaCall<'_> {
    fn fail(&self, code: ErrorCode, message: String) -> CallResult {
        CallResult::failed(self.call_id, self.name, ToolError::with_code(code, message))
    }

    fn answer(&self, output: Value, text: String) -> CallResult {
        CallResult {
            model_usage: None,
            call_id: self.call_id.to_owned(),
            tool: self.name.to_owned(),
            is_error: false,
            output,
            projection: Some(ModelOutput::Text(text)),
            error: None,
            ends_turn: false,
            label: None,
        }
    }
}

/// Runs `call`; `cancel` fires when its turn is cancelled.
pub(crate) async fn run(
    engine: &Arc<Engine>,
    call: &MetaCall<'_>,
    cancel: &CancellationToken,
) -> CallResult {
    let (input, target) = match arguments(engine, call).await {
        Ok(parsed) => parsed,
        Err(result) => return result,
    };
    if call.name == TASK_CANCEL {
        let Some(id) = target else {
            return call.fail(
                ErrorCode::InvalidInput,
                "`task_cancel` needs `task_id`".into(),
            );
        };
        return cancel_one(engine, call, &id).await;
    }
    let seconds = match input.get("timeout_seconds") {
        None | Some(Value::Null) => WAIT_DEFAULT_SECONDS,
        Some(value) => match value.as_u64() {
            Some(s) if (1..=WAIT_MAX_SECONDS).contains(&s) => s,
            _ => {
                return call.fail(
                    ErrorCode::InvalidInput,
                    format!(
                        "`timeout_seconds` must be a whole number from 1 to {WAIT_MAX_SECONDS}, not {}",
                        quoted_prefix(&value.to_string())
                    ),
                );
            }
        },
    };
    wait(engine, call, target, seconds, cancel).await
}

/// The call's arguments and the task they name, which must be a task of the session.
async fn arguments(
    engine: &Engine,
    call: &MetaCall<'_>,
) -> Result<(Map<String, Value>, Option<String>), CallResult> {
    let name = call.name;
    let input = match toolwright_core::json::parse_arguments(name, call.arguments) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return Err(call.fail(ErrorCode::InvalidInput, format!("`{name}` takes an object")));
        }
        Err(error) => {
            return Err(CallResult::failed(
                call.call_id,
                name,
                error.into_tool_error(),
            ));
        }
    };
    let allowed: &[&str] = if name == TASK_WAIT {
        &["task_id", "timeout_seconds"]
    } else {
        &["task_id"]
    };
    if let Some(key) = input.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(call.fail(
            ErrorCode::InvalidInput,
            format!(
                "`{name}` has no field `{}`; it takes {}",
                quoted_prefix(key),
                allowed
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        ));
    }
    let target = match input.get("task_id") {
        None | Some(Value::Null) if name == TASK_WAIT => None,
        Some(Value::String(id)) => Some(id.clone()),
        _ => {
            return Err(call.fail(
                ErrorCode::InvalidInput,
                format!("`{name}` needs `task_id`, the id from a task's receipt (a string)"),
            ));
        }
    };
    if let Some(id) = &target {
        match engine.store().task(id).await {
            Ok(Some((task, _))) if task.session_id == call.session_id => {}
            Ok(_) => {
                return Err(call.fail(
                    ErrorCode::UnknownTask,
                    format!(
                        "there is no task `{}` in this session; use the id from a task's receipt",
                        quoted_prefix(id)
                    ),
                ));
            }
            Err(error) => return Err(store_failure(call.call_id, name, &error)),
        }
    }
    Ok((input, target))
}

/// `task_cancel` of task `id`: cancels it and hands over the results it produced before.
async fn cancel_one(engine: &Arc<Engine>, call: &MetaCall<'_>, id: &str) -> CallResult {
    let before = match engine.task(id).await {
        Ok(task) => task.status,
        Err(error) => return call.fail(ErrorCode::Journal, error.to_string()),
    };
    if before.is_over() {
        return call.answer(
            json!({ "task_id": id, "status": before }),
            format!(
                "Task {id} had already ended ({}); nothing to cancel.",
                before.describe()
            ),
        );
    }
    let after = match cancel_task(engine, id).await {
        Ok(task) => task,
        Err(error) => return call.fail(ErrorCode::Journal, error.to_string()),
    };
    // The model cancelled it itself: the cancellation results need no message, but results the
    // task produced before the cancel are handed over here.
    let taken = take_results(engine, call.session_id, call.turn_id, Some(id))
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
    call.answer(
        json!({ "task_id": id, "status": after.status, "results": produced }),
        text,
    )
}

/// `task_wait`: the results of the turn's tasks (or of `target`) within `seconds`, or what
/// still runs.
async fn wait(
    engine: &Engine,
    call: &MetaCall<'_>,
    target: Option<String>,
    seconds: u64,
    cancel: &CancellationToken,
) -> CallResult {
    let (session_id, turn_id) = (call.session_id, call.turn_id);
    let timeout = Duration::from_secs(seconds);
    let waited = wait_results(
        engine,
        session_id,
        turn_id,
        target.as_deref(),
        timeout,
        cancel,
    );
    let results = match waited.await {
        Ok(results) => results,
        Err(error) => return call.fail(ErrorCode::Journal, error.to_string()),
    };
    if cancel.is_cancelled() {
        return call.fail(
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
        return call.answer(json!({ "results": results }), text);
    }
    let owing = owing(engine, session_id, turn_id).await.unwrap_or_default();
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
        return call.answer(json!({ "status": "none", "tasks": [] }), text);
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
    call.answer(json!({ "status": "running", "tasks": tasks }), text)
}
