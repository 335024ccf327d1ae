//! Calls that wait for a person: input-required results with a sealed `requestState` for peers
//! on 2026-07-28 or later, form elicitation for older peers that declared it, and a refusal that
//! says why for clients that can do neither.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequests, InputRequiredResult, JsonObject, ProtocolVersion,
    SealOptions,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};
use toolwright_core::Principal;
use toolwright_runtime::{
    CallResult, InputRequest, InputResponse, RequestKind, RespondOutcome, StepOutcome, Turn,
};

use crate::McpServer;
use crate::binding::Binding;
use crate::convert::{first, internal};

/// The key of the one input request an input-required result carries.
const INPUT_KEY: &str = "input";

/// How long a sealed `requestState` stays valid.
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// What a sealed `requestState` carries: the parked call to resume, and who may resume it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Pending {
    turn_id: String,
    request_id: String,
    call_id: String,
    principal: Option<Principal>,
}

impl McpServer {
    /// An input-required result for the first pending request, with the sealed state that
    /// resumes the call.
    pub(crate) fn input_required(
        &self,
        turn_id: &str,
        principal: Option<Principal>,
        requests: &[InputRequest],
        call_id: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(request) = requests.iter().find(|r| r.is_pending()) else {
            return Err(ErrorData::internal_error(
                "the call waits for input, but no request is pending",
                None,
            ));
        };
        let (message, schema) = form_for(request);
        let schema = ElicitationSchema::from_json_schema(schema)
            .map_err(|e| ErrorData::internal_error(format!("elicitation schema: {e}"), None))?;
        let elicitation =
            rmcp::model::ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            });
        let pending = Pending {
            turn_id: turn_id.to_owned(),
            request_id: request.request_id.clone(),
            call_id: call_id.to_owned(),
            principal,
        };
        let state = self
            .states()
            .seal_json_with(&pending, &SealOptions::new().ttl(STATE_TTL))
            .map_err(|e| {
                ErrorData::internal_error(format!("sealing the request state: {e}"), None)
            })?;
        let mut inputs = InputRequests::new();
        inputs.insert(
            INPUT_KEY.to_owned(),
            rmcp::model::InputRequest::Elicitation(elicitation),
        );
        Ok(InputRequiredResult::new(Some(inputs), Some(state)).into())
    }

    /// A retried call carrying `requestState` and the user's answer: settles the request
    /// through the input protocol and returns the call's result (or the next question).
    pub(crate) async fn resume(
        &self,
        params: &CallToolRequestParams,
        state: &str,
        principal: Option<Principal>,
        binding: &Binding,
    ) -> Result<CallToolResponse, ErrorData> {
        let pending: Pending = self.states().open_json(state).map_err(|e| {
            ErrorData::invalid_params(
                format!("`requestState` is not one this server issued, or it expired ({e}); call the tool again without it"),
                None,
            )
        })?;
        if pending.principal != principal {
            return Err(ErrorData::invalid_request(
                "this `requestState` belongs to another client",
                None,
            ));
        }
        let answer: ElicitResult = params
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(INPUT_KEY))
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| {
                ErrorData::invalid_params(
                    format!("`inputResponses.{INPUT_KEY}` is not an elicitation result: {e}"),
                    None,
                )
            })?
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!(
                        "`inputResponses` needs `{INPUT_KEY}`, the answer to the input request"
                    ),
                    None,
                )
            })?;
        let turn = self
            .runtime()
            .turn(&pending.turn_id)
            .await
            .map_err(internal)?;
        let record = turn.record().await.map_err(internal)?;
        let Some(request) = record.request(&pending.request_id).cloned() else {
            return Err(ErrorData::invalid_params(
                "the input request of this `requestState` is gone; call the tool again",
                None,
            ));
        };
        let response = response_for(&request, answer, principal.clone());
        let outcome = self
            .runtime()
            .respond_with(response, self.approved_sampling())
            .await
            .map_err(internal)?;
        // The call ran in the turn it parked in, which may no longer be the session's current
        // turn: its taint reaches the session's next turns through the binding.
        if let Ok(record) = turn.record().await
            && let Some(source) = &record.tainted_by
        {
            binding.note_taint(source);
        }
        binding.touch();
        let call_id = &pending.call_id;
        let result = match outcome {
            RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) => {
                first(results, call_id)?
            }
            RespondOutcome::Resumed(StepOutcome::Waiting {
                results, requests, ..
            }) => match results.into_iter().find(|r| r.call_id == *call_id) {
                Some(result) => result,
                None => return self.input_required(turn.id(), principal, &requests, call_id),
            },
            RespondOutcome::Rejected { reason } => Arc::new(CallResult::failed(
                call_id,
                request.tool.as_deref().unwrap_or_default(),
                toolwright_core::ToolError::with_code(
                    toolwright_core::ErrorCode::Denied,
                    format!("the answer was refused: {reason}"),
                ),
            )),
            _ => {
                // Already answered (a repeated retry) or other requests still pending.
                let record = turn.record().await.map_err(internal)?;
                let requests = record.pending.map(|s| s.requests).unwrap_or_default();
                if requests.iter().any(InputRequest::is_pending) {
                    return self.input_required(turn.id(), principal, &requests, call_id);
                }
                match turn.last_results().await.map_err(internal)? {
                    Some(step) => first(step.results, call_id)?,
                    None => {
                        return Err(ErrorData::invalid_params(
                            "this input request was already answered; call the tool again",
                            None,
                        ));
                    }
                }
            }
        };
        Ok(self.to_mcp(turn.session_id(), &result).await.into())
    }

    /// Waits until call `call_id`, parked on a hook (an outside system's delivery, from this
    /// process or another on the same store) or a timer, has its result; a question for a
    /// person it reaches meanwhile is asked as usual. A cancelled MCP call cancels its turn.
    pub(crate) async fn await_outside(
        &self,
        cx: &RequestContext<RoleServer>,
        turn: &Turn,
        principal: Option<Principal>,
        call_id: &str,
    ) -> Result<Arc<CallResult>, ErrorData> {
        let mut events = self.runtime().subscribe();
        loop {
            let record = turn.record().await.map_err(internal)?;
            let holds = |step: &&toolwright_runtime::PendingStep| {
                step.calls.iter().any(|call| call.call_id == call_id)
            };
            let step = record.pending.as_ref().filter(holds);
            match step {
                Some(step) => {
                    let state = step
                        .calls
                        .iter()
                        .find(|call| call.call_id == call_id)
                        .map(|call| &call.state);
                    if let Some(toolwright_runtime::CallState::Finished { result }) = state {
                        return Ok(Arc::new(result.clone()));
                    }
                    if step
                        .requests
                        .iter()
                        .any(|r| r.is_pending() && asks_person(r))
                    {
                        let requests = step.requests.clone();
                        return self
                            .ask_person(cx, turn, principal, requests, call_id)
                            .await;
                    }
                }
                None => {
                    return match record.last_step {
                        Some(step) => first(step.results, call_id),
                        None => Err(ErrorData::internal_error(
                            "the call's step is gone from its turn",
                            None,
                        )),
                    };
                }
            }
            // A step resumed here announces its results; one resumed by another process on the
            // same store is found by reading the turn again.
            tokio::select! {
                _ = events.recv() => {}
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                () = cx.ct.cancelled() => {
                    let _ = turn.cancel().await;
                    return Err(ErrorData::internal_error("the call was cancelled", None));
                }
            }
        }
    }

    /// Settles the requests a parked call waits on by asking the client's user (elicitation),
    /// until the call has its result.
    pub(crate) async fn ask_person(
        &self,
        cx: &RequestContext<RoleServer>,
        turn: &Turn,
        principal: Option<Principal>,
        mut requests: Vec<InputRequest>,
        call_id: &str,
    ) -> Result<Arc<CallResult>, ErrorData> {
        let can_elicit = can_elicit(cx);
        loop {
            let Some(request) = requests.into_iter().find(InputRequest::is_pending) else {
                return Err(ErrorData::internal_error(
                    "the call waits for input, but no request is pending",
                    None,
                ));
            };
            if !can_elicit {
                // Never a silent approval: the request is refused and the client told why.
                let response = InputResponse::cancel(&request.request_id, principal.clone())
                    .note("this MCP client cannot ask its user");
                let _ = self.runtime().respond(response).await;
                return Ok(Arc::new(cannot_ask(&request, call_id)));
            }
            // Only the question to the client races the cancellation: the answer, whatever it
            // is, is settled in full (a cancelled call's request is settled as cancelled), so
            // the turn never stays waiting on a request nobody will answer.
            let cancel = || InputResponse::cancel(&request.request_id, principal.clone());
            let response = tokio::select! {
                answer = elicit(cx, &request, principal.clone()) => answer.unwrap_or_else(|reason| {
                    cancel().note(format!("the MCP client could not ask its user: {reason}"))
                }),
                () = cx.ct.cancelled() => {
                    cancel().note("the MCP client cancelled the call while its user was asked")
                }
            };
            let options = self.resumed_sampling(cx, turn.session_id(), principal.clone());
            let outcome = self
                .runtime()
                .respond_with(response, options)
                .await
                .map_err(internal)?;
            match outcome {
                RespondOutcome::Resumed(StepOutcome::Completed { results, .. }) => {
                    return first(results, call_id);
                }
                RespondOutcome::Resumed(StepOutcome::Waiting {
                    results,
                    requests: next,
                    ..
                }) => {
                    if let Some(result) = results.into_iter().find(|r| r.call_id == call_id) {
                        return Ok(result);
                    }
                    requests = next;
                }
                RespondOutcome::Rejected { reason } => {
                    return Ok(Arc::new(CallResult::failed(
                        call_id,
                        request.tool.as_deref().unwrap_or_default(),
                        toolwright_core::ToolError::with_code(
                            toolwright_core::ErrorCode::Denied,
                            format!("the answer was refused: {reason}"),
                        ),
                    )));
                }
                RespondOutcome::Settled { .. }
                | RespondOutcome::Dropped
                | RespondOutcome::TaskResumed { .. } => {
                    let record = turn.record().await.map_err(internal)?;
                    requests = record.pending.map(|step| step.requests).unwrap_or_default();
                    if requests.iter().all(|r| !r.is_pending()) {
                        return match turn.last_results().await.map_err(internal)? {
                            Some(step) => first(step.results, call_id),
                            None => Err(ErrorData::internal_error(
                                "the call was settled elsewhere",
                                None,
                            )),
                        };
                    }
                }
            }
        }
    }
}

