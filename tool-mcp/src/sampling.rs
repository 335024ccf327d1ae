//! MCP sampling as the backend of the model handle (`ctx.model()`): a tool asks the model of the
//! client that called it.
//!
//! - A 2025-11-25 client that declared `sampling` is asked with `sampling/createMessage` while
//!   the tool runs.
//! - A 2026-07-28 client cannot be sent requests. The call answers with an input-required result
//!   holding the `sampling/createMessage` request and a sealed `requestState`; the client asks
//!   its model and calls the same tool again with the answer. The tool then runs again **from its
//!   start**, and this time its asks of the model return the recorded answers, in order, until it
//!   asks something new (another round) or finishes. What the earlier attempts returned never
//!   reaches the client. So a tool that asks the model runs once per answer on these clients: do
//!   side effects after the asks, or make them idempotent (a `durable` step does not help here:
//!   each attempt is a new call).
//! - A client that declared no sampling: the ask fails, and the call's `isError` result says the
//!   client cannot lend its model and what to do (unless the runtime has a model of its own,
//!   which is then asked).
//!
//! Tools in the model's session (`.tools([..])`) are offered only to a client that declared
//! `sampling.tools`; otherwise the ask fails naming them. When the model calls them, they run
//! through the runtime's pipeline in a child session of the call's session (caller `subagent`,
//! the same person, tainted when the MCP session is), and their results go back to the model in
//! the next round. A tool that needs a person's approval is refused there: nobody can be asked
//! from inside a model's session. On 2026-07-28 the results of those tools are sealed into the
//! `requestState` with the model's answers, so a re-run does not run them again.

// rmcp marks sampling deprecated (SEP-2577 retires it in a later revision); both revisions
// toolwright serves still define it, and clients implement it today.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ContentBlock, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, InputRequests, InputRequiredResult, Role,
    SamplingCapability, SamplingMessage, SamplingMessageContentBlock, SealOptions, ToolUseContent,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwright_core::model::{MessageRole, ModelBackend, ModelReply, ModelRequest, StopReason};
use toolwright_core::registry::input_digest;
use toolwright_core::{Caller, ErrorCode, Principal, ToolError};
use toolwright_runtime::{SessionSpec, StepOptions, StepOutcome, ToolCall};

use crate::McpServer;
use crate::binding::Binding;
use crate::input::modern;

/// How long a sealed sampling `requestState` stays valid.
const STATE_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The most rounds of tool calls one ask runs before it gives up.
const MAX_TOOL_ROUNDS: usize = 8;

/// What a sealed sampling `requestState` carries: the call it belongs to, the rounds answered
/// so far and the request the client was asked last.
#[derive(Serialize, Deserialize)]
struct SamplingState {
    principal: Option<Principal>,
    tool: String,
    /// The digest of the call's arguments: a retry must be the same call.
    arguments: String,
    rounds: Vec<Round>,
    /// The key of the pending input request and the digest of what it asked.
    asked: Asked,
}

#[derive(Clone, Serialize, Deserialize)]
struct Asked {
    key: String,
    request: String,
}

/// One answered `sampling/createMessage` of a re-run call.
#[derive(Clone, Serialize, Deserialize)]
struct Round {
    /// The digest of the request, so a re-run that asks something else is caught.
    request: String,
    /// The client's answer (`CreateMessageResult`).
    answer: Value,
    /// The results of the tools the answer called, once they ran (`ToolResult` blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_results: Option<Vec<Value>>,
}

/// The sampling side of one `tools/call`: built before the step, asked after it whether the
/// tool wants an answer the client must give first (2026-07-28).
pub(crate) struct SamplingCall {
    /// What the client declared of sampling, if anything.
    capability: Option<SamplingCapability>,
    /// Whether the client speaks 2026-07-28 (input-required results, no requests to it).
    modern: bool,
    tool: String,
    /// The digest of the call's arguments, for a 2026-07-28 client that samples (what names
    /// the call in its sealed state); empty otherwise, so other calls pay nothing for it.
    arguments: String,
    /// The answered rounds of a retried call.
    retried: Option<Vec<Round>>,
    /// The re-run's record, for the input-required result.
    rounds: Option<Arc<Rounds>>,
}

impl SamplingCall {
    fn of(cx: &RequestContext<RoleServer>, tool: String) -> Self {
        SamplingCall {
            capability: cx.client_capabilities().and_then(|c| c.sampling),
            modern: modern(cx),
            tool,
            arguments: String::new(),
            retried: None,
            rounds: None,
        }
    }

