//! The runtime's connections as one component: it starts their supervisors, reports their
//! states, pins approved definitions, and holds the tools now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwright_core::{Principal, Registry, Tool, names};

use super::links::{Link, Shared, rebuild};
use super::{ConnectError, Connection, ConnectionState, ConnectionStatus};
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

impl Remote {
    pub(crate) fn new(
        local: Registry,
        connections: Vec<Connection>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        events: broadcast::Sender<Event>,
    ) -> Remote {
        let links = connections.into_iter().map(Link::new).collect();
        Remote {
            shared: Arc::new(Shared::new(local, links, store, clock, events)),
            started: AtomicBool::new(false),
            shutdown: CancellationToken::new(),
        }
    }

    /// The tools now: a snapshot, cheap to take, consistent while held.
    pub(crate) fn registry(&self) -> Registry {
        Registry::clone(&self.shared.current.load())
    }

    /// Adds `tool` (defined at run time) to the tools now, and announces it.
    pub(crate) fn register(&self, tool: Arc<Tool>) -> Result<(), toolwright_core::RegistryError> {
        self.shared.register(tool)
    }

    /// Removes the tool defined at run time named `name`, and announces it; `false` when there
    /// is none.
    pub(crate) fn unregister(&self, name: &str) -> bool {
        self.shared.unregister(name)
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