/// Whether `request` is for a person to answer (a hook's wait is for an outside system).
pub(crate) fn asks_person(request: &InputRequest) -> bool {
    request.kind != RequestKind::Hook
}

/// The result of a call whose approval or question this client cannot put to its user.
fn cannot_ask(request: &InputRequest, call_id: &str) -> CallResult {
    let tool = request.tool.clone().unwrap_or_default();
    let what = match request.kind {
        RequestKind::Question => format!(
            "`{tool}` needs an answer from the user (\"{}\")",
            request.prompt
        ),
        _ => {
            let reasons = if request.reasons.is_empty() {
                "its approval policy".to_owned()
            } else {
                format!("its approval policy ({})", request.reasons.join("; "))
            };
            format!(
                "`{tool}` needs the user's approval ({reasons}): \"{}\"",
                request.prompt
            )
        }
    };
    CallResult::failed(
        call_id,
        &tool,
        toolwright_core::ToolError::with_code(
            toolwright_core::ErrorCode::ApprovalUnavailable,
            format!(
                "{what}, and this MCP client supports no elicitation to ask; nothing ran. Use a client that supports elicitation, or have the server's operator grant it out of band (a session permission, or an approval in the host's own interface), then call again"
            ),
        ),
    )
}

/// Puts one request to the client's user as a form elicitation and maps the answer; `Err`
/// says why the client could not ask.
async fn elicit(
    cx: &RequestContext<RoleServer>,
    request: &InputRequest,
    principal: Option<Principal>,
) -> Result<InputResponse, String> {
    let (message, schema) = form_for(request);
    let schema = ElicitationSchema::from_json_schema(schema)
        .map_err(|e| format!("the form's schema was refused: {e}"))?;
    let answer = cx
        .peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(response_for(request, answer, principal))
}