    /// Whether the request is a retry carrying a sampling `requestState` (not an approval's).
    pub(crate) fn is_retry(&self) -> bool {
        self.retried.is_some()
    }
}

impl McpServer {
    /// Reads the sampling side of a `tools/call`: opens a sampling `requestState` and takes the
    /// client's answer from `inputResponses`. A `requestState` of another kind is left to
    /// `resume`.
    pub(crate) fn sampling_call(
        &self,
        cx: &RequestContext<RoleServer>,
        params: &CallToolRequestParams,
        principal: Option<&Principal>,
    ) -> Result<SamplingCall, ErrorData> {
        let mut call = SamplingCall::of(cx, params.name.to_string());
        if call.modern && (call.capability.is_some() || params.request_state.is_some()) {
            call.arguments =
                input_digest(&Value::Object(params.arguments.clone().unwrap_or_default()));
        }
        let Some(sealed) = &params.request_state else {
            return Ok(call);
        };
        let Ok(state) = self.states().open_json::<SamplingState>(sealed) else {
            return Ok(call);
        };
        if state.principal.as_ref() != principal {
            return Err(ErrorData::invalid_request(
                "this `requestState` belongs to another client",
                None,
            ));
        }
        if state.tool != call.tool || state.arguments != call.arguments {
            return Err(ErrorData::invalid_params(
                "this `requestState` belongs to another call: retry the call it came with, with the same arguments, or call again without it",
                None,
            ));
        }
        let answer = params
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(&state.asked.key))
            .cloned()
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!(
                        "`inputResponses` needs `{}`, the model's answer to the `sampling/createMessage` request",
                        state.asked.key
                    ),
                    None,
                )
            })?;
        serde_json::from_value::<CreateMessageResult>(answer.clone()).map_err(|e| {
            ErrorData::invalid_params(
                format!(
                    "`inputResponses.{}` is not a `sampling/createMessage` result: {e}",
                    state.asked.key
                ),
                None,
            )
        })?;
        let mut rounds = state.rounds;
        rounds.push(Round {
            request: state.asked.request,
            answer,
            tool_results: None,
        });
        call.retried = Some(rounds);
        Ok(call)
    }

    /// The options of the call's step: the client's model as the step's model, when the client
    /// can lend it; a backend that says why not when it cannot and the runtime has none.
    pub(crate) fn sampling_options(
        &self,
        cx: &RequestContext<RoleServer>,
        call: &mut SamplingCall,
        session_id: &str,
        principal: Option<Principal>,
        binding: &Arc<Binding>,
    ) -> StepOptions {
        let Some(capability) = &call.capability else {
            if self.runtime().has_model() {
                return StepOptions::new();
            }
            return StepOptions::new().model(NoSampling { why: NO_SAMPLING });
        };
        let way = if call.modern {
            let rounds = Arc::new(Rounds {
                recorded: Mutex::new(call.retried.take().unwrap_or_default()),
                next: Mutex::new(0),
                asked: Mutex::new(None),
            });
            call.rounds = Some(Arc::clone(&rounds));
            Way::Rounds(rounds)
        } else {
            Way::Live(cx.peer.clone())
        };
        let inner = InnerTools {
            server: self.clone(),
            parent: session_id.to_owned(),
            principal,
            binding: Arc::clone(binding),
            offered: capability.tools.is_some(),
        };
        StepOptions::new().model(Sampling { way, inner })
    }

    /// The options of the calls an answer resumes while the client waits in this request (a
    /// 2025-11-25 client asked through elicitation): its model, as for the step.
    pub(crate) fn resumed_sampling(
        &self,
        cx: &RequestContext<RoleServer>,
        session_id: &str,
        principal: Option<Principal>,
    ) -> StepOptions {
        let mut call = SamplingCall::of(cx, String::new());
        let binding = self.binding_of(cx);
        self.sampling_options(cx, &mut call, session_id, principal, &binding)
    }

    /// The options of the calls an answer in a retried 2026-07-28 request resumes: the client
    /// cannot be asked for its model then (answering would run the call again, and with it the
    /// approval), so a new ask fails saying so, unless the runtime has a model of its own (a
    /// workflow body's journaled answers replay without asking).
    pub(crate) fn approved_sampling(&self) -> StepOptions {
        if self.runtime().has_model() {
            return StepOptions::new();
        }
        StepOptions::new().model(NoSampling {
            why: "this call waited for an approval, and on MCP 2026-07-28 the client's model cannot be asked after one (its answer would run the call again, approval and all); call tools that ask the model without an approval policy, or have the server's operator install a model on the runtime",
        })
    }

    /// After the step: when the tool asked the client's model something not answered yet (a
    /// 2026-07-28 client), the input-required result that asks it; this attempt's result is
    /// dropped.
    pub(crate) fn sampling_required(
        &self,
        call: &SamplingCall,
        principal: Option<Principal>,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        let Some(rounds) = &call.rounds else {
            return Ok(None);
        };
        let Some((params, digest)) = rounds.asked.lock().ok().and_then(|mut a| a.take()) else {
            return Ok(None);
        };
        let recorded = rounds
            .recorded
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        let key = format!("sampling-{}", recorded.len() + 1);
        let state = SamplingState {
            principal,
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            rounds: recorded,
            asked: Asked {
                key: key.clone(),
                request: digest,
            },
        };
        let sealed = self
            .states()
            .seal_json_with(&state, &SealOptions::new().ttl(STATE_TTL))
            .map_err(|e| {
                ErrorData::internal_error(format!("sealing the request state: {e}"), None)
            })?;
        let mut inputs = InputRequests::new();
        inputs.insert(
            key,
            rmcp::model::InputRequest::CreateMessage(CreateMessageRequest::new(params)),
        );
        Ok(Some(
            InputRequiredResult::new(Some(inputs), Some(sealed)).into(),
        ))
    }
}

