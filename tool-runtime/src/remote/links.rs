//! Each connection's state and tools, the registry they publish (the local tools joined by every
//! connection's), the pins a rebuild checks definitions against, and how a remote tool's calls
//! reach its connection.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    CallContext, CallOutput, ErrorCode, Registry, RegistryError, RegistryProblem, RemoteDefinition,
    RemoteInvoke, RemotePolicy, Tool, ToolError, names,
};

use super::{Allow, Connection, ConnectionState, ListChanged, RemoteSession};
use crate::event::Event;
use crate::options::Clock;
use crate::record::PinRecord;
use crate::store::{Store, StoreError};

/// What the supervisors share with the runtime.
pub(super) struct Shared {
    /// The registry the runtime was built with, joined by the tools defined at run time
    /// (replaced whole when one is registered or unregistered).
    local: ArcSwap<Registry>,
    pub(super) links: Vec<Arc<Link>>,
    /// The tools now: the local registry joined by the connections' tools. Read once per step
    /// (a snapshot), replaced whole when a connection's list changes.
    pub(super) current: ArcSwap<Registry>,
    /// Held while a registry is assembled and stored, so that two publishes cannot store in the
    /// wrong order (an older view last).
    publishing: Mutex<()>,
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    events: broadcast::Sender<Event>,
}

pub(super) struct Link {
    pub(super) decl: Connection,
    pub(super) changed: ListChanged,
    /// Held for a whole rebuild (pins read, tools built, state replaced), so that a rebuild from
    /// an older listing cannot land after one from a newer listing.
    rebuilding: tokio::sync::Mutex<()>,
    state: Mutex<LinkState>,
    /// Becomes `true` when the first attempt is over (up, down or refused).
    pub(super) settled: watch::Sender<bool>,
}

/// The session a connection uses now, and what ends it for the calls waiting on it.
#[derive(Clone)]
pub(super) struct Live {
    pub(super) session: Arc<dyn RemoteSession>,
    /// Cancelled when the supervisor gives the session up (the server went away or stopped
    /// answering): calls still waiting on it fail at once.
    pub(super) ended: CancellationToken,
}

pub(super) struct LinkState {
    pub(super) connection: ConnectionState,
    pub(super) session: Option<Live>,
    /// Whether `tools` hold a listing (kept while the server is down).
    pub(super) listed: bool,
    /// The allowed definitions of the last listing, to rebuild after an approval.
    definitions: Vec<RemoteDefinition>,
    pub(super) tools: Vec<Arc<Tool>>,
    pub(super) unavailable: Vec<(String, String)>,
    /// Changed definitions already announced (tool and digest), so a refresh repeats no event.
    announced: HashSet<(String, String)>,
}

