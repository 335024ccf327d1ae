//! Connections: tools of remote servers joining the registry.
//!
//! A [`Connection`] is declared on the runtime builder: a name, a [`Connector`] (the transport;
//! `toolwright-mcp` provides stdio and streamable HTTP ones over rmcp's client), an allowlist of
//! the server's tool names, trust and per-tool overrides. [`crate::Runtime::connect`] starts
//! every connection at once; each then lives under a supervisor task for the life of the
//! runtime: it lists the server's tools (compiling their schemas once per listing), pins their
//! definitions, publishes them in the runtime's registry, refreshes them when the server says
//! its list changed, and reconnects with backoff when the server goes away. While a server is
//! down its tools stay listed and their calls fail with an actionable error; nothing else in the
//! runtime waits on it.
//!
//! Definitions are pinned against "rug pulls": the first listing of a declared connection pins a
//! digest of each allowed tool's definition (declaring the connection and its allowlist is the
//! approval); when the server later lists a different definition, that tool is withheld from
//! every list until a person approves the change through an input request that shows both
//! definitions.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    CallContext, CallOutput, ErrorCode, Principal, Registry, RemoteDefinition, RemoteInvoke,
    RemotePolicy, Tool, ToolError, ToolOverride, names,
};

use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{DefinitionChange, PinRecord};
use crate::runtime::{Inner, Runtime};

/// A live session with one server, opened by a [`Connector`].
pub trait RemoteSession: Send + Sync + 'static {
    /// Every tool the server lists (all pages).
    fn list_tools(&self) -> BoxFuture<'_, Result<Vec<RemoteDefinition>, String>>;

    /// Calls the server's tool `tool` with `input` (already validated against its
    /// `inputSchema`). When `cx`'s cancellation token fires the call ends at once and the server
    /// is told. A server's `isError` result is an `Err` whose message is the server's text.
    fn call_tool(
        self: Arc<Self>,
        tool: String,
        input: Value,
        cx: CallContext,
    ) -> BoxFuture<'static, Result<CallOutput, ToolError>>;

    /// Completes when the session has ended (the server exited, the transport closed).
    fn closed(&self) -> BoxFuture<'_, ()>;
}

/// Opens sessions with one server: the transport of a [`Connection`].
pub trait Connector: Send + Sync + 'static {
    /// Opens a session. The session calls [`ListChanged::notify`] when the server says its tool
    /// list changed.
    fn connect(
        &self,
        changed: ListChanged,
    ) -> BoxFuture<'_, Result<Arc<dyn RemoteSession>, String>>;
}

/// What a session calls when its server's tool list changed: the supervisor lists the tools
/// again.
#[derive(Clone, Debug, Default)]
pub struct ListChanged(Arc<Notify>);

impl ListChanged {
    /// The server said its tool list changed.
    pub fn notify(&self) {
        self.0.notify_one();
    }
}

/// Which of the server's tools a connection uses.
#[derive(Clone, Debug)]
enum Allow {
    /// Not declared yet: refused at build.
    Unset,
    /// Every tool the server lists.
    All,
    /// Exactly these; one the server does not expose is an error at connect time.
    Only(Vec<String>),
}