/// The step's model when the client cannot lend one and the runtime has none: every ask fails
/// saying why.
struct NoSampling {
    why: &'static str,
}

/// Why a client that declared no sampling cannot lend its model.
const NO_SAMPLING: &str = "this MCP client supports no sampling (it declared no `sampling` capability), so it cannot lend its model; call the tool from a client that supports sampling, or have the server's operator install a model on the runtime";

impl ModelBackend for NoSampling {
    fn complete(&self, _request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
        Box::pin(std::future::ready(Err(ToolError::with_code(
            ErrorCode::MissingState,
            format!("this tool asks a model, and {}", self.why),
        ))))
    }
}

/// The client's model, as the step's model backend.
struct Sampling {
    way: Way,
    inner: InnerTools,
}

/// How the client is asked.
enum Way {
    /// A 2025-11-25 client: `sampling/createMessage` now.
    Live(Peer<RoleServer>),
    /// A 2026-07-28 client: the answers of earlier attempts, then an input-required result.
    Rounds(Arc<Rounds>),
}

/// The answers a re-run call replays and the request it stopped at.
struct Rounds {
    recorded: Mutex<Vec<Round>>,
    /// The index of the next round this attempt reaches.
    next: Mutex<usize>,
    /// The first request with no answer yet, and its digest.
    asked: Mutex<Option<(CreateMessageRequestParams, String)>>,
}

/// One round's answer, and the results of its tool calls when they are on record.
struct Answer {
    result: CreateMessageResult,
    index: Option<usize>,
    tool_results: Option<Vec<Value>>,
}

