//! Tools of remote MCP servers: the connector a runtime connection uses, over rmcp's client.
//!
//! [`McpConnector::stdio`] starts the server as a child process (a new one for each connection
//! attempt, killed when the session ends); [`McpConnector::http`] speaks streamable HTTP to a
//! URL, with an auth resolver called for every HTTP request, so tokens live in the closure and
//! can rotate. The client speaks MCP 2025-11-25 through the `initialize` handshake, the revision
//! every reference server implements, and declares no capabilities (a client that declares
//! `roots` lets a filesystem server replace its allowed directories with the client's).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientConfig, ClientRequest, Implementation, PaginatedRequestParams, PingRequest,
    ProgressNotificationParam, ProtocolVersion, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    Annotations, CallContext, CallOutput, ContentPart, ErrorCode, ModelOutput, RemoteDefinition,
    ToolError,
};
use toolwright_runtime::remote::{Connector, ListChanged, RemoteSession};

use crate::progress::Progress;

/// Environment variables a stdio server inherits from the runtime's process, as the official
/// MCP SDKs do: enough to find programs and a home, not the runtime's secrets.
const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR",
];

/// The most pages one listing of a server's tools follows, and the most tools it takes: a
/// server whose cursor never ends, or that lists more tools than a model can be shown, fails
/// the listing instead of being followed until the connect timeout (each page may be 16 MiB).
const MAX_LIST_PAGES: usize = 100;
/// See [`MAX_LIST_PAGES`].
const MAX_LISTED_TOOLS: usize = 10_000;

/// What a failed auth resolver's errors say, so that a call can tell nothing was sent.
const NO_TOKEN: &str = "the auth resolver gave no token";

/// Resolves the bearer token of each HTTP request (`None`: send none). Called for every request,
/// so a token can be refreshed without reconnecting; it never enters stored state.
pub trait AuthResolver: Send + Sync + 'static {
    /// The token for the next request, or why there is none.
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, String>>;
}

impl<F, Fut> AuthResolver for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Option<String>, String>> + Send + 'static,
{
    fn token(&self) -> BoxFuture<'_, Result<Option<String>, String>> {
        Box::pin(self())
    }
}

#[derive(Clone)]
enum Transport {
    Stdio {
        program: OsString,
        args: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        dir: Option<PathBuf>,
        stderr: bool,
    },
    Http {
        url: String,
        auth: Option<Arc<dyn AuthResolver>>,
    },
}

/// How a connection reaches its MCP server: a child process over stdio, or streamable HTTP.
///
/// ```no_run
/// use toolwright_mcp::McpConnector;
/// use toolwright_runtime::remote::Connection;
///
/// let files = Connection::new(
///     "files",
///     McpConnector::stdio("npx").args(["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]),
/// )
/// .allow(["read_text_file", "list_directory"]);
///
/// let tickets = Connection::new(
///     "tickets",
///     McpConnector::http("https://tickets.example.com/mcp")
///         .auth(|| async { Ok(Some(std::env::var("TICKETS_TOKEN").map_err(|e| e.to_string())?)) }),
/// )
/// .allow(["search", "create_ticket"]);
/// # let _ = (files, tickets);
/// ```
#[derive(Clone)]
pub struct McpConnector {
    transport: Transport,
}

impl std::fmt::Debug for McpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.transport {
            Transport::Stdio { program, args, .. } => f
                .debug_struct("McpConnector")
                .field("program", program)
                .field("args", args)
                .finish_non_exhaustive(),
            Transport::Http { url, auth } => f
                .debug_struct("McpConnector")
                .field("url", url)
                .field("auth", &auth.is_some())
                .finish(),
        }
    }
}

