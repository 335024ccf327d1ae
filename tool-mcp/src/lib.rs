//! Serve a toolwright [`Runtime`] over the Model Context Protocol, through `rmcp`.
//!
//! [`McpServer`] is an `rmcp` server handler built once from a runtime: the model-facing tool list
//! (titles, annotations derived from effects, output schemas, the `tool_search`/`tool_call` and
//! `task_wait`/`task_cancel` meta-tools) is converted once and served in pages; every
//! `tools/call` runs through the runtime's pipeline with its policies, in one toolwright session
//! and turn per MCP session, so taint from `untrusted` tools carries across the session's calls.
//!
//! - Approvals and questions: a call that needs a person asks the client through elicitation
//!   (form mode) when the client declared it; accept / decline / cancel become approve / deny /
//!   cancel through the same input protocol and response policies as in process. A client that
//!   cannot ask gets an `isError` result naming the policy; nothing runs, nothing is approved
//!   silently.
//! - Progress: partial snapshots become `notifications/progress` when the request carries a
//!   progress token. Cancellation: `notifications/cancelled` cancels the call's turn, which fires
//!   the tool's cancellation token.
//! - Identity: over stdio, the principal given to [`McpServer::principal`]; over HTTP, the
//!   principal a [`TokenVerifier`] returns for the request's bearer token. An MCP session is bound
//!   to the principal that opened it: a request from another principal is refused.
//!
//! ```no_run
//! # async fn demo(runtime: toolwright_runtime::Runtime) -> Result<(), toolwright_mcp::McpError> {
//! let server = toolwright_mcp::McpServer::new(runtime);
//! toolwright_mcp::serve_stdio(server).await?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
mod http_server;
mod tasks;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationSchema, Implementation, InputRequests,
    InputRequiredResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, RequestStateCodec, SealOptions, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use toolwright_core::{Audience, Caller, ContentPart, Format, ModelOutput, Principal, Registry};
use toolwright_runtime::{
    CallResult, Event, InputRequest, InputResponse, RequestKind, RespondOutcome, Runtime,
    RuntimeError, SessionSpec, StepOutcome, ToolCall, Turn, TurnStatus,
};

pub use client::{AuthResolver, McpConnector};
pub use http_server::{HttpHandle, McpHttp, TokenVerifier};

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The transport failed (stdio closed, a socket could not be bound).
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The server was configured wrongly.
    #[error("MCP server configuration: {0}")]
    Config(String),
    /// The runtime refused something.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

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

/// How many tools one `tools/list` page holds by default.
const DEFAULT_PAGE_SIZE: usize = 100;

/// The toolwright session and turn an MCP session runs in.
#[derive(Default)]
struct Binding {
    /// Who opened the MCP session (`None`: unauthenticated, e.g. stdio without a principal).
    principal: Option<Option<Principal>>,
    session_id: Option<String>,
    turn: Option<Turn>,
    /// The conditional tools unavailable in this session when it last listed or called.
    unavailable: Vec<String>,
    /// The tools listed when the session last listed (remote tools come and go).
    listed: Vec<String>,
    /// The task telling the client when they change.
    watching: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Binding {
    fn drop(&mut self) {
        if let Some(watching) = &self.watching {
            watching.abort();
        }
    }
}

/// The runtime's model-facing tool list in MCP form, for one registry.
struct Listing {
    registry: Registry,
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

impl Listing {
    fn of(registry: Registry) -> Listing {
        let tools: Vec<Tool> = registry
            .list(Audience::Model, Format::Mcp)
            .entries()
            .iter()
            .filter_map(|entry| match serde_json::from_str::<Tool>(entry.json.get()) {
                Ok(tool) => Some(tool),
                Err(error) => {
                    tracing::error!(tool = %entry.name, "cannot express the tool in MCP: {error}");
                    None
                }
            })
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_string(), i))
            .collect();
        Listing {
            registry,
            tools,
            by_name,
        }
    }

    fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }
}

/// `cache`, or a new listing when the runtime's registry is no longer the one it was made from.
fn current_listing(runtime: &Runtime, cache: &arc_swap::ArcSwap<Listing>) -> Arc<Listing> {
    let current = cache.load_full();
    let registry = runtime.registry();
    if current.registry.same(&registry) {
        return current;
    }
    let fresh = Arc::new(Listing::of(registry));
    cache.store(Arc::clone(&fresh));
    fresh
}

