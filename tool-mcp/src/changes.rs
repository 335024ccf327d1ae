//! The runtime's events that change what a session may list, relayed to every session's
//! watcher by one task per server.
//!
//! Each MCP session watches for the changes that make its client list again (its session's
//! state, the runtime's connections and registered tools). Subscribed to the runtime's events
//! themselves, every session's watcher woke at every event of every session (each call
//! announces several): with many clients connected, a call's events cost a wake-up per client.
//! The relay receives them once and passes on only the few that matter.

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::AbortHandle;
use toolwright_runtime::{Event, Runtime};

/// A change a session's watcher acts on.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    /// Session `0`'s state changed (its conditional tools may come or go).
    Session(Arc<str>),
    /// The runtime's tools changed (connections, definitions, tools registered at run time).
    Tools,
    /// Events were missed: every watcher lists again.
    Missed,
}

/// How many changes wait for a slow watcher before it is told it missed some.
const CAPACITY: usize = 256;

/// The relay of one server and its clones (one per MCP session), stopped with the last one.
#[derive(Debug)]
pub(crate) struct Changes {
    sender: broadcast::Sender<Change>,
    relay: OnceLock<AbortHandle>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            sender: broadcast::channel(CAPACITY).0,
            relay: OnceLock::new(),
        }
    }
}

impl Changes {
    /// The changes from now on; the first subscriber starts the relay (on the caller's tokio
    /// runtime).
    pub(crate) fn subscribe(&self, runtime: &Runtime) -> broadcast::Receiver<Change> {
        let receiver = self.sender.subscribe();
        self.relay.get_or_init(|| {
            let events = runtime.subscribe();
            tokio::spawn(relay(events, self.sender.clone())).abort_handle()
        });
        receiver
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.get() {
            relay.abort();
        }
    }
}

/// Passes on the changes among `events` until the runtime is gone.
async fn relay(mut events: broadcast::Receiver<Event>, changes: broadcast::Sender<Change>) {
    loop {
        let change = match events.recv().await {
            Ok(Event::SessionChanged { session_id }) => Change::Session(session_id.into()),
            Ok(
                Event::ConnectionChanged { .. }
                | Event::ToolDefinitionChanged { .. }
                | Event::ToolsRegistered { .. },
            ) => Change::Tools,
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => Change::Missed,
            Err(RecvError::Closed) => return,
        };
        // No watcher now is not an error: the next one subscribes to what follows.
        let _ = changes.send(change);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use toolwright_core::ToolError;
    use toolwright_runtime::CallResult;

    use super::*;

    /// The next change within `wait`.
    async fn next_within(
        changes: &mut broadcast::Receiver<Change>,
        wait: Duration,
    ) -> Option<Change> {
        tokio::time::timeout(wait, changes.recv())
            .await
            .ok()
            .map(|change| change.expect("a change"))
    }

    async fn next(changes: &mut broadcast::Receiver<Change>) -> Option<Change> {
        next_within(changes, Duration::from_secs(5)).await
    }

    /// Nothing more within a short wait (the relay runs on the test's own thread, so what it
    /// would pass on is passed on before the wait ends).
    async fn nothing(changes: &mut broadcast::Receiver<Change>) -> bool {
        next_within(changes, Duration::from_millis(200))
            .await
            .is_none()
    }

    #[tokio::test]
    async fn only_what_changes_a_listing_is_passed_on() {
        let (events, receiver) = broadcast::channel(4);
        let (sender, mut changes) = broadcast::channel(CAPACITY);
        let relay = tokio::spawn(relay(receiver, sender));
        let result = Arc::new(CallResult::failed("c1", "t", ToolError::new("no")));
        events
            .send(Event::ActionResult {
                session_id: "s1".into(),
                turn_id: "t1".into(),
                result,
            })
            .unwrap();
        events
            .send(Event::SessionChanged {
                session_id: "s1".into(),
            })
            .unwrap();
        assert!(matches!(next(&mut changes).await, Some(Change::Session(s)) if &*s == "s1"));
        assert!(
            nothing(&mut changes).await,
            "an action's result is not a change"
        );

        // A relay that fell behind says so, and every watcher lists again.
        for _ in 0..6 {
            events
                .send(Event::SessionChanged {
                    session_id: "s2".into(),
                })
                .unwrap();
        }
        assert!(matches!(next(&mut changes).await, Some(Change::Missed)));
        for _ in 0..4 {
            assert!(matches!(next(&mut changes).await, Some(Change::Session(s)) if &*s == "s2"));
        }
        assert!(nothing(&mut changes).await);

        // The runtime gone, the relay ends.
        drop(events);
        tokio::time::timeout(Duration::from_secs(5), relay)
            .await
            .expect("the relay ends")
            .unwrap();
    }
}
