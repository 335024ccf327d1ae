//! [`McpServer`]: the `rmcp` server handler over a runtime, with the toolwright session and turn
//! each MCP session runs in, and [`serve_stdio`].

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, RequestStateCodec, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use toolwright_core::{Caller, Principal};
use toolwright_runtime::{Runtime, SessionSpec, StepOutcome, ToolCall, Turn, TurnStatus};

use crate::McpError;
use crate::binding::{Binding, BindingState, SharedBinding};
use crate::changes::{Change, Changes};
use crate::compose::{Composed, not_served};
use crate::convert::{first, internal};
use crate::input::{asks_person, can_elicit, modern};
use crate::limits::identity;
use crate::listing::{Listing, current_listing};

/// How many tools one `tools/list` page holds by default.
const DEFAULT_PAGE_SIZE: usize = 100;

/// An MCP server handler over a toolwright runtime. Cheap to clone; over HTTP every MCP session
/// gets its own clone (see [`McpServer::for_new_session`]) with its own binding.
///
/// Serve it with [`serve_stdio`], [`serve_io`](crate::serve_io) or [`McpHttp`](crate::McpHttp):
/// `McpHttp` is what binds the sessionless requests of 2026-07-28 clients by principal and
/// [`SESSION_HEADER`](crate::SESSION_HEADER), so that their calls share a session and its
/// taint; behind another HTTP stack each such request would start a session of its own.
#[derive(Clone)]
pub struct McpServer {
    runtime: Runtime,
    /// The MCP form of the runtime's tool list, converted once per registry (the runtime's
    /// registry changes when its connections' tools do).
    listing: Arc<arc_swap::ArcSwap<Listing>>,
    page_size: usize,
    principal: Option<Principal>,
    name: String,
    /// The locale of tool titles and of the sessions the server opens.
    locale: Option<Arc<str>>,
    /// Whether some tool is conditional (`enabled = ...`) or prepared (`prepare = ...`), so
    /// lists depend on the session.
    conditional: bool,
    /// Seals the `requestState` of input-required results (HMAC with the server's key).
    states: Arc<RequestStateCodec>,
    /// The binding of this MCP session (stdio, or an HTTP session of a 2025-11-25 client);
    /// stateless HTTP requests bring theirs (see `binding_of`).
    binding: Arc<Binding>,
    /// The `rmcp` handler serving prompts, resources and completions beside the tools.
    pub(crate) composed: Option<Arc<dyn Composed>>,
    /// The changes sessions' watchers act on, relayed once for the server and its clones.
    changes: Arc<Changes>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.listing.load().tool_count())
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for `runtime`'s registry, listing what the model audience sees. The list is
    /// converted once per registry: again only when the runtime's tools change (tools of its
    /// remote connections come, go or change).
    pub fn new(runtime: Runtime) -> Self {
        let listing = Listing::of(runtime.registry(), None);
        let conditional = runtime
            .registry()
            .tools()
            .iter()
            .any(|t| t.enabled().is_some() || t.prepare().is_some());
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
            locale: None,
            binding: Arc::new(Binding::new(false)),
            composed: None,
            changes: Arc::new(Changes::default()),
        }
    }

    /// The current listing: converted again when the runtime's registry changed.
    pub(crate) fn listing(&self) -> Arc<Listing> {
        current_listing(&self.runtime, &self.listing)
    }

    /// The locale of the people using this server's clients (a BCP 47 tag, `zh-CN`): the
    /// `title` of each tool in `tools/list` (and its annotations' `title`) is resolved for it,
    /// and the server's sessions take it ([`SessionSpec::locale`]: `tool_search` results).
    /// Default: the registry's default locale. Each locale's list is serialized once, by the
    /// registry. Fails when `locale` is not a BCP 47 language tag.
    pub fn locale(mut self, locale: &str) -> Result<Self, McpError> {
        if !toolwright_core::locale::is_locale(locale) {
            return Err(McpError::Config(format!(
                "`{locale}` is not a locale; give a BCP 47 language tag such as `en`, `zh` or `pt-BR`"
            )));
        }
        let locale: Arc<str> = Arc::from(locale);
        self.listing = Arc::new(arc_swap::ArcSwap::from_pointee(Listing::of(
            self.runtime.registry(),
            Some(Arc::clone(&locale)),
        )));
        self.locale = Some(locale);
        Ok(self)
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
            binding: Arc::new(Binding::new(false)),
            ..self.clone()
        }
    }

    /// What seals and opens the `requestState` of input-required results.
    pub(crate) fn states(&self) -> &RequestStateCodec {
        &self.states
    }

    /// The principal of this request: the HTTP verifier's, or the server's own.
    pub(crate) fn caller(&self, cx: &RequestContext<RoleServer>) -> Option<Principal> {
        cx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>().cloned())
            .or_else(|| self.principal.clone())
    }

    /// The binding this request runs in: a stateless HTTP request's, from the guard, or this
    /// MCP session's.
    pub(crate) fn binding_of(&self, cx: &RequestContext<RoleServer>) -> Arc<Binding> {
        cx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<SharedBinding>())
            .map_or_else(|| Arc::clone(&self.binding), |shared| Arc::clone(&shared.0))
    }

    /// The turn of this MCP session, opening its session and turn on first use; refuses a
    /// principal other than the one that opened it.
    ///
    /// The session's taint outlives its turns: a turn that ended (`ends_turn`, a cancel) or was
    /// left waiting is replaced by one that begins with the taint of those before it, and an
    /// untainted turn is replaced as soon as the binding learns of taint elsewhere (a resumed
    /// call of an older turn).
    async fn turn(
        &self,
        binding: &Arc<Binding>,
        state: &mut BindingState,
        principal: Option<Principal>,
        peer: rmcp::Peer<RoleServer>,
    ) -> Result<Turn, ErrorData> {
        match &state.principal {
            None => state.principal = Some(principal.clone()),
            Some(owner) if !same_principal(owner.as_ref(), principal.as_ref()) => {
                return Err(ErrorData::invalid_request(
                    "this MCP session belongs to another client; open a session of your own",
                    None,
                ));
            }
            Some(_) => {}
        }
        if let Some(turn) = &state.turn
            && let Ok(record) = turn.record().await
        {
            if let Some(source) = &record.tainted_by {
                binding.note_taint(source);
            }
            if record.status == TurnStatus::Active {
                if record.tainted_by.is_some() || binding.taint().is_none() {
                    return Ok(turn.clone());
                }
                // Untainted while the session is tainted: it ends, and a tainted one follows.
                let _ = turn.complete().await;
            }
        }
        let session_id = state
            .session_id
            .get_or_insert_with(|| format!("mcp_{}", uuid::Uuid::new_v4().simple()))
            .clone();
        let mut spec = SessionSpec::new(&session_id);
        if let Some(locale) = &self.locale {
            spec = spec.locale(&**locale);
        }
        if let Some(principal) = &principal {
            spec = spec.initiator(principal.clone());
        }
        let session = self.runtime.open_session(spec).await.map_err(internal)?;
        let turn = match binding.taint() {
            Some(source) => {
                session
                    .begin_tainted_turn(principal, Caller::Model, source)
                    .await
            }
            None => session.begin_turn(principal, Caller::Model).await,
        }
        .map_err(internal)?;
        let watches = self.conditional && !binding.stateless;
        if state.turn.is_none() && watches && state.watching.is_none() {
            state.watching = Some(self.watch_session(binding, &session_id, peer));
        }
        state.turn = Some(turn.clone());
        Ok(turn)
    }

    /// Tells the client to list again whenever the host changes the session's state in a way
    /// that makes conditional tools come or go, whenever the tools of the runtime's remote
    /// connections change, and whenever the host registers or unregisters a tool defined at
    /// run time.
    fn watch_session(
        &self,
        binding: &Arc<Binding>,
        session_id: &str,
        peer: rmcp::Peer<RoleServer>,
    ) -> tokio::task::JoinHandle<()> {
        let mut changes = self.changes.subscribe(&self.runtime);
        let binding = Arc::downgrade(binding);
        let session_id = session_id.to_owned();
        let (runtime, cache) = (self.runtime.clone(), Arc::clone(&self.listing));
        tokio::spawn(async move {
            loop {
                let (changed, remote) = match changes.recv().await {
                    Ok(Change::Session(s)) => (*s == *session_id, false),
                    Ok(Change::Tools) => (false, true),
                    Ok(Change::Missed) | Err(RecvError::Lagged(_)) => (true, true),
                    Err(RecvError::Closed) => break,
                };
                if !changed && !remote {
                    continue;
                }
                let Some(binding) = binding.upgrade() else {
                    break;
                };
                let mut state = binding.state.lock().await;
                if remote {
                    let names = current_listing(&runtime, &cache).names();
                    if names != state.listed {
                        state.listed = names;
                        if peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                        continue;
                    }
                }
                if !changed {
                    continue;
                }
                let Some(turn) = state.turn.clone() else {
                    continue;
                };
                if let Ok(unavailable) = turn.unavailable_tools().await
                    && unavailable != state.unavailable
                {
                    state.unavailable = unavailable;
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
        let binding = self.binding_of(&cx);
        let mut sampling = self.sampling_call(&cx, &params, principal.as_ref())?;
        if let Some(state) = &params.request_state
            && !sampling.is_retry()
        {
            return self.resume(&params, state, principal, &binding).await;
        }
        let mut state = binding.state.lock().await;
        let turn = self
            .turn(&binding, &mut state, principal.clone(), cx.peer.clone())
            .await?;
        let call_id = format!("mcp-{}", cx.id);
        let arguments = Value::Object(params.arguments.unwrap_or_default()).to_string();
        let call = ToolCall::new(&call_id, params.name.as_ref(), arguments);

        // Partial snapshots become progress notifications when the client asked for them, log
        // lines become log messages once it set a level (older peers: the 2026-07-28 revision
        // has no logging).
        let logs = (!modern(&cx) && binding.logs.is_set()).then(|| Arc::clone(&binding.logs));
        let progress = crate::notify::forward(&self.runtime, &cx, logs, turn.id(), &call_id);

        let options = self.sampling_options(
            &cx,
            &mut sampling,
            turn.session_id(),
            principal.clone(),
            &binding,
        );
        let mut step = Box::pin({
            let turn = turn.clone();
            async move { turn.step_with(vec![call], options).await }
        });
        let stepped = tokio::select! {
            outcome = &mut step => outcome,
            () = cx.ct.cancelled() => {
                // `notifications/cancelled`: the call's token fires with its turn, and the
                // step goes on to close as cancelled (a step of reads runs on this task, so it
                // is handed one of its own rather than dropped with the request).
                // The next call replaces the cancelled turn, keeping its taint.
                let _ = turn.cancel().await;
                tokio::spawn(step);
                if let Some(forwarding) = progress { forwarding.abort(); }
                return Err(cancelled());
            }
        };
        if let Some(asked) = self.sampling_required(&sampling, principal.clone())? {
            // A 2026-07-28 client asks its model first; this attempt's result is dropped.
            if let Some(forwarding) = progress {
                forwarding.abort();
            }
            return Ok(asked);
        }
        let result = match stepped {
            Ok(StepOutcome::Completed { results, .. }) => first(results, &call_id),
            Ok(StepOutcome::Waiting {
                results, requests, ..
            }) => {
                let done = results.into_iter().find(|r| r.call_id == call_id);
                let for_person = requests.iter().any(|r| r.is_pending() && asks_person(r));
                match done {
                    Some(result) => Ok(result),
                    // Parked on a hook or a timer: nobody here can answer, so the call waits
                    // for the delivery (or the timer) to resume it.
                    None if !for_person => {
                        self.await_outside(&cx, &turn, principal, &call_id).await
                    }
                    // Peers on 2026-07-28 get the question back in the result and answer it by
                    // calling again; older peers are asked through elicitation. A peer that
                    // declared no elicitation is told it cannot be asked (in `ask_person`),
                    // rather than sent a question it cannot show.
                    None if modern(&cx) && can_elicit(&cx) => {
                        if let Some(forwarding) = progress {
                            forwarding.abort();
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
        if let Some(forwarding) = progress {
            // Its progress and log lines reach the client before its result.
            forwarding.finish().await;
        }
        binding.touch();
        if cx.ct.is_cancelled() {
            // Cancelled while the user was asked: the request was settled as cancelled.
            return Err(cancelled());
        }
        // A call that changed which conditional tools are available (through the session's
        // state) changes the list: the client is told to list again.
        if self.conditional
            && let Ok(unavailable) = turn.unavailable_tools().await
            && unavailable != state.unavailable
        {
            state.unavailable = unavailable;
            let _ = cx.peer.notify_tool_list_changed().await;
        }
        let result = result?;
        // A `task` tool's receipt becomes an MCP task for clients of the tasks extension.
        if let Some(task) = self.task_receipt(&cx, &result) {
            return Ok(task);
        }
        Ok(self.to_mcp(turn.session_id(), &result).await.into())
    }
}

impl ServerHandler for McpServer {
    #[allow(deprecated)] // logging: deprecated by 2026-07-28, served to older peers
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .enable_logging()
            .build();
        let mut instructions = None;
        if let Some(composed) = &self.composed {
            let theirs = composed.info();
            capabilities.prompts = theirs.capabilities.prompts;
            capabilities.resources = theirs.capabilities.resources;
            capabilities.completions = theirs.capabilities.completions;
            instructions = theirs.instructions;
        }
        let mut config = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ));
        config.instructions = instructions;
        config
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
        let binding = self.binding_of(&cx);
        let unavailable = if self.conditional {
            let principal = self.caller(&cx);
            let mut state = binding.state.lock().await;
            let turn = self
                .turn(&binding, &mut state, principal, cx.peer.clone())
                .await?;
            let unavailable = turn.unavailable_tools().await.map_err(internal)?;
            state.unavailable.clone_from(&unavailable);
            unavailable
        } else {
            Vec::new()
        };
        let listing = self.listing();
        // Without waiting for a call of this session to finish: at worst the client is told
        // once more than needed that the list changed.
        if let Ok(mut state) = binding.state.try_lock() {
            state.listed = listing.names();
            // A client that only lists still hears when remote tools change (a session with
            // conditional tools got its watcher with its turn, above). A stateless request's
            // peer ends with the request: nothing to tell later.
            if state.watching.is_none() && !binding.stateless {
                state.watching = Some(self.watch_session(&binding, "", cx.peer.clone()));
            }
        }
        listing.page(&unavailable, request.and_then(|r| r.cursor), self.page_size)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listing().tool(name).cloned()
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

    /// `logging/setLevel`: the lowest level of the tools' log lines this MCP session is sent.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.binding_of(&cx).logs.set(request.level);
        Ok(())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        match &self.composed {
            Some(composed) => composed.complete(request, cx).await,
            None => Err(not_served::<rmcp::model::CompleteRequestMethod>()),
        }
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        match &self.composed {
            Some(composed) => composed.get_prompt(request, cx).await,
            None => Err(not_served::<rmcp::model::GetPromptRequestMethod>()),
        }
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        match &self.composed {
            Some(composed) => composed.list_prompts(request, cx).await,
            None => Err(not_served::<rmcp::model::ListPromptsRequestMethod>()),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        match &self.composed {
            Some(composed) => composed.list_resources(request, cx).await,
            None => Err(not_served::<rmcp::model::ListResourcesRequestMethod>()),
        }
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        match &self.composed {
            Some(composed) => composed.list_resource_templates(request, cx).await,
            None => Err(not_served::<rmcp::model::ListResourceTemplatesRequestMethod>()),
        }
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        match &self.composed {
            Some(composed) => composed.read_resource(request, cx).await,
            None => Err(not_served::<rmcp::model::ReadResourceRequestMethod>()),
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match &self.composed {
            Some(composed) => composed.subscribe(request, cx).await,
            None => Err(not_served::<rmcp::model::SubscribeRequestMethod>()),
        }
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match &self.composed {
            Some(composed) => composed.unsubscribe(request, cx).await,
            None => Err(not_served::<rmcp::model::UnsubscribeRequestMethod>()),
        }
    }

    /// rmcp parses a request whose params do not fit its method as a custom request: for the
    /// methods served here that is `-32602` (invalid params) saying what is wrong, not
    /// `-32601` (method not found).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(crate::convert::unknown_or_malformed(request))
    }
}

/// Serves `server` over stdin/stdout until the client disconnects, reading each line before
/// rmcp does (see [`serve_io`](crate::serve_io)).
pub async fn serve_stdio(server: McpServer) -> Result<(), McpError> {
    crate::serve_io(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// The error of a call the client cancelled (`notifications/cancelled`).
fn cancelled() -> ErrorData {
    ErrorData::internal_error("the call was cancelled by the client", None)
}

/// Whether two principals are the same principal (their identity; attributes may differ from
/// one token to the next).
fn same_principal(a: Option<&Principal>, b: Option<&Principal>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => identity(a) == identity(b),
        (None, None) => true,
        _ => false,
    }
}
