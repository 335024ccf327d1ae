//! The streamable HTTP transport: `rmcp`'s service behind the guard (`Host`, bearer token, raw
//! JSON checks, session caps), bound to loopback unless told otherwise.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::binding::Bindings;
use crate::guard::{self, Guard};
use crate::limits::{
    BoundedSessions, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, Limits,
};
use crate::oauth::{Bearer, Resource};
use crate::{McpError, McpServer, ProtectedResource, TokenVerifier};

/// The listening socket's backlog by default.
const DEFAULT_BACKLOG: u32 = 1_024;

/// Serving `McpServer` over streamable HTTP.
///
/// The server bounds what clients can make it hold: at most [`McpHttp::max_sessions`] MCP
/// sessions open at once (default 1,000; a request that would open one more gets
/// `503 Service Unavailable` with `Retry-After: 5`), at most
/// [`McpHttp::max_sessions_per_principal`] of them per principal (default 100;
/// `429 Too Many Requests` with `Retry-After: 5`), each closed after [`McpHttp::idle_timeout`]
/// without a request (default 5 minutes). Both kinds of session count: a 2025-11-25 client's
/// (`Mcp-Session-Id`) and the binding the requests of a 2026-07-28 client share (see
/// [`SESSION_HEADER`](crate::SESSION_HEADER)). The listening socket's backlog
/// ([`McpHttp::backlog`], default 1,024) absorbs bursts of connections.
///
/// Other refusals: `403` for a `Host` that is not allowed (or whose port is not a number),
/// `401` without a valid bearer token when there is a verifier (see [`ProtectedResource`] for what
/// an OAuth protected resource adds), `413` for a body over 4 MiB,
/// `400` for a malformed `Toolwright-Session` header, and an `isError` result (as in process)
/// for a `tools/call` whose raw `arguments` the strict parser refuses (duplicate keys, numbers
/// that would change).
///
/// ```no_run
/// # async fn demo(server: toolwright_mcp::McpServer, verifier: impl toolwright_mcp::TokenVerifier) -> Result<(), toolwright_mcp::McpError> {
/// let handle = toolwright_mcp::McpHttp::new(server)
///     .verifier(verifier)
///     .max_sessions(500)
///     .max_sessions_per_principal(20)
///     .idle_timeout(std::time::Duration::from_secs(600))
///     .start()
///     .await?;
/// println!("MCP at http://{}/mcp", handle.addr());
/// # Ok(())
/// # }
/// ```
pub struct McpHttp {
    server: McpServer,
    addr: SocketAddr,
    verifier: Option<Arc<dyn TokenVerifier>>,
    protected_resource: Option<ProtectedResource>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    max_sessions: usize,
    max_sessions_per_principal: usize,
    idle_timeout: Duration,
    backlog: u32,
    webhooks: Option<String>,
}

impl std::fmt::Debug for McpHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttp")
            .field("addr", &self.addr)
            .field("verifier", &self.verifier.is_some())
            .field("protected_resource", &self.protected_resource)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_sessions", &self.max_sessions)
            .field(
                "max_sessions_per_principal",
                &self.max_sessions_per_principal,
            )
            .field("idle_timeout", &self.idle_timeout)
            .field("backlog", &self.backlog)
            .finish_non_exhaustive()
    }
}

impl McpHttp {
    /// Serves `server` at `127.0.0.1` on a port the system picks, path `/mcp`.
    pub fn new(server: McpServer) -> Self {
        McpHttp {
            server,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            verifier: None,
            protected_resource: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_principal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            backlog: DEFAULT_BACKLOG,
            webhooks: None,
        }
    }

    /// Binds `addr` instead. An address that is not loopback exposes the tools to the network:
    /// the server logs a warning, and without a [`McpHttp::verifier`] anyone who reaches it acts
    /// as the server's own principal.
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Checks every request's `Authorization: Bearer` token (through
    /// [`TokenVerifier::verify_token`]); the principal it returns is the caller of the request's
    /// calls.
    #[must_use]
    pub fn verifier(mut self, verifier: impl TokenVerifier) -> Self {
        self.verifier = Some(Arc::new(verifier));
        self
    }