/// A declared connection to a server whose tools join the registry as `<name>__<tool>`.
///
/// Untrusted unless marked [`Connection::trusted`]: an untrusted server's annotations reach
/// approval policies as hints only, and each of its tools has effect `write`, `untrusted`
/// output (it taints the turn) and approval `once`. Override any setting per tool with
/// [`Connection::tool`].
///
/// ```
/// # use std::sync::Arc;
/// # use futures_util::future::BoxFuture;
/// # use toolwright_runtime::remote::{Connection, Connector, ListChanged, RemoteSession};
/// # struct Stdio;
/// # impl Connector for Stdio {
/// #     fn connect(&self, _: ListChanged) -> BoxFuture<'_, Result<Arc<dyn RemoteSession>, String>> {
/// #         Box::pin(async { Err("not in a doctest".to_owned()) })
/// #     }
/// # }
/// use toolwright_core::{Effect, RequestPolicy, ToolOverride};
///
/// let files = Connection::new("files", Stdio)
///     .allow(["read_text_file", "write_file"])
///     .tool("write_file", ToolOverride::new().approval(RequestPolicy::Always));
/// # let _ = files;
/// ```
#[derive(Clone)]
pub struct Connection {
    name: String,
    connector: Arc<dyn Connector>,
    allow: Allow,
    trusted: bool,
    overrides: BTreeMap<String, ToolOverride>,
    connect_timeout: Duration,
    backoff: (Duration, Duration),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("allow", &self.allow)
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection named `name` (the prefix of its tools' names) through `connector`.
    pub fn new(name: impl Into<String>, connector: impl Connector) -> Self {
        Connection {
            name: name.into(),
            connector: Arc::new(connector),
            allow: Allow::Unset,
            trusted: false,
            overrides: BTreeMap::new(),
            connect_timeout: Duration::from_secs(30),
            backoff: (Duration::from_millis(250), Duration::from_secs(30)),
        }
    }

    /// The server's tools this connection uses, by the server's names. Connecting fails, naming
    /// them, when the server does not expose one of them.
    pub fn allow<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allow = Allow::Only(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Use every tool the server lists, now and after it changes its list.
    pub fn allow_all(mut self) -> Self {
        self.allow = Allow::All;
        self
    }

    /// Trust the server's annotations: read-only tools become `read` with no approval,
    /// open-world ones `public` with approval `once`, destructive ones `write` with approval
    /// `once` (see [`RemotePolicy::trusted`]); their output does not taint the turn.
    pub fn trusted(mut self) -> Self {
        self.trusted = true;
        self
    }

    /// Overrides what trust decided for the server's tool `tool`.
    pub fn tool(mut self, tool: impl Into<String>, settings: ToolOverride) -> Self {
        self.overrides.insert(tool.into(), settings);
        self
    }

    /// How long opening a session and listing the tools may take (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The first and the longest wait between reconnection attempts (default 250 ms and 30 s;
    /// each wait doubles, with jitter).
    pub fn backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.backoff = (first, longest.max(first));
        self
    }

    /// Which audiences (model, subagent, user) may see a tool of this connection, as far as
    /// its declaration tells: with an allowlist, whether any allowed tool is visible to each
    /// after its overrides; with `allow_all`, every audience (the server decides).
    pub(crate) fn audiences(&self) -> [bool; 3] {
        let Allow::Only(names) = &self.allow else {
            return [true, true, true];
        };
        let policies: Vec<RemotePolicy> = names
            .iter()
            .map(|name| match self.overrides.get(name) {
                Some(overrides) => RemotePolicy::UNTRUSTED.overridden_by(overrides),
                None => RemotePolicy::UNTRUSTED,
            })
            .collect();
        [
            policies.iter().any(|p| !p.user_only),
            policies.iter().any(|p| !p.user_only && p.subagents),
            true,
        ]
    }

    /// The connection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why this declaration cannot be used beside `local`'s tools and the other connections.
    pub(crate) fn problem(&self, local: &Registry, earlier: &[Connection]) -> Option<String> {
        let name = &self.name;
        if !names::is_valid_name(name) || name.contains(names::TOOLSET_SEPARATOR) {
            return Some(format!(
                "the name `{name}` must match ^[a-zA-Z0-9_-]{{1,64}}$ without `__` (it prefixes its tools' names)"
            ));
        }
        if earlier.iter().any(|c| &c.name == name) {
            return Some(format!("two connections are named `{name}`; rename one"));
        }
        let prefix = format!("{name}{}", names::TOOLSET_SEPARATOR);
        if let Some(tool) = local.tools().iter().find(|t| t.name().starts_with(&prefix)) {
            return Some(format!(
                "its tools would be named `{prefix}...`, like the local tool `{}`; rename the connection or the toolset",
                tool.name()
            ));
        }
        let allowed = match &self.allow {
            Allow::Unset => {
                return Some(
                    "it declares no tools: list the server's tools it may use with `.allow([...])`, or take all with `.allow_all()`".into(),
                );
            }
            Allow::All => None,
            Allow::Only(tools) if tools.is_empty() => {
                return Some("its allowlist is empty; allow at least one tool".into());
            }
            Allow::Only(tools) => Some(tools),
        };
        if let Some(allowed) = allowed
            && let Some(stray) = self.overrides.keys().find(|t| !allowed.contains(t))
        {
            return Some(format!(
                "it overrides the settings of `{stray}`, which its allowlist does not name; add it to `.allow([...])` or drop the override"
            ));
        }
        None
    }
}

/// Where a connection is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ConnectionState {
    /// Not connected yet (first attempt under way).
    Connecting,
    /// Connected; its tools are listed.
    Up,
    /// The server cannot be reached; the runtime retries with backoff.
    Down {
        /// The last error.
        error: String,
        /// Failed attempts since it was last up.
        attempts: u32,
    },
    /// The declaration does not fit the server (an allowed tool it does not expose); no retry.
    Refused {
        /// What does not fit.
        error: String,
    },
}