impl Sampling {
    /// Asks the client once: live, or from the record of earlier attempts.
    async fn round(&self, params: &CreateMessageRequestParams) -> Result<Answer, ToolError> {
        let rounds = match &self.way {
            Way::Live(peer) => {
                let result = peer.create_message(params.clone()).await.map_err(|e| {
                    ToolError::with_code(
                        ErrorCode::Unavailable,
                        format!("the client's model did not answer: {e}"),
                    )
                })?;
                return Ok(Answer {
                    result,
                    index: None,
                    tool_results: None,
                });
            }
            Way::Rounds(rounds) => rounds,
        };
        let digest = input_digest(&serde_json::to_value(params).unwrap_or(Value::Null));
        let index = {
            let mut next = rounds.next.lock().map_err(poisoned)?;
            *next += 1;
            *next - 1
        };
        let recorded = rounds
            .recorded
            .lock()
            .map_err(poisoned)?
            .get(index)
            .cloned();
        let Some(round) = recorded else {
            if let Ok(mut asked) = rounds.asked.lock()
                && asked.is_none()
            {
                *asked = Some((params.clone(), digest));
            }
            // The tool stops here: the client is asked, and the call runs again with the answer.
            return Err(ToolError::with_code(
                ErrorCode::Unavailable,
                "the client's model is being asked; this attempt is discarded and the call runs again with its answer",
            ));
        };
        if round.request != digest {
            return Err(ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "on its re-run the tool asked the client's model something other than in round {}, so the recorded answer does not fit; call the tool again without `requestState` (a tool that asks the model must ask the same things in the same order on every run)",
                    index + 1
                ),
            ));
        }
        let result = serde_json::from_value(round.answer).map_err(|e| {
            ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "the recorded answer of round {} cannot be read: {e}",
                    index + 1
                ),
            )
        })?;
        Ok(Answer {
            result,
            index: Some(index),
            tool_results: round.tool_results,
        })
    }

    /// Records the results of the tools round `index` called, so a re-run does not run them
    /// again.
    fn record_tool_results(&self, index: Option<usize>, results: &[Value]) {
        if let (Way::Rounds(rounds), Some(index)) = (&self.way, index)
            && let Ok(mut recorded) = rounds.recorded.lock()
            && let Some(round) = recorded.get_mut(index)
        {
            round.tool_results = Some(results.to_vec());
        }
    }

    async fn ask(&self, request: ModelRequest) -> Result<ModelReply, ToolError> {
        let mut params = self.inner.params(&request)?;
        for _ in 0..=MAX_TOOL_ROUNDS {
            let answer = self.round(&params).await?;
            let uses: Vec<ToolUseContent> = answer
                .result
                .message
                .content
                .iter()
                .filter_map(SamplingMessageContentBlock::as_tool_use)
                .cloned()
                .collect();
            if uses.is_empty() {
                return Ok(reply_of(answer.result));
            }
            if request.tools.is_empty() {
                return Err(ToolError::new(format!(
                    "the client's model called `{}`, though the tool offered it no tools",
                    uses[0].name
                )));
            }
            let results = match answer.tool_results {
                Some(results) => results,
                None => {
                    // The tools' calls need places among the runtime's concurrent calls (the
                    // asking call holds one): waiting for them, it gives its place up and its
                    // timeout's clock stands still, as a subagent's call does.
                    let results =
                        toolwright_runtime::waiting_on_calls(self.inner.run(&uses, &request.tools))
                            .await;
                    self.record_tool_results(answer.index, &results);
                    results
                }
            };
            let blocks = results
                .into_iter()
                .filter_map(|r| serde_json::from_value(r).ok())
                .collect();
            params.messages.push(answer.result.message);
            params
                .messages
                .push(SamplingMessage::new_multiple(Role::User, blocks));
        }
        Err(ToolError::new(format!(
            "the client's model was still calling tools after {MAX_TOOL_ROUNDS} rounds; ask it something narrower"
        )))
    }
}