/// An MCP server handler over a toolwright runtime. Cheap to clone; over HTTP every MCP session
/// gets its own clone (see [`McpServer::for_new_session`]) with its own binding.
#[derive(Clone)]
pub struct McpServer {
    runtime: Runtime,
    /// The MCP form of the runtime's tool list, converted once per registry (the runtime's
    /// registry changes when its connections' tools do).
    listing: Arc<arc_swap::ArcSwap<Listing>>,
    page_size: usize,
    principal: Option<Principal>,
    name: String,
    /// Whether some tool is conditional (`enabled = ...`), so lists depend on the session.
    conditional: bool,
    /// Seals the `requestState` of input-required results (HMAC with the server's key).
    states: Arc<RequestStateCodec>,
    /// Calls of one MCP session run one at a time in its turn (a turn takes one step at a time).
    binding: Arc<Mutex<Binding>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.listing.load().tools.len())
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for `runtime`'s registry, listing what the model audience sees. The list is
    /// converted once per registry: again only when the runtime's tools change (tools of its
    /// remote connections come, go or change).
    pub fn new(runtime: Runtime) -> Self {
        let listing = Listing::of(runtime.registry());
        let conditional = runtime
            .registry()
            .tools()
            .iter()
            .any(|t| t.enabled().is_some());
        // A random key per server: sealed states survive as long as the server does. Servers
        // that share parked calls share a key (`McpServer::request_state_key`).
        let key: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
            .iter()
            .flat_map(|u| *u.as_bytes())
            .collect();
        McpServer {
            // Two random UUIDs: 32 bytes, the length `try_new` asks for.
            states: Arc::new(RequestStateCodec::new_unchecked(key)),
            conditional,
            runtime,
            listing: Arc::new(arc_swap::ArcSwap::from_pointee(listing)),
            page_size: DEFAULT_PAGE_SIZE,
            principal: None,
            name: "toolwright".to_owned(),
            binding: Arc::new(Mutex::new(Binding::default())),
        }
    }

    /// The current listing: converted again when the runtime's registry changed.
    fn listing(&self) -> Arc<Listing> {
        current_listing(&self.runtime, &self.listing)
    }

    /// Who the client acts for when the transport does not say (stdio: the local user).
    #[must_use]
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// How many tools a `tools/list` page holds (default 100).
    #[must_use]
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// The server name announced in `initialize`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The key that seals `requestState` in input-required results (at least 32 bytes; by
    /// default a random one per server). Instances that resume each other's parked calls share
    /// one.
    pub fn request_state_key(mut self, key: impl Into<Vec<u8>>) -> Result<Self, McpError> {
        let codec = RequestStateCodec::try_new(key)
            .map_err(|e| McpError::Config(format!("the request-state key: {e}")))?;
        self.states = Arc::new(codec);
        Ok(self)
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// A clone with a fresh binding: what each new MCP session gets.
    pub fn for_new_session(&self) -> Self {
        McpServer {
            binding: Arc::new(Mutex::new(Binding::default())),
            ..self.clone()
        }
    }

    /// The principal of this request: the HTTP verifier's, or the server's own.
    fn caller(&self, cx: &RequestContext<RoleServer>) -> Option<Principal> {
        cx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>().cloned())
            .or_else(|| self.principal.clone())
    }

    /// The turn of this MCP session, opening its session and turn on first use; refuses a
    /// principal other than the one that opened it.
    async fn turn(
        &self,
        binding: &mut Binding,
        principal: Option<Principal>,
        peer: rmcp::Peer<RoleServer>,
    ) -> Result<Turn, ErrorData> {
        match &binding.principal {
            None => binding.principal = Some(principal.clone()),
            Some(owner) if *owner != principal => {
                return Err(ErrorData::invalid_request(
                    "this MCP session belongs to another client; open a session of your own",
                    None,
                ));
            }
            Some(_) => {}
        }
        if let Some(turn) = &binding.turn {
            match turn.record().await.map(|r| r.status) {
                Ok(TurnStatus::Active) => return Ok(turn.clone()),
                // A cancelled or ended turn: the next call starts another one.
                Ok(_) | Err(_) => binding.turn = None,
            }
        }
        let session_id = binding
            .session_id
            .get_or_insert_with(|| format!("mcp_{}", uuid::Uuid::new_v4().simple()))
            .clone();
        let mut spec = SessionSpec::new(&session_id);
        if let Some(principal) = &principal {
            spec = spec.initiator(principal.clone());
        }
        let session = self.runtime.open_session(spec).await.map_err(internal)?;
        let turn = session
            .begin_turn(principal, Caller::Model)
            .await
            .map_err(internal)?;
        if binding.turn.is_none() && self.conditional && binding.watching.is_none() {
            binding.watching = Some(self.watch_session(&session_id, peer));
        }
        binding.turn = Some(turn.clone());
        Ok(turn)
    }

    /// Tells the client to list again whenever the host changes the session's state in a way
    /// that makes conditional tools come or go, and whenever the tools of the runtime's remote
    /// connections change.
    fn watch_session(
        &self,
        session_id: &str,
        peer: rmcp::Peer<RoleServer>,
    ) -> tokio::task::JoinHandle<()> {
        let mut events = self.runtime.subscribe();
        let binding = Arc::downgrade(&self.binding);
        let session_id = session_id.to_owned();
        let (runtime, cache) = (self.runtime.clone(), Arc::clone(&self.listing));
        tokio::spawn(async move {
            loop {
                let event = events.recv().await;
                let (changed, remote) = match event {
                    Ok(Event::SessionChanged { session_id: s }) => (s == session_id, false),
                    Ok(Event::ConnectionChanged { .. } | Event::ToolDefinitionChanged { .. }) => {
                        (false, true)
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => (true, true),
                    Err(_) => break,
                    Ok(_) => (false, false),
                };
                if !changed && !remote {
                    continue;
                }
                let Some(binding) = binding.upgrade() else {
                    break;
                };
                let mut binding = binding.lock().await;
                if remote {
                    let names = current_listing(&runtime, &cache).names();
                    if names != binding.listed {
                        binding.listed = names;
                        if peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                        continue;
                    }
                }
                if !changed {
                    continue;
                }
                let Some(turn) = binding.turn.clone() else {
                    continue;
                };
                if let Ok(unavailable) = turn.unavailable_tools().await
                    && unavailable != binding.unavailable
                {
                    binding.unavailable = unavailable;
                    if peer.notify_tool_list_changed().await.is_err() {
                        break;
                    }
                }
            }
        })
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let principal = self.caller(&cx);
        if let Some(state) = &params.request_state {
            return self.resume(&params, state, principal).await;
        }
        let mut binding = self.binding.lock().await;
        let turn = self
            .turn(&mut binding, principal.clone(), cx.peer.clone())
            .await?;
        let call_id = format!("mcp-{}", cx.id);
        let arguments = Value::Object(params.arguments.unwrap_or_default()).to_string();
        let call = ToolCall::new(&call_id, params.name.as_ref(), arguments);

        // Partial snapshots become progress notifications when the client asked for them.
        let progress = cx.meta.get_progress_token().map(|token| {
            let mut events = self.runtime.subscribe();
            let peer = cx.peer.clone();
            let (turn_id, call_id) = (turn.id().to_owned(), call_id.clone());
            tokio::spawn(async move {
                let mut count = 0.0;
                while let Ok(event) = events.recv().await {
                    match event {
                        Event::ActionPartial {
                            turn_id: t,
                            call_id: c,
                            snapshot,
                            label,
                            ..
                        } if t == turn_id && c == call_id => {
                            count += 1.0;
                            let mut param = ProgressNotificationParam::new(token.clone(), count);
                            param.message = Some(label.unwrap_or_else(|| snapshot.to_string()));
                            if peer.notify_progress(param).await.is_err() {
                                break;
                            }
                        }
                        Event::ActionResult {
                            turn_id: t, result, ..
                        } if t == turn_id && result.call_id == call_id => {
                            break;
                        }
                        _ => {}
                    }
                }
            })
        });

        let stepped = tokio::select! {
            outcome = turn.step(vec![call]) => outcome,
            () = cx.ct.cancelled() => {
                // `notifications/cancelled`: the call's token fires with its turn.
                let _ = turn.cancel().await;
                binding.turn = None;
                if let Some(task) = progress { task.abort(); }
                return Err(ErrorData::internal_error("the call was cancelled by the client", None));
            }
        };
        let result = match stepped {
            Ok(StepOutcome::Completed { results, .. }) => first(results, &call_id),
            Ok(StepOutcome::Waiting {
                results, requests, ..
            }) => {
                let done = results.into_iter().find(|r| r.call_id == call_id);
                match done {
                    Some(result) => Ok(result),
                    // Peers on 2026-07-28 get the question back in the result and answer it by
                    // calling again; older peers are asked through elicitation.
                    None if modern(&cx) => {
                        if let Some(task) = progress {
                            task.abort();
                        }
                        return self.input_required(turn.id(), principal, &requests, &call_id);
                    }
                    None => {
                        self.ask_person(&cx, &turn, principal, requests, &call_id)
                            .await
                    }
                }
            }
            Err(error) => Err(internal(error)),
        };
        if let Some(task) = progress {
            task.abort();
        }
        // A call that changed which conditional tools are available (through the session's
        // state) changes the list: the client is told to list again.
        if let Ok(unavailable) = turn.unavailable_tools().await
            && unavailable != binding.unavailable
        {
            binding.unavailable = unavailable;
            let _ = cx.peer.notify_tool_list_changed().await;
        }
        let result = result?;
        // A `task` tool's receipt becomes an MCP task for clients of the tasks extension.
        if let Some(task) = self.task_receipt(&cx, &result) {
            return Ok(task);
        }
        Ok(self.to_mcp(&result).into())
    }

    /// An input-required result for the first pending request, with the sealed state that
    /// resumes the call.
    fn input_required(
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
            .states
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
    async fn resume(
        &self,
        params: &CallToolRequestParams,
        state: &str,
        principal: Option<Principal>,
    ) -> Result<CallToolResponse, ErrorData> {
        let pending: Pending = self.states.open_json(state).map_err(|e| {
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
            .runtime
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
        let outcome = self.runtime.respond(response).await.map_err(internal)?;
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
            RespondOutcome::Rejected { reason } => CallResult::failed(
                call_id,
                request.tool.as_deref().unwrap_or_default(),
                toolwright_core::ToolError::with_code(
                    toolwright_core::ErrorCode::Denied,
                    format!("the answer was refused: {reason}"),
                ),
            ),
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
        Ok(self.to_mcp(&result).into())
    }

    /// Settles the requests a parked call waits on by asking the client's user (elicitation),
    /// until the call has its result.
    async fn ask_person(
        &self,
        cx: &RequestContext<RoleServer>,
        turn: &Turn,
        principal: Option<Principal>,
        mut requests: Vec<InputRequest>,
        call_id: &str,
    ) -> Result<CallResult, ErrorData> {
        let can_elicit = cx
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some();
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
                let _ = self.runtime.respond(response).await;
                return Ok(cannot_ask(&request, call_id));
            }
            let response = elicit(cx, &request, principal.clone()).await?;
            let outcome = self.runtime.respond(response).await.map_err(internal)?;
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
                    return Ok(CallResult::failed(
                        call_id,
                        request.tool.as_deref().unwrap_or_default(),
                        toolwright_core::ToolError::with_code(
                            toolwright_core::ErrorCode::Denied,
                            format!("the answer was refused: {reason}"),
                        ),
                    ));
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

    /// A toolwright result as an MCP `CallToolResult`.
    fn to_mcp(&self, result: &CallResult) -> CallToolResult {
        let content = content_of(&result.model);
        if result.is_error {
            return CallToolResult::error(content);
        }
        let listing = self.listing();
        let has_output_schema = listing
            .by_name
            .get(&result.tool)
            .is_some_and(|&i| listing.tools[i].output_schema.is_some());
        let mut mcp = CallToolResult::success(content);
        if has_output_schema && result.output.is_object() {
            mcp.structured_content = Some(result.output.clone());
        }
        mcp
    }
}

fn internal(error: RuntimeError) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}

fn first(results: Vec<CallResult>, call_id: &str) -> Result<CallResult, ErrorData> {
    results
        .into_iter()
        .find(|r| r.call_id == call_id)
        .ok_or_else(|| ErrorData::internal_error("the step returned no result for the call", None))
}

fn content_of(model: &ModelOutput) -> Vec<ContentBlock> {
    match model {
        ModelOutput::Text(text) => vec![ContentBlock::text(text.clone())],
        // A string is its text, not a quoted JSON string.
        ModelOutput::Json(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        ModelOutput::Json(value) => vec![ContentBlock::text(value.to_string())],
        ModelOutput::Content(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => ContentBlock::text(text.clone()),
                ContentPart::File { data, media_type } if media_type.starts_with("image/") => {
                    ContentBlock::image(data.clone(), media_type.clone())
                }
                ContentPart::File { media_type, .. } => {
                    ContentBlock::text(format!("[a {media_type} file]"))
                }
            })
            .collect(),
    }
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

/// Puts one request to the client's user as a form elicitation and maps the answer.
async fn elicit(
    cx: &RequestContext<RoleServer>,
    request: &InputRequest,
    principal: Option<Principal>,
) -> Result<InputResponse, ErrorData> {
    let (message, schema) = form_for(request);
    let schema = ElicitationSchema::from_json_schema(schema)
        .map_err(|e| ErrorData::internal_error(format!("elicitation schema: {e}"), None))?;
    let answer = cx
        .peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
        .await
        .map_err(|e| ErrorData::internal_error(format!("elicitation failed: {e}"), None))?;
    Ok(response_for(request, answer, principal))
}

/// The input-protocol response for an elicitation answer: accept → approve (or the answer to a
/// question), decline → deny, cancel → cancel.
fn response_for(
    request: &InputRequest,
    answer: ElicitResult,
    principal: Option<Principal>,
) -> InputResponse {
    let id = &request.request_id;
    match answer.action {
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

/// Whether the request's peer speaks 2026-07-28 or later (no server-to-client requests; input
/// goes through input-required results).
fn modern(cx: &RequestContext<RoleServer>) -> bool {
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

/// The message and form schema of a request.
fn form_for(request: &InputRequest) -> (String, JsonObject) {
    let schema = if request.kind == RequestKind::Question {
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
    let schema = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    (message, schema)
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            self.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28).into()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Conditional tools follow the session's state; without any, the list is the same for
        // every session and every page is a slice of it.
        let unavailable = if self.conditional {
            let principal = self.caller(&cx);
            let mut binding = self.binding.lock().await;
            let turn = self.turn(&mut binding, principal, cx.peer.clone()).await?;
            let unavailable = turn.unavailable_tools().await.map_err(internal)?;
            binding.unavailable.clone_from(&unavailable);
            unavailable
        } else {
            Vec::new()
        };
        let listing = self.listing();
        // Without waiting for a call of this session to finish: at worst the client is told
        // once more than needed that the list changed.
        if let Ok(mut binding) = self.binding.try_lock() {
            binding.listed = listing.names();
            // A client that only lists still hears when remote tools change (a session with
            // conditional tools got its watcher with its turn, above).
            if binding.watching.is_none() {
                binding.watching = Some(self.watch_session("", cx.peer.clone()));
            }
        }
        let tools: Vec<&Tool> = listing
            .tools
            .iter()
            .filter(|t| !unavailable.iter().any(|u| t.name == u.as_str()))
            .collect();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&i| i < tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("unknown cursor `{cursor}`; start again without a cursor"),
                        None,
                    )
                })?,
        };
        let end = (start + self.page_size).min(tools.len());
        let mut result = ListToolsResult::with_all_items(
            tools[start..end].iter().map(|t| (*t).clone()).collect(),
        );
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let listing = self.listing();
        listing.by_name.get(name).map(|&i| listing.tools[i].clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, cx).await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        self.get_task_state(request, cx).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.update_task_inputs(request, cx).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.cancel_task_run(request, cx).await
    }
}

/// Serves `server` over stdin/stdout until the client disconnects.
pub async fn serve_stdio(server: McpServer) -> Result<(), McpError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    Ok(())
}