    /// Declares the server an OAuth 2.1 protected resource (the MCP authorization spec): it
    /// publishes its RFC 9728 metadata at `/.well-known/oauth-protected-resource` (and the
    /// path-suffixed form), every `401` names that document in `WWW-Authenticate`, and only
    /// tokens issued for this resource with the required scopes pass (see
    /// [`ProtectedResource`]). Needs a [`McpHttp::verifier`] that reports tokens' audiences, such
    /// as [`IntrospectionVerifier`](crate::IntrospectionVerifier).
    #[must_use]
    pub fn protected_resource(mut self, resource: ProtectedResource) -> Self {
        self.protected_resource = Some(resource);
        self
    }

    /// Also accepts requests whose `Host` is `host` (with any port), or exactly `host:port`
    /// when given so. Loopback names are always accepted; other hosts, and ports that are not
    /// numbers, are refused with `403` (against DNS rebinding).
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Also accepts browser requests from `origin` (`scheme://host[:port]`, e.g.
    /// `https://app.example`), as a web app that calls the tools would send in `Origin`.
    /// Requests without `Origin` (clients that are not browsers) always pass, and so do those
    /// from the server's own origin (`http` or `https` with the request's `Host`); any other
    /// `Origin` is refused with `403`, so that a web page elsewhere cannot reach the tools.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// How many MCP sessions may be open at once (default 1,000; at least 1). A request that
    /// would open one more gets `503 Service Unavailable` with `Retry-After: 5`.
    #[must_use]
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// How many MCP sessions one principal may have open at once (default 100; at least 1). A
    /// request that would open one more gets `429 Too Many Requests` with `Retry-After: 5`.
    /// Without a verifier every client is the server's own principal, so this caps them all
    /// together.
    #[must_use]
    pub fn max_sessions_per_principal(mut self, max: usize) -> Self {
        self.max_sessions_per_principal = max.max(1);
        self
    }

    /// How long an MCP session may go without a request before the server closes it (default
    /// 5 minutes; at least 1 s). A 2025-11-25 client then gets `404` for its session and opens
    /// another; the requests of a 2026-07-28 client start a new binding, without the old one's
    /// taint.
    #[must_use]
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle.max(Duration::from_secs(1));
        self
    }

    /// The listening socket's backlog: connections the system queues before the server accepts
    /// them (default 1,024; the system may cap it, on Linux at `net.core.somaxconn`).
    #[must_use]
    pub fn backlog(mut self, backlog: u32) -> Self {
        self.backlog = backlog.max(1);
        self
    }

    /// Also serves the runtime's webhook route ([`webhook_router`](crate::webhook_router)) at
    /// `path` (e.g. `/hooks`), beside `/mcp` and outside its guard: a webhook's sender has no
    /// bearer token, and the hook's token in the URL is the only secret. Point
    /// `RuntimeBuilder::webhook_url` at the public URL of `path`.
    #[must_use]
    pub fn webhooks(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        self.webhooks = Some(format!("/{}", path.trim_matches('/')));
        self
    }