impl McpConnector {
    /// A server started as `program` (found on `PATH`) speaking MCP on its stdin and stdout. It
    /// inherits only `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`, `LANG` and `TMPDIR`
    /// from this process; give it more with [`McpConnector::env`]. Its stderr is discarded
    /// unless [`McpConnector::inherit_stderr`].
    pub fn stdio(program: impl Into<OsString>) -> Self {
        McpConnector {
            transport: Transport::Stdio {
                program: program.into(),
                args: Vec::new(),
                env: Vec::new(),
                dir: None,
                stderr: false,
            },
        }
    }

    /// A server at `url` speaking streamable HTTP.
    pub fn http(url: impl Into<String>) -> Self {
        McpConnector {
            transport: Transport::Http {
                url: url.into(),
                auth: None,
            },
        }
    }

    /// Arguments of a stdio server's program.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        if let Transport::Stdio { args: list, .. } = &mut self.transport {
            list.extend(args.into_iter().map(Into::into));
        }
        self
    }

    /// An environment variable of a stdio server.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        if let Transport::Stdio { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio server.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Transport::Stdio { dir: slot, .. } = &mut self.transport {
            *slot = Some(dir.into());
        }
        self
    }

    /// Let a stdio server write to this process's stderr (for debugging a server).
    pub fn inherit_stderr(mut self) -> Self {
        if let Transport::Stdio { stderr, .. } = &mut self.transport {
            *stderr = true;
        }
        self
    }

    /// The bearer token of each HTTP request, resolved when the request is sent.
    pub fn auth(mut self, resolver: impl AuthResolver) -> Self {
        if let Transport::Http { auth, .. } = &mut self.transport {
            *auth = Some(Arc::new(resolver));
        }
        self
    }

    async fn open(&self, changed: ListChanged) -> Result<Arc<dyn RemoteSession>, String> {
        let progress = Progress::default();
        let handler = Handler {
            changed,
            progress: progress.clone(),
        };
        let service = match &self.transport {
            Transport::Stdio {
                program,
                args,
                env,
                dir,
                stderr,
            } => {
                let mut command = tokio::process::Command::new(program);
                command.args(args).env_clear();
                for key in INHERITED_ENV {
                    if let Some(value) = std::env::var_os(key) {
                        command.env(key, value);
                    }
                }
                command.envs(env.iter().map(|(k, v)| (k, v)));
                if let Some(dir) = dir {
                    command.current_dir(dir);
                }
                let stderr = if *stderr {
                    std::process::Stdio::inherit()
                } else {
                    std::process::Stdio::null()
                };
                // Its own process group, killed whole: a server started through a wrapper
                // (`npx`, `uvx`, a shell) leaves no grandchildren behind; and killed when dropped,
                // even if the runtime is shutting down.
                let mut command = process_wrap::tokio::CommandWrap::from(command);
                command
                    .wrap(process_wrap::tokio::ProcessGroup::leader())
                    .wrap(process_wrap::tokio::KillOnDrop);
                let (child, _) = TokioChildProcess::builder(command)
                    .stderr(stderr)
                    .spawn()
                    .map_err(|error| {
                        format!("cannot start `{}`: {error}", program.to_string_lossy())
                    })?;
                handler
                    .serve(child)
                    .await
                    .map_err(|error| format!("the MCP handshake failed: {}", chain(&error)))?
            }
            Transport::Http { url, auth } => {
                let last_error = Arc::new(std::sync::Mutex::new(None));
                let client = AuthClient {
                    inner: http_client()?,
                    auth: auth.clone(),
                    last_error: Arc::clone(&last_error),
                };
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                );
                handler.serve(transport).await.map_err(|error| {
                    let cause = last_error
                        .lock()
                        .ok()
                        .and_then(|mut last| last.take())
                        .map(|cause| format!(" ({cause})"))
                        .unwrap_or_default();
                    format!(
                        "the MCP handshake with {url} failed: {}{cause}",
                        chain(&error)
                    )
                })?
            }
        };
        Ok(Session::start(service, progress))
    }
}

impl Connector for McpConnector {
    fn connect(
        &self,
        changed: ListChanged,
    ) -> BoxFuture<'_, Result<Arc<dyn RemoteSession>, String>> {
        Box::pin(self.open(changed))
    }
}