impl Link {
    pub(super) fn new(decl: Connection) -> Arc<Link> {
        Arc::new(Link {
            decl,
            changed: ListChanged::default(),
            rebuilding: tokio::sync::Mutex::new(()),
            state: Mutex::new(LinkState {
                connection: ConnectionState::Connecting,
                session: None,
                listed: false,
                definitions: Vec::new(),
                tools: Vec::new(),
                unavailable: Vec::new(),
                announced: HashSet::new(),
            }),
            settled: watch::channel(false).0,
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the connection's new state, publishes the registry it implies, then announces
    /// it.
    pub(super) fn set_state(&self, shared: &Shared, state: ConnectionState) {
        {
            let mut guard = self.lock();
            if guard.connection == state {
                return;
            }
            guard.connection = state.clone();
        }
        shared.publish();
        let _ = shared.events.send(Event::ConnectionChanged {
            connection: self.decl.name.clone(),
            state,
        });
    }
}

impl Shared {
    pub(super) fn new(
        local: Registry,
        links: Vec<Arc<Link>>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        events: broadcast::Sender<Event>,
    ) -> Shared {
        Shared {
            current: ArcSwap::from_pointee(local.clone()),
            local: ArcSwap::from_pointee(local),
            links,
            publishing: Mutex::new(()),
            store,
            clock,
            events,
        }
    }

    /// Replaces the registry with the local tools and every connection's current tools.
    fn publish(&self) {
        let _order = self.publishing();
        self.current.store(Arc::new(self.assemble()));
    }

    fn publishing(&self) -> MutexGuard<'_, ()> {
        self.publishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `tool` (defined at run time) to the local tools and publishes. Refuses a name
    /// another tool has now, a connection's tools included, or one in a connection's
    /// namespace (`<connection>__`), where that connection's tools may appear later.
    pub(super) fn register(&self, tool: Arc<Tool>) -> Result<(), RegistryError> {
        let _order = self.publishing();
        let name = tool.name().to_owned();
        let in_namespace = self
            .links
            .iter()
            .find(|l| name.starts_with(&format!("{}__", l.decl.name)));
        if let Some(link) = in_namespace {
            return Err(RegistryError {
                problems: vec![RegistryProblem::Namespace {
                    name,
                    connection: link.decl.name.clone(),
                }],
            });
        }
        if self.current.load().get(&name).is_some() {
            return Err(RegistryError {
                problems: vec![RegistryProblem::Taken { name }],
            });
        }
        let local = self.local.load();
        let dynamic = local
            .tools()
            .iter()
            .filter(|t| t.dynamic_tool().is_some())
            .cloned()
            .chain(std::iter::once(tool));
        self.local.store(Arc::new(local.with_dynamic(dynamic)?));
        self.current.store(Arc::new(self.assemble()));
        let _ = self.events.send(Event::ToolsRegistered {
            added: vec![name],
            removed: Vec::new(),
        });
        Ok(())
    }

    /// Removes the tool defined at run time named `name` and publishes; `false` when there is
    /// none.
    pub(super) fn unregister(&self, name: &str) -> bool {
        let _order = self.publishing();
        let local = self.local.load();
        if local.get(name).is_none_or(|t| t.dynamic_tool().is_none()) {
            return false;
        }
        let dynamic = local
            .tools()
            .iter()
            .filter(|t| t.dynamic_tool().is_some() && t.name() != name)
            .cloned();
        match local.with_dynamic(dynamic) {
            Ok(without) => {
                self.local.store(Arc::new(without));
                self.current.store(Arc::new(self.assemble()));
                let _ = self.events.send(Event::ToolsRegistered {
                    added: Vec::new(),
                    removed: vec![name.to_owned()],
                });
                true
            }
            // Fewer tools than a registry that held them cannot conflict.
            Err(_) => false,
        }
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
                offline.push((link.decl.name.clone(), offline_reason(&state.connection)));
            }
        }
        self.local.load().with_remote(tools, unavailable, offline)
    }
}

/// Why a connection without a listing has no tools.
fn offline_reason(state: &ConnectionState) -> String {
    match state {
        ConnectionState::Connecting => "it is connecting".to_owned(),
        ConnectionState::Down { error, .. } => {
            format!("its server cannot be reached ({error}); the runtime keeps retrying")
        }
        ConnectionState::Refused { error } => format!("it was refused: {error}"),
        ConnectionState::Up => "it has not listed its tools yet".to_owned(),
    }
}

/// Builds the connection's tools from `definitions` (a new listing; `None`: the last one) and
/// the stored pins, and publishes them.
pub(super) async fn rebuild(
    link: &Arc<Link>,
    shared: &Shared,
    definitions: Option<Vec<RemoteDefinition>>,
) -> Result<(), StoreError> {
    let _one_at_a_time = link.rebuilding.lock().await;
    let definitions = match definitions {
        Some(definitions) => definitions,
        None => link.lock().definitions.clone(),
    };
    let connection = &link.decl.name;
    let mut pins: Vec<PinRecord> = shared.store.pins(connection).await?;
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
        let pinned = pinned(shared, &mut pins, connection, definition, &digest).await?;
        let withheld = pinned
            .filter(|p| p.digest != digest)
            .map(|p| (p.definition, p.digest));
        if let Some((_, pinned_digest)) = &withheld {
            changed.push((
                name.clone(),
                definition.name.clone(),
                pinned_digest.clone(),
                digest.clone(),
            ));
        }
        let invoker = Arc::new(LinkInvoker::new(link, &definition.name, &digest));
        match Tool::remote(
            connection,
            definition.clone(),
            policy(&link.decl, definition),
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
    shared.publish();
    for (name, tool, pinned, digest) in fresh {
        tracing::warn!(connection = %connection, tool = %name, "a remote tool's definition changed; withheld until a person approves it");
        let _ = shared.events.send(Event::ToolDefinitionChanged {
            connection: connection.clone(),
            tool,
            name,
            pinned_digest: pinned,
            digest,
        });
    }
    Ok(())
}

/// The pin of `definition` (the first listing of a tool pins it; another instance may have
/// pinned it first, and its pin is the one to compare with).
async fn pinned(
    shared: &Shared,
    pins: &mut Vec<PinRecord>,
    connection: &str,
    definition: &RemoteDefinition,
    digest: &str,
) -> Result<Option<PinRecord>, StoreError> {
    if let Some(pin) = pins.iter().find(|p| p.tool == definition.name) {
        return Ok(Some(pin.clone()));
    }
    let pin = PinRecord {
        connection: connection.to_owned(),
        tool: definition.name.clone(),
        digest: digest.to_owned(),
        definition: definition.clone(),
        approved_by: None,
        pinned_at_ms: shared.clock.now_ms(),
    };
    if shared.store.pin(&pin, None).await? {
        pins.push(pin.clone());
        return Ok(Some(pin));
    }
    *pins = shared.store.pins(connection).await?;
    Ok(pins.iter().find(|p| p.tool == definition.name).cloned())
}

/// What trust and the declaration's overrides decide for `definition`'s tool.
fn policy(decl: &Connection, definition: &RemoteDefinition) -> RemotePolicy {
    let policy = if decl.trusted {
        RemotePolicy::trusted(definition.annotations.as_ref())
    } else {
        RemotePolicy::UNTRUSTED
    };
    match decl.overrides.get(&definition.name) {
        Some(settings) => policy.overridden_by(settings),
        None => policy,
    }
}

/// Runs calls of one remote tool through its connection's current session.
struct LinkInvoker {
    link: Weak<Link>,
    tool: String,
    /// The definition this tool was built from: a call runs only while it is the one the
    /// connection holds, approved.
    digest: String,
}

impl LinkInvoker {
    /// The invoker of `link`'s tool `tool`, built from the definition with `digest`.
    fn new(link: &Arc<Link>, tool: &str, digest: &str) -> LinkInvoker {
        LinkInvoker {
            link: Arc::downgrade(link),
            tool: tool.to_owned(),
            digest: digest.to_owned(),
        }
    }
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
                guard.connection.clone(),
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
            Some(live) => {
                let call = Arc::clone(&live.session).call_tool(self.tool.clone(), input, cx);
                let connection = link.decl.name.clone();
                Box::pin(async move {
                    tokio::select! {
                        biased;
                        result = call => result,
                        () = live.ended.cancelled() => Err(ToolError::with_code(
                            ErrorCode::Unavailable,
                            format!(
                                "`{name}` got no answer: connection `{connection}` ended during the call (its server went away or stopped answering); whether it acted is unknown. The runtime reconnects in the background"
                            ),
                        )),
                    }
                })
            }
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
