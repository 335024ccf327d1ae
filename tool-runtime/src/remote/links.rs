//! The runtime's connections: each one's state and tools, and the registry they publish (the
//! local tools joined by every connection's).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arc_swap::ArcSwap;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use toolwright_core::{Principal, Registry, RemoteDefinition, RemotePolicy, Tool, names};

use super::invoke::LinkInvoker;
use super::{
    Allow, ConnectError, Connection, ConnectionState, ConnectionStatus, ListChanged, RemoteSession,
};
use crate::event::Event;
use crate::options::Clock;
use crate::record::{DefinitionChange, PinRecord};
use crate::store::{Store, StoreError};

/// The runtime's connections and their supervisors, and the tools now.
pub(crate) struct Remote {
    shared: Arc<Shared>,
    started: AtomicBool,
    shutdown: CancellationToken,
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// What the supervisors share with the runtime.
pub(super) struct Shared {
    /// The registry the runtime was built with.
    local: Registry,
    links: Vec<Arc<Link>>,
    /// The tools now: the local registry joined by the connections' tools. Read once per step
    /// (a snapshot), replaced whole when a connection's list changes.
    current: ArcSwap<Registry>,
    /// Held while a registry is assembled and stored, so that two publishes cannot store in the
    /// wrong order (an older view last).
    publishing: Mutex<()>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
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

pub(super) struct LinkState {
    pub(super) connection: ConnectionState,
    pub(super) session: Option<Arc<dyn RemoteSession>>,
    /// Whether `tools` hold a listing (kept while the server is down).
    pub(super) listed: bool,
    /// The allowed definitions of the last listing, to rebuild after an approval.
    definitions: Vec<RemoteDefinition>,
    pub(super) tools: Vec<Arc<Tool>>,
    unavailable: Vec<(String, String)>,
    /// Changed definitions already announced (tool and digest), so a refresh repeats no event.
    announced: HashSet<(String, String)>,
}

impl Link {
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

impl Remote {
    pub(crate) fn new(
        local: Registry,
        connections: Vec<Connection>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        events: broadcast::Sender<Event>,
    ) -> Remote {
        let links: Vec<Arc<Link>> = connections
            .into_iter()
            .map(|decl| {
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
            })
            .collect();
        Remote {
            shared: Arc::new(Shared {
                current: ArcSwap::from_pointee(local.clone()),
                local,
                links,
                publishing: Mutex::new(()),
                store,
                clock,
                events,
            }),
            started: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
        }
    }

    /// The tools now: a snapshot, cheap to take, consistent while held.
    pub(crate) fn registry(&self) -> Registry {
        Registry::clone(&self.shared.current.load())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.shared.links.is_empty()
    }

    fn link(&self, connection: &str) -> Option<&Arc<Link>> {
        self.shared.links.iter().find(|l| l.decl.name == connection)
    }

    /// Starts every connection's supervisor (once) and waits until each has connected and
    /// listed its tools, or failed its first attempt; fails naming those that failed.
    pub(crate) async fn connect(&self) -> Result<(), ConnectError> {
        if !self.started.swap(true, Ordering::SeqCst) {
            for link in &self.shared.links {
                tokio::spawn(super::supervise::supervise(
                    Arc::clone(link),
                    Arc::clone(&self.shared),
                    self.shutdown.clone(),
                ));
            }
        }
        let waits = self.shared.links.iter().map(|link| {
            let mut settled = link.settled.subscribe();
            async move {
                let _ = settled.wait_for(|done| *done).await;
            }
        });
        futures_util::future::join_all(waits).await;
        let failures: Vec<(String, ConnectionState)> = self
            .shared
            .links
            .iter()
            .filter_map(|link| {
                let state = link.lock().connection.clone();
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
    pub(crate) fn statuses(&self) -> Vec<ConnectionStatus> {
        self.shared
            .links
            .iter()
            .map(|link| {
                let state = link.lock();
                ConnectionStatus {
                    name: link.decl.name.clone(),
                    state: state.connection.clone(),
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

    /// Pins `change.listed` in place of `change.pinned` and publishes the tool again; `by` is
    /// recorded with the pin. Returns whether the change is pinned now.
    pub(crate) async fn approve_change(
        &self,
        change: &DefinitionChange,
        by: Option<Principal>,
    ) -> Result<bool, StoreError> {
        let pin = PinRecord {
            connection: change.connection.clone(),
            tool: change.tool.clone(),
            digest: change.digest.clone(),
            definition: change.listed.clone(),
            approved_by: by,
            pinned_at_ms: self.shared.clock.now_ms(),
        };
        let written = self
            .shared
            .store
            .pin(&pin, Some(&change.pinned.digest()))
            .await?;
        if let Some(link) = self.link(&change.connection) {
            rebuild(link, &self.shared, None).await?;
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
        let Ok(pins) = self.shared.store.pins(remote.connection()).await else {
            return false;
        };
        let current = pins
            .iter()
            .any(|p| p.tool == remote.definition().name && p.digest == remote.digest());
        if !current {
            return false;
        }
        if let Some(link) = self.link(remote.connection()) {
            return rebuild(link, &self.shared, None).await.is_ok();
        }
        false
    }
}

impl Shared {
    /// Replaces the registry with the local tools and every connection's current tools.
    fn publish(&self) {
        let _order = self
            .publishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.current.store(Arc::new(self.assemble()));
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
        self.local.with_remote(tools, unavailable, offline)
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