/// A connection's state and tools, as [`Runtime::connections`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStatus {
    /// The connection's name.
    pub name: String,
    /// Where it is.
    pub state: ConnectionState,
    /// Its tools in the registry (model-facing names), withheld ones included.
    pub tools: Vec<String>,
    /// Tools withheld because their server changed their definition since it was approved.
    pub withheld: Vec<String>,
    /// Tools that could not be made available, with the reason.
    pub unavailable: Vec<(String, String)>,
}

/// Connections whose first attempt failed, from [`Runtime::connect`]. The runtime keeps
/// retrying those that are merely down.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.failures))]
pub struct ConnectError {
    /// Each failed connection and why.
    pub failures: Vec<(String, ConnectionState)>,
}

fn describe(failures: &[(String, ConnectionState)]) -> String {
    failures
        .iter()
        .map(|(name, state)| match state {
            ConnectionState::Refused { error } => format!("connection `{name}` refused: {error}"),
            ConnectionState::Down { error, .. } => {
                format!("connection `{name}` failed: {error} (retrying in the background)")
            }
            _ => format!("connection `{name}` is not up"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The runtime's connections and their supervisors.
pub(crate) struct Remote {
    local: Registry,
    links: Vec<Arc<Link>>,
    /// Held while a registry is assembled and stored, so that two publishes cannot store in the
    /// wrong order (an older view last).
    publishing: Mutex<()>,
    started: AtomicBool,
    shutdown: CancellationToken,
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

struct Link {
    decl: Connection,
    changed: ListChanged,
    /// Held for a whole rebuild (pins read, tools built, state replaced), so that a rebuild from
    /// an older listing cannot land after one from a newer listing.
    rebuilding: tokio::sync::Mutex<()>,
    state: Mutex<LinkState>,
    /// Becomes `true` when the first attempt is over (up, down or refused).
    settled: watch::Sender<bool>,
}

struct LinkState {
    state: ConnectionState,
    session: Option<Arc<dyn RemoteSession>>,
    /// Whether `tools` hold a listing (kept while the server is down).
    listed: bool,
    /// The allowed definitions of the last listing, to rebuild after an approval.
    definitions: Vec<RemoteDefinition>,
    tools: Vec<Arc<Tool>>,
    unavailable: Vec<(String, String)>,
    /// Changed definitions already announced (tool and digest), so a refresh repeats no event.
    announced: HashSet<(String, String)>,
}

impl Link {
    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Remote {
    pub(crate) fn new(local: Registry, connections: Vec<Connection>) -> Remote {
        let links = connections
            .into_iter()
            .map(|decl| {
                Arc::new(Link {
                    decl,
                    changed: ListChanged::default(),
                    rebuilding: tokio::sync::Mutex::new(()),
                    state: Mutex::new(LinkState {
                        state: ConnectionState::Connecting,
                        session: None,
                        listed: false,
                        definitions: Vec::new(),
                        tools: Vec::new(),
                        unavailable: Vec::new(),
                        announced: HashSet::new(),
                    }),
                    settled: watch::channel(false).0,
                })
            })
            .collect();
        Remote {
            local,
            links,
            publishing: Mutex::new(()),
            started: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    fn link(&self, connection: &str) -> Option<&Arc<Link>> {
        self.links.iter().find(|l| l.decl.name == connection)
    }

    /// The local tools joined by every connection's, or, for connections without a listing,
    /// the reason their names are missing.
    fn assemble(&self) -> Registry {
        let mut tools = Vec::new();
        let mut unavailable = Vec::new();
        let mut offline = Vec::new();
        for link in &self.links {
            let state = link.lock();
            if state.listed {
                tools.extend(state.tools.iter().cloned());
                unavailable.extend(state.unavailable.iter().cloned());
            } else {
                let reason = match &state.state {
                    ConnectionState::Connecting => "it is connecting".to_owned(),
                    ConnectionState::Down { error, .. } => {
                        format!(
                            "its server cannot be reached ({error}); the runtime keeps retrying"
                        )
                    }
                    ConnectionState::Refused { error } => format!("it was refused: {error}"),
                    ConnectionState::Up => "it has not listed its tools yet".to_owned(),
                };
                offline.push((link.decl.name.clone(), reason));
            }
        }
        self.local.with_remote(tools, unavailable, offline)
    }
}

impl Runtime {
    /// Starts every declared connection at once and waits until each has connected and listed
    /// its tools, or failed its first attempt. Connections stay up for the life of the runtime:
    /// their lists are refreshed when the server says they changed, and a server that goes away
    /// is reconnected with backoff (its tools stay listed; their calls fail meanwhile).
    ///
    /// Fails, naming each, when a connection's first attempt failed: [`ConnectionState::Refused`]
    /// for a declaration that does not fit the server (an allowed tool it does not expose; never
    /// retried), [`ConnectionState::Down`] otherwise (retried in the background). Calling it
    /// again waits for the current attempts without starting anything twice.
    pub async fn connect(&self) -> Result<(), ConnectError> {
        let remote = &self.0.remote;
        if !remote.started.swap(true, Ordering::SeqCst) {
            for link in &remote.links {
                let link = Arc::clone(link);
                let runtime = Arc::downgrade(&self.0);
                let shutdown = remote.shutdown.clone();
                tokio::spawn(supervise(link, runtime, shutdown));
            }
        }
        let waits = remote.links.iter().map(|link| {
            let mut settled = link.settled.subscribe();
            async move {
                let _ = settled.wait_for(|done| *done).await;
            }
        });
        futures_util::future::join_all(waits).await;
        let failures: Vec<(String, ConnectionState)> = remote
            .links
            .iter()
            .filter_map(|link| {
                let state = link.lock().state.clone();
                matches!(
                    state,
                    ConnectionState::Down { .. } | ConnectionState::Refused { .. }
                )
                .then(|| (link.decl.name.clone(), state))
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ConnectError { failures })
        }
    }

    /// Each declared connection: its state and its tools.
    pub fn connections(&self) -> Vec<ConnectionStatus> {
        self.0
            .remote
            .links
            .iter()
            .map(|link| {
                let state = link.lock();
                ConnectionStatus {
                    name: link.decl.name.clone(),
                    state: state.state.clone(),
                    tools: state.tools.iter().map(|t| t.name().to_owned()).collect(),
                    withheld: state
                        .tools
                        .iter()
                        .filter(|t| t.is_withheld())
                        .map(|t| t.name().to_owned())
                        .collect(),
                    unavailable: state.unavailable.clone(),
                }
            })
            .collect()
    }

    /// The definition change of withheld tool `name` (`<connection>__<tool>`), for a user
    /// interface that reviews changes outside any turn.
    pub fn definition_change(&self, name: &str) -> Option<DefinitionChange> {
        self.registry().get(name).and_then(definition_change)
    }

    /// Approves the definition the server of withheld tool `name` lists now, for every session:
    /// the tool is listed and callable again. `by` is recorded with the pin. Returns `false`
    /// when the tool is not withheld (any more).
    pub async fn approve_definition(
        &self,
        name: &str,
        by: Option<Principal>,
    ) -> Result<bool, RuntimeError> {
        let Some(change) = self.definition_change(name) else {
            return Ok(false);
        };
        self.approve_change(&change, by).await
    }

    /// Pins `change.listed` in place of `change.pinned` and publishes the tool again.
    pub(crate) async fn approve_change(
        &self,
        change: &DefinitionChange,
        by: Option<Principal>,
    ) -> Result<bool, RuntimeError> {
        let pin = PinRecord {
            connection: change.connection.clone(),
            tool: change.tool.clone(),
            digest: change.digest.clone(),
            definition: change.listed.clone(),
            approved_by: by,
            pinned_at_ms: self.0.options.clock.now_ms(),
        };
        let written = self
            .0
            .store
            .pin(&pin, Some(&change.pinned.digest()))
            .await?;
        if let Some(link) = self.0.remote.link(&change.connection) {
            rebuild(link, &self.0, None).await?;
        }
        // Not written: another approval of the same change landed first (the definition is
        // pinned all the same), or the pin moved on (the tool stays withheld, and its next call
        // asks again).
        let pinned = self
            .registry()
            .get(&names::model_name(Some(&change.connection), &change.tool))
            .and_then(Tool::remote_tool)
            .is_some_and(|r| r.withheld().is_none() && r.digest() == change.digest);
        Ok(written || pinned)
    }

    /// For a withheld tool: whether its pin now matches what the server lists (approved by
    /// another instance meanwhile); if so its connection is rebuilt and published.
    pub(crate) async fn pinned_meanwhile(&self, tool: &Tool) -> bool {
        let Some(remote) = tool.remote_tool() else {
            return false;
        };
        let Ok(pins) = self.0.store.pins(remote.connection()).await else {
            return false;
        };
        let current = pins
            .iter()
            .any(|p| p.tool == remote.definition().name && p.digest == remote.digest());
        if !current {
            return false;
        }
        if let Some(link) = self.0.remote.link(remote.connection()) {
            return rebuild(link, &self.0, None).await.is_ok();
        }
        false
    }
}

/// What a withheld tool's approval request shows.
pub(crate) fn definition_change(tool: &Tool) -> Option<DefinitionChange> {
    let remote = tool.remote_tool()?;
    let pinned = remote.withheld()?;
    Some(DefinitionChange {
        connection: remote.connection().to_owned(),
        tool: remote.definition().name.clone(),
        pinned: pinned.clone(),
        listed: remote.definition().clone(),
        digest: remote.digest().to_owned(),
    })
}

/// Replaces the runtime's registry with the local tools and every connection's current tools.
fn publish(inner: &Inner) {
    let _order = inner
        .remote
        .publishing
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    inner.registry.store(Arc::new(inner.remote.assemble()));
}

/// Records the connection's new state, publishes the registry it implies, then announces it.
fn set_state(link: &Link, inner: Option<&Inner>, state: ConnectionState) {
    {
        let mut guard = link.lock();
        if guard.state == state {
            return;
        }
        guard.state = state.clone();
    }
    if let Some(inner) = inner {
        publish(inner);
        let _ = inner.events.send(Event::ConnectionChanged {
            connection: link.decl.name.clone(),
            state,
        });
    }
}

/// Keeps one connection up for the life of the runtime.
async fn supervise(link: Arc<Link>, runtime: Weak<Inner>, shutdown: CancellationToken) {
    let mut attempts: u32 = 0;
    loop {
        let attempt = async {
            let session = tokio::time::timeout(
                link.decl.connect_timeout,
                link.decl.connector.connect(link.changed.clone()),
            )
            .await
            .map_err(|_| {
                Failure::Down(format!(
                    "the server did not answer within {:?}",
                    link.decl.connect_timeout
                ))
            })?
            .map_err(Failure::Down)?;
            let listing = tokio::time::timeout(link.decl.connect_timeout, session.list_tools())
                .await
                .map_err(|_| {
                    Failure::Down(format!(
                        "the server did not list its tools within {:?}",
                        link.decl.connect_timeout
                    ))
                })?
                .map_err(|error| Failure::Down(format!("listing its tools failed: {error}")))?;
            let Some(inner) = runtime.upgrade() else {
                return Err(Failure::Gone);
            };
            refresh(&link, &inner, listing).await?;
            Ok(session)
        };
        let outcome = tokio::select! {
            () = shutdown.cancelled() => return,
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(session) => {
                let up_since = tokio::time::Instant::now();
                link.lock().session = Some(Arc::clone(&session));
                let Some(inner) = runtime.upgrade() else {
                    return;
                };
                set_state(&link, Some(&inner), ConnectionState::Up);
                drop(inner);
                link.settled.send_replace(true);
                // Up: refresh on every list change until the session ends. A listing that
                // fails or hangs ends the session too: the server said its tools changed, so the
                // old ones must not stay callable; reconnecting lists them afresh.
                let ended = loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = session.closed() => break "the server closed the connection".to_owned(),
                        () = link.changed.0.notified() => {
                            let listing = tokio::select! {
                                () = shutdown.cancelled() => return,
                                () = session.closed() => break "the server closed the connection".to_owned(),
                                listing = tokio::time::timeout(link.decl.connect_timeout, session.list_tools()) => listing,
                            };
                            let listing = match listing {
                                Ok(Ok(listing)) => listing,
                                Ok(Err(error)) => break format!("listing its tools again failed: {error}"),
                                Err(_) => break format!("listing its tools again took over {:?}", link.decl.connect_timeout),
                            };
                            let Some(inner) = runtime.upgrade() else { return };
                            if let Err(Failure::Down(error) | Failure::Refused(error)) =
                                refresh(&link, &inner, listing).await
                            {
                                break error;
                            }
                        }
                    }
                };
                link.lock().session = None;
                drop(session);
                // A server that dies right after each listing must still back off.
                attempts = if up_since.elapsed() > link.decl.backoff.1 {
                    0
                } else {
                    attempts.saturating_add(1)
                };
                tracing::warn!(connection = %link.decl.name, error = %ended, "connection ended");
                let Some(inner) = runtime.upgrade() else {
                    return;
                };
                set_state(
                    &link,
                    Some(&inner),
                    ConnectionState::Down {
                        error: ended,
                        attempts,
                    },
                );
            }
            Err(Failure::Gone) => return,
            Err(Failure::Refused(error)) => {
                let inner = runtime.upgrade();
                set_state(&link, inner.as_deref(), ConnectionState::Refused { error });
                link.settled.send_replace(true);
                return;
            }
            Err(Failure::Down(error)) => {
                attempts = attempts.saturating_add(1);
                tracing::warn!(connection = %link.decl.name, attempts, %error, "connection failed");
                let inner = runtime.upgrade();
                set_state(
                    &link,
                    inner.as_deref(),
                    ConnectionState::Down { error, attempts },
                );
                link.settled.send_replace(true);
            }
        }
        let wait = backoff(link.decl.backoff, attempts);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The wait before reconnection attempt `attempts`: doubling from the first wait up to the
/// longest, with up to a quarter of jitter so that instances do not reconnect in lockstep.
fn backoff((first, longest): (Duration, Duration), attempts: u32) -> Duration {
    let doubled = first.saturating_mul(1u32 << attempts.saturating_sub(1).min(16));
    let base = doubled.min(longest);
    let jitter = uuid::Uuid::new_v4().as_u128() as u64 % (base.as_millis() as u64 / 4 + 1);
    base + Duration::from_millis(jitter)
}

enum Failure {
    /// Worth retrying.
    Down(String),
    /// The declaration does not fit the server: retrying cannot help.
    Refused(String),
    /// The runtime was dropped.
    Gone,
}

/// Checks a listing against the allowlist and rebuilds the connection's tools from it.
async fn refresh(
    link: &Arc<Link>,
    inner: &Arc<Inner>,
    listing: Vec<RemoteDefinition>,
) -> Result<(), Failure> {
    let first = !link.lock().listed;
    let definitions: Vec<RemoteDefinition> = match &link.decl.allow {
        Allow::Only(allowed) => {
            let missing: Vec<&String> = allowed
                .iter()
                .filter(|name| !listing.iter().any(|d| &&d.name == name))
                .collect();
            if first && !missing.is_empty() {
                let mut available: Vec<&str> = listing.iter().map(|d| d.name.as_str()).collect();
                available.sort_unstable();
                return Err(Failure::Refused(format!(
                    "its allowlist names {} that the server does not expose; the server lists: {}. Fix `.allow([...])` of connection `{}`",
                    missing
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if available.is_empty() {
                        "no tools".to_owned()
                    } else {
                        available.join(", ")
                    },
                    link.decl.name
                )));
            }
            listing
                .into_iter()
                .filter(|d| allowed.contains(&d.name))
                .collect()
        }
        Allow::All | Allow::Unset => listing,
    };
    rebuild(link, inner, Some(definitions))
        .await
        .map_err(|error| Failure::Down(format!("its pins could not be read: {error}")))
}

/// Builds the connection's tools from `definitions` (a new listing; `None`: the last one) and
/// the stored pins, and publishes them.
async fn rebuild(
    link: &Arc<Link>,
    inner: &Inner,
    definitions: Option<Vec<RemoteDefinition>>,
) -> Result<(), RuntimeError> {
    let _one_at_a_time = link.rebuilding.lock().await;
    let definitions = match definitions {
        Some(definitions) => definitions,
        None => link.lock().definitions.clone(),
    };
    let connection = &link.decl.name;
    let mut pins: Vec<PinRecord> = inner.store.pins(connection).await?;
    let mut tools = Vec::with_capacity(definitions.len());
    let mut unavailable = Vec::new();
    let mut changed = Vec::new();
    let mut seen = HashSet::new();
    for definition in &definitions {
        let name = names::model_name(Some(connection), &definition.name);
        if !seen.insert(definition.name.clone()) {
            // Which of the two would run is anyone's guess: neither does.
            tools.retain(|t: &Arc<Tool>| t.name() != name);
            unavailable.push((name, "its server lists two tools with this name".to_owned()));
            continue;
        }
        let digest = definition.digest();
        let mut pinned = pins.iter().find(|p| p.tool == definition.name).cloned();
        if pinned.is_none() {
            let pin = PinRecord {
                connection: connection.clone(),
                tool: definition.name.clone(),
                digest: digest.clone(),
                definition: definition.clone(),
                approved_by: None,
                pinned_at_ms: inner.options.clock.now_ms(),
            };
            if inner.store.pin(&pin, None).await? {
                pins.push(pin.clone());
                pinned = Some(pin);
            } else {
                // Another instance pinned it first: its pin is the one to compare with.
                pins = inner.store.pins(connection).await?;
                pinned = pins.iter().find(|p| p.tool == definition.name).cloned();
            }
        }
        let withheld = pinned
            .filter(|p| p.digest != digest)
            .map(|p| (p.definition, p.digest));
        let policy = if link.decl.trusted {
            RemotePolicy::trusted(definition.annotations.as_ref())
        } else {
            RemotePolicy::UNTRUSTED
        };
        let policy = match link.decl.overrides.get(&definition.name) {
            Some(settings) => policy.overridden_by(settings),
            None => policy,
        };
        let invoker = Arc::new(LinkInvoker {
            link: Arc::downgrade(link),
            tool: definition.name.clone(),
            digest: digest.clone(),
        });
        if let Some((_, pinned_digest)) = &withheld {
            changed.push((
                name.clone(),
                definition.name.clone(),
                pinned_digest.clone(),
                digest.clone(),
            ));
        }
        match Tool::remote(
            connection,
            definition.clone(),
            policy,
            invoker,
            withheld.map(|(definition, _)| definition),
        ) {
            Ok(tool) => tools.push(Arc::new(tool)),
            Err(reason) => {
                tracing::warn!(connection = %connection, tool = %definition.name, %reason, "remote tool unavailable");
                unavailable.push((name, reason));
            }
        }
    }
    // A tool the allowlist names that the server stopped listing: its calls say so.
    if let Allow::Only(allowed) = &link.decl.allow {
        for gone in allowed
            .iter()
            .filter(|name| !definitions.iter().any(|d| &&d.name == name))
        {
            unavailable.push((
                names::model_name(Some(connection), gone),
                "its server no longer lists it".to_owned(),
            ));
        }
    }
    let fresh: Vec<(String, String, String, String)> = {
        let mut state = link.lock();
        state.listed = true;
        state.definitions = definitions;
        state.tools = tools;
        state.unavailable = unavailable;
        // Forget announcements of changes no longer pending: a change back and forth is news.
        state
            .announced
            .retain(|(tool, digest)| changed.iter().any(|c| &c.1 == tool && &c.3 == digest));
        changed
            .into_iter()
            .filter(|(_, tool, _, digest)| state.announced.insert((tool.clone(), digest.clone())))
            .collect()
    };
    // Published first, so whoever reacts to the event finds the tool withheld.
    publish(inner);
    for (name, tool, pinned, digest) in fresh {
        tracing::warn!(connection = %connection, tool = %name, "a remote tool's definition changed; withheld until a person approves it");
        let _ = inner.events.send(Event::ToolDefinitionChanged {
            connection: connection.clone(),
            tool,
            name,
            pinned_digest: pinned,
            digest,
        });
    }
    Ok(())
}

/// Runs calls of one remote tool through its connection's current session.
struct LinkInvoker {
    link: Weak<Link>,
    tool: String,
    /// The definition this tool was built from: a call runs only while it is the one the
    /// connection holds, approved.
    digest: String,
}

impl RemoteInvoke for LinkInvoker {
    fn invoke(
        &self,
        input: Value,
        cx: CallContext,
    ) -> BoxFuture<'static, Result<CallOutput, ToolError>> {
        let Some(link) = self.link.upgrade() else {
            return Box::pin(async {
                Err(ToolError::with_code(
                    ErrorCode::Unavailable,
                    "the runtime is shutting down",
                ))
            });
        };
        let (session, state, listed, current) = {
            let guard = link.lock();
            let current = guard
                .tools
                .iter()
                .filter_map(|t| t.remote_tool())
                .find(|r| r.definition().name == self.tool)
                .map(|r| (r.digest() == self.digest, r.withheld().is_some()));
            (
                guard.session.clone(),
                guard.state.clone(),
                guard.listed,
                current,
            )
        };
        let name = names::model_name(Some(&link.decl.name), &self.tool);
        // The last check before anything reaches the server: a step resolves its tools when it
        // begins, and the server may have changed this one since.
        let refusal = match current {
            Some((true, false)) => None,
            Some(_) => Some(format!(
                "`{name}` did not run: its server changed its definition since this call was prepared; call it again (a person approves the new definition first)"
            )),
            None if listed => Some(format!(
                "`{name}` did not run: its server no longer lists it"
            )),
            None => None,
        };
        if let Some(message) = refusal {
            return Box::pin(async move { Err(ToolError::with_code(ErrorCode::Denied, message)) });
        }
        match session {
            Some(session) => session.call_tool(self.tool.clone(), input, cx),
            None => {
                let why = match state {
                    ConnectionState::Down { error, .. } => {
                        format!("its server cannot be reached ({error})")
                    }
                    ConnectionState::Refused { error } => format!("it was refused ({error})"),
                    _ => "it is not connected yet".to_owned(),
                };
                let message = format!(
                    "`{name}` cannot be called now: connection `{}` is down, {why}; the runtime reconnects in the background, so try again in a moment or do without this tool",
                    link.decl.name
                );
                Box::pin(async move { Err(ToolError::with_code(ErrorCode::Unavailable, message)) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_longest_wait_with_bounded_jitter() {
        let plan = (Duration::from_millis(100), Duration::from_secs(2));
        for (attempts, base) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (5, 1600),
            (6, 2000),
            (40, 2000),
        ] {
            let wait = backoff(plan, attempts).as_millis() as u64;
            assert!(
                (base..=base + base / 4).contains(&wait),
                "attempt {attempts}: {wait} ms"
            );
        }
    }
}
