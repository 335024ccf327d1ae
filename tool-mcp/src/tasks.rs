//! `task` workflow tools as tasks of the MCP tasks extension (`io.modelcontextprotocol/tasks`):
//! for clients that declare it, a call returns `CreateTaskResult` at once, and `tasks/get`,
//! `tasks/update` (answers to the task's questions) and `tasks/cancel` reach the runtime's task.

use rmcp::model::{
    CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask, ElicitRequestParams,
    ElicitResult, ElicitationSchema, GetTaskParams, GetTaskResult, InputRequests, JsonObject, Task,
    TaskPayload, TaskStatus as McpTaskStatus, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use toolwright_core::{Entry, Principal, ToolKind};
use toolwright_runtime::{CallResult, TaskRecord, TaskStatus};

use crate::McpServer;
use crate::convert::internal;
use crate::input::{form_for, response_for};

/// How often clients are told to poll a working task.
const POLL_MS: u64 = 500;

impl McpServer {
    /// Whether `result` is the receipt of a `task` tool that should become an MCP task.
    pub(crate) fn task_receipt(
        &self,
        cx: &RequestContext<RoleServer>,
        result: &CallResult,
    ) -> Option<CallToolResponse> {
        let supports = cx.client_capabilities().is_some_and(|c| c.supports_tasks());
        let is_task = self
            .runtime()
            .registry()
            .get(&result.tool)
            .is_some_and(|t| t.kind() == ToolKind::Workflow(Entry::Task));
        if !supports || !is_task || result.is_error {
            return None;
        }
        let task_id = result.output.get("task_id")?.as_str()?;
        let now = now();
        let task = Task::new(task_id, McpTaskStatus::Working, now.clone(), now)
            .with_poll_interval_ms(POLL_MS);
        Some(CreateTaskResult::new(task).into())
    }

    /// The task `id`, if the caller may see it (it acts for the principal who started it).
    async fn visible_task(
        &self,
        id: &str,
        principal: &Option<Principal>,
    ) -> Result<TaskRecord, ErrorData> {
        match self.runtime().task(id).await {
            Ok(task) if task.current == *principal => Ok(task),
            _ => Err(ErrorData::invalid_params(
                format!("no task `{id}` of yours; use the id from the CreateTaskResult"),
                None,
            )),
        }
    }

    pub(crate) async fn get_task_state(
        &self,
        params: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let principal = self.caller(&cx);
        let task = self.visible_task(&params.task_id, &principal).await?;
        let now = now();
        let (payload, message) = match task.status {
            TaskStatus::Finished | TaskStatus::Cancelled => {
                // The result reaches the client here: it is delivered, not repeated elsewhere.
                if let Ok(turn) = self.runtime().turn(&task.turn_id).await {
                    let _ = turn.task_results_of(&task.id).await;
                }
                let result = task.calls.first().and_then(|c| c.result.clone());
                match (task.status, result) {
                    (TaskStatus::Cancelled, _) => (TaskPayload::Cancelled, None),
                    (_, Some(result)) => {
                        let mcp =
                            serde_json::to_value(self.to_mcp(&task.session_id, &result).await)
                                .unwrap_or_default();
                        let object: JsonObject = match mcp {
                            serde_json::Value::Object(map) => map,
                            _ => JsonObject::new(),
                        };
                        if result.is_error {
                            (TaskPayload::Failed { error: object }, None)
                        } else {
                            (TaskPayload::Completed { result: object }, None)
                        }
                    }
                    (_, None) => (TaskPayload::Working, None),
                }
            }
            TaskStatus::Waiting => {
                let mut inputs = InputRequests::new();
                for request in task.requests.iter().filter(|r| r.is_pending()) {
                    let (message, schema) = form_for(request);
                    let schema = ElicitationSchema::from_json_schema(schema).map_err(|e| {
                        ErrorData::internal_error(format!("elicitation schema: {e}"), None)
                    })?;
                    inputs.insert(
                        request.request_id.clone(),
                        rmcp::model::InputRequest::Elicitation(rmcp::model::ElicitRequest::new(
                            ElicitRequestParams::FormElicitationParams {
                                meta: None,
                                message,
                                requested_schema: schema,
                            },
                        )),
                    );
                }
                (
                    TaskPayload::InputRequired {
                        input_requests: inputs,
                    },
                    Some("waiting for the user's answer".to_owned()),
                )
            }
            other => (TaskPayload::Working, Some(other.describe().to_owned())),
        };
        let mut state =
            Task::new(&task.id, payload.status(), now.clone(), now).with_poll_interval_ms(POLL_MS);
        if let Some(message) = message {
            state = state.with_status_message(message);
        }
        Ok(GetTaskResult::new(DetailedTask::new(state, payload)))
    }

    pub(crate) async fn update_task_inputs(
        &self,
        params: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.caller(&cx);
        let task = self.visible_task(&params.task_id, &principal).await?;
        for (key, value) in params.input_responses {
            let Some(request) = task.requests.iter().find(|r| r.request_id == key) else {
                return Err(ErrorData::invalid_params(
                    format!("task `{}` has no input request `{key}`", task.id),
                    None,
                ));
            };
            let answer: ElicitResult = serde_json::from_value(value).map_err(|e| {
                ErrorData::invalid_params(
                    format!("`{key}` is not an elicitation result: {e}"),
                    None,
                )
            })?;
            let response = response_for(request, answer, principal.clone());
            self.runtime().respond(response).await.map_err(internal)?;
        }
        Ok(())
    }

    pub(crate) async fn cancel_task_run(
        &self,
        params: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let principal = self.caller(&cx);
        let task = self.visible_task(&params.task_id, &principal).await?;
        // Cooperative: the body gets its cleanup window; the status follows in `tasks/get`.
        let runtime = self.runtime().clone();
        tokio::spawn(async move {
            if let Err(error) = runtime.cancel_task(&task.id).await {
                tracing::warn!(task_id = %task.id, "cancelling the task failed: {error}");
            }
        });
        Ok(())
    }
}

/// Now, as RFC 3339 UTC (`2026-11-29T15:04:05Z`).
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or_default();
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_rfc3339_utc() {
        let now = super::now();
        assert_eq!(now.len(), 20, "{now}");
        assert!(
            now.starts_with("20") && now.ends_with('Z') && &now[10..11] == "T",
            "{now}"
        );
    }
}