impl ModelBackend for Sampling {
    fn complete(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelReply, ToolError>> {
        Box::pin(self.ask(request))
    }
}

fn poisoned<T>(_: T) -> ToolError {
    ToolError::new("the sampling record was poisoned by a panic")
}

/// What runs the tools the client's model calls: the runtime, in a child session of the call's.
struct InnerTools {
    /// For the runtime, the tools' MCP definitions and their results in MCP form.
    server: McpServer,
    parent: String,
    principal: Option<Principal>,
    binding: Arc<Binding>,
    /// Whether the client declared `sampling.tools`.
    offered: bool,
}

impl InnerTools {
    /// The `sampling/createMessage` params of `request`.
    fn params(&self, request: &ModelRequest) -> Result<CreateMessageRequestParams, ToolError> {
        let messages = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    MessageRole::User => Role::User,
                    MessageRole::Assistant => Role::Assistant,
                };
                SamplingMessage::new(role, SamplingMessageContentBlock::text(m.text.clone()))
            })
            .collect();
        let mut params = CreateMessageRequestParams::new(messages, request.max_tokens);
        // Sampling has no structured output: the schema goes into the system prompt.
        params.system_prompt = request.system_with_result_instruction();
        params.temperature = request.temperature;
        if !request.stop.is_empty() {
            params.stop_sequences = Some(request.stop.clone());
        }
        if request.agent.is_some() {
            request.refuse_tools(
                "an MCP client's model answers through sampling, which runs no subagents; serve the runtime with the model loop installed (`Agent::install`) to run them",
            )?;
        }
        if request.tools.is_empty() {
            return Ok(params);
        }
        if !self.offered {
            request.refuse_tools(
                "this MCP client did not declare `sampling.tools`, so its model cannot be offered tools; ask without `.tools(..)`, or use a client that supports tools in sampling",
            )?;
        }
        let listing = self.server.listing();
        let mut tools = Vec::with_capacity(request.tools.len());
        for name in &request.tools {
            let tool = listing.tool(name).ok_or_else(|| {
                ToolError::with_code(
                    ErrorCode::UnknownTool,
                    format!("the model was offered tool `{name}`, and no tool has that name"),
                )
            })?;
            tools.push(tool.clone());
        }
        Ok(params.with_tools(tools))
    }

    /// Runs the tools the model called, in a child session; one `ToolResult` block (as JSON) per
    /// call, in order.
    async fn run(&self, uses: &[ToolUseContent], offered: &[String]) -> Vec<Value> {
        let (allowed, refused): (Vec<_>, Vec<_>) =
            uses.iter().partition(|u| offered.contains(&u.name));
        let mut results: Vec<(String, bool, Vec<ContentBlock>)> = refused
            .iter()
            .map(|u| {
                let text = format!(
                    "`{}` is not among the tools offered to you: {}",
                    u.name,
                    offered.join(", ")
                );
                (u.id.clone(), true, vec![ContentBlock::text(text)])
            })
            .collect();
        if !allowed.is_empty() {
            results.extend(self.step(&allowed).await);
        }
        uses.iter()
            .filter_map(|u| results.iter().find(|(id, ..)| *id == u.id))
            .map(|(id, is_error, content)| {
                let mut block = rmcp::model::ToolResultContent::new(id.clone(), content.clone());
                block.is_error = Some(*is_error);
                serde_json::to_value(SamplingMessageContentBlock::ToolResult(block))
                    .unwrap_or(Value::Null)
            })
            .collect()
    }

    /// One step of the child session's turn: `(call id, is_error, content)` per call.
    async fn step(&self, uses: &[&ToolUseContent]) -> Vec<(String, bool, Vec<ContentBlock>)> {
        let failed = |why: String| {
            uses.iter()
                .map(|u| (u.id.clone(), true, vec![ContentBlock::text(why.clone())]))
                .collect::<Vec<_>>()
        };
        let child = format!("{}~model-{}", self.parent, uuid::Uuid::new_v4().simple());
        let mut spec = SessionSpec::new(&child).parent(&self.parent);
        if let Some(principal) = &self.principal {
            spec = spec.initiator(principal.clone());
        }
        let turn = match self.server.runtime().open_session(spec).await {
            Ok(session) => match self.binding.taint() {
                Some(source) => {
                    session
                        .begin_tainted_turn(self.principal.clone(), Caller::Subagent, source)
                        .await
                }
                None => {
                    session
                        .begin_turn(self.principal.clone(), Caller::Subagent)
                        .await
                }
            },
            Err(error) => Err(error),
        };
        let turn = match turn {
            Ok(turn) => turn,
            Err(error) => return failed(format!("the tool could not run: {error}")),
        };
        let calls = uses
            .iter()
            .map(|u| ToolCall::new(&u.id, &u.name, Value::Object(u.input.clone()).to_string()))
            .collect();
        let outcome = turn.step(calls).await;
        if let Ok(record) = turn.record().await
            && let Some(source) = &record.tainted_by
        {
            self.binding.note_taint(source);
        }
        let results = match outcome {
            Ok(StepOutcome::Completed { results, .. }) => results,
            Ok(StepOutcome::Waiting { results, .. }) => {
                // Nobody can be asked from inside the model's session: what waits is refused.
                let _ = turn.cancel().await;
                results
            }
            Err(error) => return failed(format!("the tool could not run: {error}")),
        };
        let _ = turn.complete().await;
        let mut converted = Vec::with_capacity(results.len());
        for result in &results {
            let content = self.server.to_mcp(turn.session_id(), result).await.content;
            converted.push((result.call_id.clone(), result.is_error, content));
        }
        uses.iter()
            .map(|u| match converted.iter().find(|(id, ..)| *id == u.id) {
                Some(found) => found.clone(),
                None => {
                    let why = format!(
                        "`{}` needs a person's approval or answer, and nobody can be asked from inside a tool's model session; it did not run",
                        u.name
                    );
                    (u.id.clone(), true, vec![ContentBlock::text(why)])
                }
            })
            .collect()
    }
}

/// The model handle's reply for a sampling result: its text blocks, joined.
fn reply_of(result: CreateMessageResult) -> ModelReply {
    let text: Vec<&str> = result
        .message
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let mut reply = ModelReply::new(result.model.clone(), text.join("\n"));
    if let Some(reason) = &result.stop_reason {
        reply = reply.stop_reason(match reason.as_str() {
            CreateMessageResult::STOP_REASON_END_TURN => StopReason::EndTurn,
            CreateMessageResult::STOP_REASON_END_MAX_TOKEN => StopReason::MaxTokens,
            CreateMessageResult::STOP_REASON_END_SEQUENCE => StopReason::StopSequence,
            CreateMessageResult::STOP_REASON_TOOL_USE => StopReason::ToolUse,
            other => StopReason::Other(other.to_owned()),
        });
    }
    reply
}
