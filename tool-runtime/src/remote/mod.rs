//! Connections: tools of remote servers joining the registry.
//!
//! A [`Connection`] is declared on the runtime builder: a name, a [`Connector`] (the transport;
//! `toolwright-mcp` provides stdio and streamable HTTP ones over rmcp's client), an allowlist of
//! the server's tool names, trust and per-tool overrides. [`crate::Runtime::connect`] starts
//! every connection at once; each then lives under a supervisor task for the life of the
//! runtime: it lists the server's tools (compiling their schemas once per listing), pins their
//! definitions, publishes them in the runtime's registry, refreshes them when the server says
//! its list changed, checks that it still answers ([`Connection::liveness`]), and reconnects
//! with backoff when the server goes away or stops answering. While a server is down its tools
//! stay listed and their calls fail at once with an actionable error; nothing else in the
//! runtime waits on it.
//!
//! Definitions are pinned against "rug pulls": the first listing of a declared connection pins a
//! digest of each allowed tool's definition (declaring the connection and its allowlist is the
//! approval); when the server later lists a different definition, that tool is withheld from
//! every list until a person approves the change through an input request that shows both
//! definitions.

//!
//! This module holds the declarations; its private submodules hold the runtime's component
//! (`connections`), each connection's state and the registry they publish (`links`), and the
//! task that keeps each one up (`supervise`).

pub(crate) mod connections;
pub(crate) mod links;
pub(crate) mod supervise;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use toolwright_core::{
    CallContext, CallOutput, Registry, RemoteDefinition, RemotePolicy, Tool, ToolError,
    ToolOverride, names,
};

use crate::record::DefinitionChange;

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

    /// Checks that the server still answers (the MCP client sends a `ping`). The supervisor
    /// calls it every [`Connection::liveness`] interval and gives the session up when it fails
    /// or does not complete in time. By default it lists the server's tools.
    fn ping(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { self.list_tools().await.map(|_| ()) })
    }
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
    /// How often a live session is checked, and how long its answer may take.
    liveness: (Duration, Duration),
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
            liveness: (Duration::from_secs(10), Duration::from_secs(10)),
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

    /// How often a live session is checked ([`RemoteSession::ping`]: an MCP `ping`) and how long
    /// the server may take to answer (default every 10 s, within 10 s). A server that stops
    /// answering — frozen, not exited — is marked down within the sum of the two (20 s by
    /// default): a [`ConnectionState::Down`] event goes out, calls waiting on it and new calls
    /// of its tools fail at once with `UNAVAILABLE`, and it is reconnected with backoff.
    pub fn liveness(mut self, every: Duration, deadline: Duration) -> Self {
        let floor = Duration::from_millis(1);
        self.liveness = (every.max(floor), deadline.max(floor));
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
        // `a` with a server tool `_x` and `a_` with `x` would both make `a___x`: whichever came
        // first would take the other's calls.
        if let Some(other) = earlier.iter().find(|c| {
            c.name.strip_suffix('_') == Some(name.as_str())
                || name.strip_suffix('_') == Some(c.name.as_str())
        }) {
            return Some(format!(
                "`{name}` and `{}` differ by a trailing `_`, so their tools' names could be the same \
                 (`a` + `__` + `_x` is `a_` + `__` + `x`); rename one",
                other.name
            ));
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

/// A connection's state and tools, as [`crate::Runtime::connections`] reports it.
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

/// Connections whose first attempt failed, from [`crate::Runtime::connect`]. The runtime keeps
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