/// The client side of a session: forwards the server's list changes to the supervisor and its
/// progress notifications to the calls' partial results.
struct Handler {
    changed: ListChanged,
    progress: Progress,
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.progress.report(params);
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.changed.notify();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        // 2025-11-25 through `initialize`: what the reference servers speak, with list-change
        // notifications on the session itself (2026-07-28 needs a `subscriptions/listen`).
        ClientConfig::new(
            Default::default(),
            Implementation::new("toolwright", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// One running MCP client session.
struct Session {
    peer: Peer<RoleClient>,
    progress: Progress,
    /// Fires when the service loop ended (the server went away).
    closed: CancellationToken,
    /// Ends the service loop (and a stdio server) when the session is dropped.
    stop: CancellationToken,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Session {
    fn start(
        service: RunningService<RoleClient, Handler>,
        progress: Progress,
    ) -> Arc<dyn RemoteSession> {
        let peer = service.peer().clone();
        let closed = CancellationToken::new();
        let stop = CancellationToken::new();
        let (watch_closed, watch_stop) = (closed.clone(), stop.clone());
        tokio::spawn(async move {
            let mut service = service;
            tokio::select! {
                () = watch_stop.cancelled() => {
                    let _ = service.close().await;
                }
                _ = wait(&mut service) => {}
            }
            watch_closed.cancel();
        });
        Arc::new(Session {
            peer,
            progress,
            closed,
            stop,
        })
    }
}

/// Every page of the server's tools, following its cursors up to [`MAX_LIST_PAGES`] pages and
/// [`MAX_LISTED_TOOLS`] tools; a cursor the server gave before ends the listing as a failure
/// (following it would list the same pages again, forever).
async fn list_all_tools(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursors = std::collections::HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|error| chain(&error))?;
        tools.extend(page.tools);
        if tools.len() > MAX_LISTED_TOOLS {
            return Err(format!(
                "the server listed more than {MAX_LISTED_TOOLS} tools; toolwright takes at most \
                 that many from one server: split them across servers, or have it list fewer"
            ));
        }
        let Some(next) = page.next_cursor else {
            return Ok(tools);
        };
        if !cursors.insert(next.clone()) {
            return Err(format!(
                "the server's tool list never ends: it gave the cursor `{}` a second time; \
                 the server's pagination is broken",
                toolwright_core::error::quoted_prefix(&next)
            ));
        }
        cursor = Some(next);
    }
    Err(format!(
        "the server's tool list did not end within {MAX_LIST_PAGES} pages; toolwright reads \
         at most that many: have the server list its tools in fewer, larger pages"
    ))
}

/// Completes when the service loop ends on its own (polling its state: `waiting` would consume
/// the service, which `close` needs).
async fn wait(service: &mut RunningService<RoleClient, Handler>) {
    while !service.is_closed() && !service.peer().is_transport_closed() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

impl RemoteSession for Session {
    fn list_tools(&self) -> BoxFuture<'_, Result<Vec<RemoteDefinition>, String>> {
        Box::pin(async move {
            let tools = list_all_tools(&self.peer).await?;
            tools.iter().map(definition).collect()
        })
    }

    fn call_tool(
        self: Arc<Self>,
        tool: String,
        input: Value,
        cx: CallContext,
    ) -> BoxFuture<'static, Result<CallOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match input {
                Value::Object(map) => map,
                Value::Null => Map::new(),
                other => {
                    return Err(ToolError::with_code(
                        ErrorCode::InvalidInput,
                        format!("the input of `{tool}` must be an object, not {other}"),
                    ));
                }
            };
            let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let unreachable = |error: &dyn std::error::Error| {
                let cause = chain(error);
                // The resolver runs before anything is sent: the server cannot have acted.
                let unknown = if cause.contains(NO_TOKEN) {
                    "nothing was sent"
                } else {
                    "whether it acted is unknown"
                };
                ToolError::with_code(
                    ErrorCode::Unavailable,
                    format!(
                        "calling `{}` on its server failed: {cause}; {unknown}",
                        cx.tool_name()
                    ),
                )
            };
            let handle = self
                .peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await
                .map_err(|error| unreachable(&error))?;
            let id = handle.id.clone();
            // The server's progress notifications (under the token rmcp gave the request) become
            // the call's partial results.
            let _watch = self.progress.watch(handle.progress_token.clone(), &cx);
            // However the call stops waiting (its token fired, or the runtime dropped it on a
            // timeout or a cancelled turn), the server is told, so it stops working on it.
            let mut abandon = Abandon {
                peer: self.peer.clone(),
                id: Some(id),
            };
            let result = tokio::select! {
                result = handle.await_response() => {
                    abandon.id = None;
                    result
                }
                () = cx.host().cancelled() => {
                    return Err(ToolError::with_code(ErrorCode::Cancelled, format!("`{}` was cancelled", cx.tool_name())));
                }
                                () = self.closed.cancelled() => {
                    abandon.id = None;
                    return Err(ToolError::with_code(
                        ErrorCode::Unavailable,
                        format!("the server of `{}` went away during the call; whether it acted is unknown. The runtime reconnects in the background", cx.tool_name()),
                    ));
                }
            };
            let result = match result {
                Ok(ServerResult::CallToolResult(result)) => Ok(result),
                Ok(other) => Err(ToolError::with_code(
                    ErrorCode::InvalidOutput,
                    format!(
                        "the server answered `{}` with something other than a tool result: {}",
                        cx.tool_name(),
                        serde_json::to_string(&other).unwrap_or_default()
                    ),
                )),
                Err(error) => Err(unreachable(&error)),
            };
            output(cx.tool_name(), result?)
        })
    }

    fn closed(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.closed.cancelled())
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let ping = ClientRequest::PingRequest(PingRequest {
                method: Default::default(),
                extensions: Default::default(),
            });
            match self.peer.send_request(ping).await {
                // Any answer, an error included, says the server is there.
                Ok(_) | Err(rmcp::service::ServiceError::McpError(_)) => Ok(()),
                Err(error) => Err(chain(&error)),
            }
        })
    }
}