    /// Binds and serves on a task of its own until the handle is shut down. Fails with
    /// [`McpError::Config`] when the [`ProtectedResource`] is not valid or has no verifier.
    pub async fn start(self) -> Result<HttpHandle, McpError> {
        let listener = listen(self.addr, self.backlog)?;
        let addr = listener
            .local_addr()
            .map_err(|e| McpError::Transport(e.to_string()))?;
        let resource = match self.protected_resource {
            Some(_) if self.verifier.is_none() => {
                return Err(McpError::Config(
                    "a protected resource checks tokens: give `McpHttp::verifier` a token \
                     verifier (e.g. `IntrospectionVerifier`)"
                        .into(),
                ));
            }
            Some(declared) => Some(Arc::new(Resource::resolve(declared, addr)?)),
            None => None,
        };
        if !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                authenticated = self.verifier.is_some(),
                "the MCP server listens beyond loopback: anyone who reaches {addr} can call its tools{}",
                if self.verifier.is_some() { " with a valid token" } else { " as the server's own principal; add a token verifier" }
            );
        }
        let shutdown = CancellationToken::new();
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        hosts.extend(self.allowed_hosts);
        // The protected resource's own name is the server's: clients send it in `Host`.
        hosts.extend(resource.as_ref().map(|resource| resource.host.clone()));
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(shutdown.child_token())
            .with_allowed_hosts(hosts.clone());
        let limits = Limits::new(self.max_sessions, self.max_sessions_per_principal);
        let bindings = Arc::new(Bindings::new(Arc::clone(&limits), self.idle_timeout));
        let server = self.server;
        let webhooks = self
            .webhooks
            .map(|path| (path, crate::webhook_router(server.runtime().clone())));
        // Each MCP session gets its own binding (toolwright session, turn, principal); rmcp
        // generates the session ids (random UUIDs) and refuses unknown ones. Stateless requests
        // get theirs from the guard.
        let sessions = BoundedSessions::new(Arc::clone(&limits), self.idle_timeout);
        let owners = sessions.owners();
        let service = StreamableHttpService::new(
            move || Ok(server.for_new_session()),
            Arc::new(sessions),
            config,
        );
        let guard = Arc::new(Guard {
            bearer: self.verifier.map(|verifier| Bearer {
                verifier,
                resource: resource.clone(),
            }),
            hosts,
            origins: self.allowed_origins,
            limits: Arc::clone(&limits),
            bindings: Arc::clone(&bindings),
            owners,
        });
        let mut router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(move |request, next| {
                    guard::guard(Arc::clone(&guard), request, next)
                }));
        if let Some(resource) = &resource {
            router = router.merge(resource.routes());
        }
        if let Some((path, webhooks)) = webhooks {
            router = router.nest(&path, webhooks);
        }
        let sweeper = tokio::spawn(sweep(bindings, self.idle_timeout, shutdown.clone()));
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!("the MCP HTTP server stopped: {error}");
            }
            sweeper.abort();
        });
        Ok(HttpHandle {
            addr,
            shutdown,
            task,
            limits,
        })
    }
}

/// A listening socket on `addr` with `backlog`.
fn listen(addr: SocketAddr, backlog: u32) -> Result<tokio::net::TcpListener, McpError> {
    let cannot = |e: std::io::Error| McpError::Transport(format!("cannot bind {addr}: {e}"));
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(cannot)?;
    socket.set_reuseaddr(true).map_err(cannot)?;
    socket.bind(addr).map_err(cannot)?;
    socket.listen(backlog).map_err(cannot)
}

/// Ends idle stateless bindings now and then, until shutdown.
async fn sweep(bindings: Arc<Bindings>, idle: Duration, shutdown: CancellationToken) {
    let period = (idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut ticks = tokio::time::interval(period);
    loop {
        tokio::select! {
            _ = ticks.tick() => { bindings.sweep(std::time::Instant::now()); }
            () = shutdown.cancelled() => return,
        }
    }
}

/// A running HTTP server.
#[derive(Debug)]
pub struct HttpHandle {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    limits: Arc<Limits>,
}

impl HttpHandle {
    /// Where it listens (the MCP endpoint is `http://{addr}/mcp`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many MCP sessions are open now, of both kinds (see [`McpHttp`]).
    pub fn open_sessions(&self) -> usize {
        self.limits.open_sessions()
    }

    /// Stops accepting, closes the sessions, and waits for the server to stop.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.task.await;
    }

    /// Waits until the server stops (it runs until shut down).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}
