//! The recent events of the turns this process runs (a step resumed from the console, a
//! turn of the host the console is mounted in), kept in memory and bounded, for the turn
//! pages' timelines. The store keeps records, not events: a turn run by another process
//! shows its records only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;
use toolwright_runtime::{Event, Runtime};

/// The most turns whose events are kept; the turn seen longest ago goes first.
const MAX_TURNS: usize = 500;
/// The most events kept per turn; the oldest go first.
const MAX_EVENTS: usize = 200;

/// One event with when this process saw it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RecentEvent {
    /// When it was seen, Unix milliseconds.
    pub at_ms: u64,
    /// The event.
    pub event: Event,
}

/// The events kept, per turn.
#[derive(Default)]
pub(crate) struct Recent {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    turns: HashMap<String, VecDeque<RecentEvent>>,
    order: VecDeque<String>,
}

impl Recent {
    fn push(&self, event: Event) {
        let Some(turn) = event.turn_id().map(str::to_owned) else {
            return;
        };
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut kept = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !kept.turns.contains_key(&turn) {
            if kept.order.len() >= MAX_TURNS
                && let Some(oldest) = kept.order.pop_front()
            {
                kept.turns.remove(&oldest);
            }
            kept.order.push_back(turn.clone());
        }
        let events = kept.turns.entry(turn).or_default();
        if events.len() >= MAX_EVENTS {
            events.pop_front();
        }
        events.push_back(RecentEvent { at_ms, event });
    }

    /// The events kept for `turn_id`, oldest first.
    pub(crate) fn of(&self, turn_id: &str) -> Vec<RecentEvent> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .turns
            .get(turn_id)
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Keeps `runtime`'s events in `recent` from now on, on a task of its own (none outside a
/// tokio runtime: the pages then show records only), for as long as the console holds
/// `recent`: a console dropped while its runtime lives frees its events at once, and its task
/// ends with the next event.
pub(crate) fn record(runtime: &Runtime, recent: &Arc<Recent>) {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("the console was built outside a tokio runtime: turn pages show no events");
        return;
    };
    let mut events = runtime.subscribe();
    let recent = Arc::downgrade(recent);
    handle.spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => match recent.upgrade() {
                    Some(recent) => recent.push(event),
                    None => break,
                },
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "the console's event buffer missed events");
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(turn: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "type": "turn.started", "session_id": "s", "turn_id": turn, "caller": "model"
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_dropped_consoles_events_go_with_it() {
        let runtime = Runtime::builder(toolwright_core::Registry::from_tools([]).unwrap())
            .store(toolwright_runtime::SqliteStore::in_memory().unwrap())
            .build()
            .unwrap();
        let recent = Arc::new(Recent::default());
        record(&runtime, &recent);
        let kept = Arc::downgrade(&recent);
        drop(recent);
        assert!(kept.upgrade().is_none(), "the recorder does not keep them");
    }

    #[test]
    fn events_are_kept_per_turn_and_bounded() {
        let recent = Recent::default();
        for _ in 0..MAX_EVENTS + 5 {
            recent.push(started("t1"));
        }
        assert_eq!(recent.of("t1").len(), MAX_EVENTS);
        for n in 0..MAX_TURNS {
            recent.push(started(&format!("other-{n}")));
        }
        assert!(recent.of("t1").is_empty(), "the oldest turn goes first");
        assert_eq!(recent.of("other-0").len(), 1);
    }
}