/// Sends `notifications/cancelled` for a request nobody waits for any more.
struct Abandon {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = Some("the call was cancelled".to_owned());
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(Some(id), reason))
                    .await;
            });
        }
    }
}

/// An error with its causes (rmcp's transport errors wrap the one that says what happened, e.g.
/// a refused connection or a failed TLS handshake).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The definition a server listed, in the registry's terms.
fn definition(tool: &rmcp::model::Tool) -> Result<RemoteDefinition, String> {
    let annotations = tool.annotations.as_ref().map(|a| Annotations {
        read_only: a.read_only_hint,
        destructive: a.destructive_hint,
        idempotent: a.idempotent_hint,
        open_world: a.open_world_hint,
    });
    Ok(RemoteDefinition {
        name: tool.name.to_string(),
        title: tool
            .title
            .clone()
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone())),
        description: tool.description.as_ref().map(|d| d.to_string()),
        input_schema: Value::Object((*tool.input_schema).clone()),
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object((**schema).clone())),
        annotations,
    })
}

/// A server's result as the runtime's: `structuredContent` is the output (checked against the
/// tool's `outputSchema` by the registry), the content blocks are what the model sees; an
/// `isError` result is an error carrying the server's text.
fn output(tool: &str, result: CallToolResult) -> Result<CallOutput, ToolError> {
    let parts: Vec<ContentPart> = result
        .content
        .iter()
        .filter_map(|block| serde_json::to_value(block).ok())
        .map(|block| content_part(&block))
        .collect();
    if result.is_error == Some(true) {
        let text: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let message = if text.is_empty() {
            format!("`{tool}` failed on its server without saying why")
        } else {
            text.join("\n")
        };
        return Err(ToolError::with_code(ErrorCode::ToolFailed, message));
    }
    let model = match parts.as_slice() {
        [ContentPart::Text { text }] => ModelOutput::Text(text.clone()),
        _ if parts.is_empty() => match &result.structured_content {
            Some(value) => ModelOutput::Json(value.clone()),
            None => ModelOutput::Text(String::new()),
        },
        _ => ModelOutput::Content(parts.clone()),
    };
    let value = match result.structured_content {
        Some(value) => value,
        None => serde_json::json!({ "content": result.content }),
    };
    Ok(CallOutput {
        value,
        ends_turn: false,
        model: Some(model),
        complete_label: None,
    })
}

