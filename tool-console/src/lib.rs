//! The operator console of toolwright: what a runtime keeps durable, in a browser.
//!
//! Parked turns, pending approvals and questions, workflow tasks, the journals of durable and
//! workflow calls, remote connections with their pinned definitions, and the tool catalog, as
//! server-rendered HTML on axum (no script, no build step), with the actions an operator
//! takes on them:
//!
//! - approve or deny a call with a note that reaches the model, and answer a question, as the
//!   signed-in principal, through [`Runtime::respond`]: its response policies apply exactly
//!   (the first answer wins; a principal the policy excludes is refused);
//! - cancel a task (its body gets its cleanup window) or a turn;
//! - approve the definition a remote server now lists for a withheld tool.
//!
//! Who sees what: a request's input (its sensitive values redacted) is shown to the principals
//! [`Runtime::may_respond`] allows to answer it; the others see its tool, its status and who
//! asked. Every listing is a page of the store's paginated listings.
//!
//! Safe by default: people sign in with a bearer token that the host's [`TokenVerifier`]
//! checks (the same verifier the MCP server uses), traded for an `HttpOnly`, `SameSite=Strict`
//! session cookie; every form carries the session's CSRF token, and a request whose `Origin`
//! is another site is refused. Scripts may instead send `Authorization: Bearer <token>` on
//! each request, and ask for JSON with `Accept: application/json`. [`Console::serve`] warns
//! when it binds anything but a loopback address.
//!
//! ```no_run
//! # async fn run(runtime: toolwright_runtime::Runtime, verifier: impl toolwright_mcp::TokenVerifier) {
//! use toolwright_console::Console;
//!
//! // Mounted under /console in a host's own router:
//! let app = axum::Router::new()
//!     .route("/health", axum::routing::get(|| async { "ok" }))
//!     .merge(Console::new(runtime, verifier).at("/console").router());
//! # let _ = app;
//! # }
//! ```
//!
//! [`views`] and [`actions`] give a command-line tool the same data and actions without HTTP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use toolwright_mcp::TokenVerifier;
use toolwright_runtime::Runtime;

pub mod actions;
mod auth;
mod events;
mod pages;
mod routes;
pub mod views;

pub use events::RecentEvent;

/// The console of one runtime: build it, then mount its [`router`](Console::router) in a host
/// or [`serve`](Console::serve) it on an address of its own.
pub struct Console {
    runtime: Runtime,
    verifier: Arc<dyn TokenVerifier>,
    admission: auth::Admission,
    base: String,
    secure_cookies: bool,
    session_ttl: Duration,
    page_size: usize,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("base", &self.base)
            .field("secure_cookies", &self.secure_cookies)
            .field("session_ttl", &self.session_ttl)
            .field("page_size", &self.page_size)
            .field("audiences", &self.admission.audiences)
            .field("required_scopes", &self.admission.scopes)
            .finish_non_exhaustive()
    }
}

/// What the console's handlers share.
pub(crate) struct Shared {
    pub(crate) runtime: Runtime,
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) admission: auth::Admission,
    pub(crate) sessions: auth::Sessions,
    pub(crate) recent: Arc<events::Recent>,
    pub(crate) base: String,
    pub(crate) secure_cookies: bool,
    pub(crate) page_size: usize,
}

impl Shared {
    /// `path` (starting with `/`) under the console's mount point.
    pub(crate) fn link(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Console {
    /// A console of `runtime` whose users sign in with tokens `verifier` checks.
    pub fn new(runtime: Runtime, verifier: impl TokenVerifier) -> Console {
        Console {
            runtime,
            verifier: Arc::new(verifier),
            admission: auth::Admission::default(),
            base: String::new(),
            secure_cookies: false,
            session_ttl: Duration::from_secs(8 * 3600),
            page_size: 50,
        }
    }

    /// Serves the console under `path` (`"/console"`): every route and link starts with it,
    /// so a host mounts [`router`](Console::router) with `merge`. Default: the root. A
    /// trailing `/` is dropped; a path not starting with `/` gets one.
    pub fn at(mut self, path: &str) -> Console {
        let trimmed = path.trim_end_matches('/');
        self.base = if trimmed.is_empty() || trimmed.starts_with('/') {
            trimmed.to_owned()
        } else {
            format!("/{trimmed}")
        };
        self
    }

    /// Marks the session cookie `Secure` (sent over HTTPS only): turn it on when the console
    /// is reached through HTTPS (a host's TLS terminator). Default: off, for loopback HTTP.
    pub fn secure_cookies(mut self, secure: bool) -> Console {
        self.secure_cookies = secure;
        self
    }

    /// Accepts only tokens issued for `audience` (one of the verified token's
    /// [`audiences`](toolwright_mcp::VerifiedToken::audiences), compared exactly); called again,
    /// any of the audiences given. Default: any audience. With a verifier shared with the MCP
    /// server, every token a client of the tools holds signs in; give the console an audience
    /// (or [`required_scopes`](Console::required_scopes)) of its own so only its operators do.
    pub fn audience(mut self, audience: impl Into<String>) -> Console {
        self.admission.audiences.push(audience.into());
        self
    }

    /// Accepts only tokens that grant every one of `scopes` (say `console:operate`): sign-in
    /// and bearer requests with a token lacking one are refused, saying which. Default: none.
    pub fn required_scopes(
        mut self,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Console {
        self.admission
            .scopes
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// How long a sign-in lasts (default 8 hours).
    pub fn session_ttl(mut self, ttl: Duration) -> Console {
        self.session_ttl = ttl;
        self
    }

    /// How many rows a listing page shows (default 50; 1 to
    /// [`MAX_PAGE_LIMIT`](toolwright_runtime::store::MAX_PAGE_LIMIT)).
    pub fn page_size(mut self, rows: usize) -> Console {
        self.page_size = rows.clamp(1, toolwright_runtime::store::MAX_PAGE_LIMIT);
        self
    }

    /// The console's routes, under [`at`](Console::at)'s path. Call it inside a tokio runtime:
    /// it starts the task that keeps the recent events of the turns this process runs, which
    /// turn pages show beside what the store holds.
    pub fn router(self) -> axum::Router {
        let recent = Arc::new(events::Recent::default());
        events::record(&self.runtime, &recent);
        let shared = Arc::new(Shared {
            runtime: self.runtime,
            verifier: self.verifier,
            admission: self.admission,
            sessions: auth::Sessions::new(self.session_ttl),
            recent,
            base: self.base,
            secure_cookies: self.secure_cookies,
            page_size: self.page_size,
        });
        routes::router(shared)
    }

    /// Serves the console on `addr` until the returned server is shut down. Anything but a
    /// loopback address is served with a warning (logged through `tracing`): the console acts
    /// on parked work, so expose it only behind HTTPS and an identity provider you trust.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<ConsoleServer> {
        if !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                "the operator console is bound to a non-loopback address: anyone who reaches it \
                 can try to sign in; put it behind HTTPS and turn on secure_cookies"
            );
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let router = self.router();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(error) = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(%error, "the operator console stopped serving");
            }
        });
        Ok(ConsoleServer {
            addr,
            stop: Some(stop),
            task,
        })
    }
}

/// A console serving on an address of its own ([`Console::serve`]).
#[derive(Debug)]
pub struct ConsoleServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl ConsoleServer {
    /// The address it listens on (the port the system chose, for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, lets requests in flight finish, and waits for that.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Waits until the server stops (it stops only through [`shutdown`](Self::shutdown) or an
    /// error, so this is what a program serving the console until it is killed awaits).
    pub async fn wait(mut self) {
        let _ = (&mut self.task).await;
    }
}