/// The input-protocol response for an elicitation answer: accept → approve (or the answer to a
/// question), decline → deny, cancel → cancel.
pub(crate) fn response_for(
    request: &InputRequest,
    answer: ElicitResult,
    principal: Option<Principal>,
) -> InputResponse {
    let id = &request.request_id;
    match answer.action {
        ElicitationAction::Accept if form_of(request).is_some() => {
            let fields = answer.content.unwrap_or_else(|| json!({}));
            InputResponse::fill(id, principal, fields)
        }
        ElicitationAction::Accept if request.kind == RequestKind::Question => {
            let text = answer
                .content
                .as_ref()
                .and_then(|c| c.get("answer"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let options: Vec<String> = question_options(request);
            if options.contains(&text) {
                InputResponse::choose(id, principal, text)
            } else {
                InputResponse::answer(id, principal, text)
            }
        }
        ElicitationAction::Accept => InputResponse::approve(id, principal),
        // The denial already says the user declined.
        ElicitationAction::Decline => InputResponse::cancel(id, principal),
        // Cancel, and any action a newer protocol adds: nothing was granted.
        _ => InputResponse::cancel(id, principal).note("the user dismissed the request"),
    }
}

/// Whether the request's client declared elicitation (per request on 2026-07-28, at
/// `initialize` before).
pub(crate) fn can_elicit(cx: &RequestContext<RoleServer>) -> bool {
    cx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some()
}

/// Whether the request's peer speaks 2026-07-28 or later (no server-to-client requests; input
/// goes through input-required results).
pub(crate) fn modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// The ids (or, for `ask_question`, labels) a question's answer may be.
fn question_options(request: &InputRequest) -> Vec<String> {
    let Some(input) = &request.input else {
        return Vec::new();
    };
    input
        .get("options")
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(|o| o.get("id").or_else(|| o.get("label")))
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// For an approval: the call's input in full, as indented JSON, so a person sees every amount,
/// recipient and command whatever the prompt names. JSON quotes and escapes each value, so a
/// value cannot pose as more of the message; nothing is cut.
fn consented_input(request: &InputRequest) -> Option<String> {
    if request.kind == RequestKind::Question {
        return None;
    }
    let input = request.input.as_ref()?;
    if input.as_object().is_some_and(serde_json::Map::is_empty) {
        return None;
    }
    let text = serde_json::to_string_pretty(input).ok()?;
    let tool = request.tool.as_deref().unwrap_or("the tool");
    Some(format!(
        "\n\nThe call to `{tool}`, with its input in full:\n{text}"
    ))
}

/// The form of a workflow body's form question (`AskRequest::with_form`), if it is one.
fn form_of(request: &InputRequest) -> Option<&JsonObject> {
    if request.kind != RequestKind::Question {
        return None;
    }
    request.input.as_ref()?.get("form")?.as_object()
}

/// The message and form schema of a request.
pub(crate) fn form_for(request: &InputRequest) -> (String, JsonObject) {
    let schema = if let Some(form) = form_of(request) {
        Value::Object(form.clone())
    } else if request.kind == RequestKind::Question {
        let options = question_options(request);
        let mut answer = json!({ "type": "string", "title": "Answer" });
        let freeform = request
            .input
            .as_ref()
            .and_then(|i| i.get("allow_freeform"))
            .and_then(Value::as_bool)
            // `ask_question` always lets the user type an answer.
            .unwrap_or(request.journal_position.is_none());
        if !options.is_empty() && !freeform {
            answer["enum"] = json!(options);
        } else if !options.is_empty() {
            answer["description"] =
                json!(format!("One of: {}, or your own words", options.join(", ")));
        }
        json!({ "type": "object", "properties": { "answer": answer }, "required": ["answer"] })
    } else {
        json!({ "type": "object", "properties": {} })
    };
    let mut message = request.prompt.clone();
    if !request.reasons.is_empty() {
        message.push_str(&format!("\n({})", request.reasons.join("; ")));
    }
    if let Some(input) = consented_input(request) {
        message.push_str(&input);
    }
    let schema = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    (message, schema)
}