/// One MCP content block as a part the model sees: text as text, images and audio as files,
/// embedded resources as resources, anything else (resource links) as its JSON.
fn content_part(block: &Value) -> ContentPart {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    match field("type") {
        Some("text") => ContentPart::text(field("text").unwrap_or_default()),
        Some("image" | "audio") => ContentPart::file(
            field("data").unwrap_or_default(),
            field("mimeType").unwrap_or("application/octet-stream"),
        ),
        Some("resource") => match block.get("resource") {
            Some(resource) => {
                let field = |name: &str| resource.get(name).and_then(Value::as_str);
                ContentPart::Resource {
                    uri: field("uri").unwrap_or_default().to_owned(),
                    media_type: field("mimeType").map(str::to_owned),
                    text: field("text").map(str::to_owned),
                    data: field("blob").map(str::to_owned),
                }
            }
            None => ContentPart::text(block.to_string()),
        },
        _ => ContentPart::text(block.to_string()),
    }
}

/// rmcp's reqwest client with the bearer token resolved for every request.
#[derive(Clone)]
struct AuthClient {
    inner: reqwest::Client,
    auth: Option<Arc<dyn AuthResolver>>,
    /// The causes of the last failed request (rmcp's error keeps only the outer message, e.g.
    /// "error sending request", not "connection refused" or the TLS failure).
    last_error: Arc<std::sync::Mutex<Option<String>>>,
}

impl AuthClient {
    fn note<T>(
        &self,
        result: Result<T, StreamableHttpError<reqwest::Error>>,
    ) -> Result<T, StreamableHttpError<reqwest::Error>> {
        if let Err(StreamableHttpError::Client(error)) = &result
            && let Ok(mut last) = self.last_error.lock()
        {
            *last = Some(chain(error));
        }
        result
    }

    async fn token(
        &self,
        fallback: Option<String>,
    ) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        match &self.auth {
            None => Ok(fallback),
            Some(resolver) => resolver.token().await.map_err(|error| {
                StreamableHttpError::UnexpectedServerResponse(format!("{NO_TOKEN}: {error}").into())
            }),
        }
    }
}

type Headers = HashMap<http::HeaderName, http::HeaderValue>;

impl StreamableHttpClient for AuthClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let token = self.token(auth_header).await?;
        let result = self
            .inner
            .post_message(uri, message, session_id, token, custom_headers)
            .await;
        self.note(result)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: rmcp::transport::streamable_http_client::StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let token = self.token(auth_header).await?;
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                token,
                custom_headers,
                limits,
            )
            .await;
        self.note(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let token = self.token(auth_header).await?;
        self.inner
            .delete_session(uri, session_id, token, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        let token = self.token(auth_header).await?;
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, token, custom_headers)
            .await;
        self.note(result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<
        futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        let token = self.token(auth_header).await?;
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                token,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note(result)
    }
}

/// The HTTP client of a remote connection. With `tls`, reqwest is built without a crypto
/// provider of its own (its default would build aws-lc-sys): ring is installed as the process's
/// default unless the application installed one first.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    #[cfg(feature = "tls")]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .build()
        .map_err(|error| format!("cannot build the HTTP client: {error}"))
}
