//! What an MCP session runs in: a [`Binding`] holds its toolwright session, its current turn and
//! the taint the session has seen, which outlives any one turn.
//!
//! A 2025-11-25 client's session (stdio, or HTTP with an `Mcp-Session-Id`) has a binding of its
//! own. The 2026-07-28 revision has no sessions: every HTTP request stands alone, and a handle
//! the model carried back could be dropped by an injected model. So the HTTP server binds those
//! requests by who sends them: the principal the bearer token authenticates (the server's own
//! without a verifier) and, optionally, the `Toolwright-Session` header, which the host sets per
//! conversation and the model cannot. [`Bindings`] holds them, shared by every request, under
//! the server's session caps and idle timeout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use toolwright_core::Principal;
use toolwright_runtime::Turn;

use crate::limits::{Limits, Owner, Refusal, Slot};
use crate::notify::LogThreshold;

/// The HTTP header a host sets to keep its conversations apart on the 2026-07-28 revision:
/// requests of one principal with the same value (or none) share a toolwright session, its
/// turn and its taint.
pub const SESSION_HEADER: &str = "toolwright-session";

/// The longest `Toolwright-Session` value accepted, in bytes.
pub(crate) const MAX_SESSION_HEADER: usize = 128;

/// The toolwright session and turn an MCP session runs in, and its taint.
pub(crate) struct Binding {
    /// Calls of one MCP session run one at a time in its turn (a turn takes one step at a time).
    pub(crate) state: tokio::sync::Mutex<BindingState>,
    /// The first untrusted tool whose output reached this MCP session: every turn the binding
    /// begins from then on starts tainted by it.
    taint: Mutex<Option<String>>,
    /// When a request last used the binding.
    touched: Mutex<Instant>,
    /// Bound by principal over stateless HTTP: no peer outlives a request, so nothing watches
    /// for list changes.
    pub(crate) stateless: bool,
    /// The lowest level of tools' log lines the client wants (`logging/setLevel`).
    pub(crate) logs: Arc<LogThreshold>,
}

/// What a binding's calls change, one at a time.
#[derive(Default)]
pub(crate) struct BindingState {
    /// Who opened the MCP session (`None`: unauthenticated, e.g. stdio without a principal).
    pub(crate) principal: Option<Option<Principal>>,
    pub(crate) session_id: Option<String>,
    pub(crate) turn: Option<Turn>,
    /// The conditional tools unavailable in this session when it last listed or called.
    pub(crate) unavailable: Vec<String>,
    /// The tools listed when the session last listed (remote tools come and go).
    pub(crate) listed: Vec<String>,
    /// The task telling the client when they change.
    pub(crate) watching: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for BindingState {
    fn drop(&mut self) {
        if let Some(watching) = &self.watching {
            watching.abort();
        }
        // The MCP session is over (closed, its connection gone, or swept idle): its turn ends
        // with it, or the store would keep the turn active, and its session out of retention's
        // reach, forever. A turn that is not active stays as it is (`complete` refuses it): one
        // parked on a person may still be answered in the console, a running step closes on
        // its own, and one owed task results keeps them.
        if let Some(turn) = self.turn.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                if let Err(error) = turn.complete().await {
                    tracing::debug!(turn = turn.id(), %error, "the ended MCP session's turn stays");
                }
            });
        }
    }
}

impl Binding {
    /// A binding with no session yet.
    pub(crate) fn new(stateless: bool) -> Self {
        Binding {
            state: tokio::sync::Mutex::new(BindingState::default()),
            taint: Mutex::new(None),
            touched: Mutex::new(Instant::now()),
            stateless,
            logs: Arc::default(),
        }
    }

    fn taint_lock(&self) -> MutexGuard<'_, Option<String>> {
        self.taint.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The untrusted tool that tainted this MCP session, if any.
    pub(crate) fn taint(&self) -> Option<String> {
        self.taint_lock().clone()
    }

    /// Notes that `source`, an untrusted tool, returned in this MCP session (the first source
    /// is kept).
    pub(crate) fn note_taint(&self, source: &str) {
        self.taint_lock().get_or_insert_with(|| source.to_owned());
    }

    /// Marks the binding as used now.
    pub(crate) fn touch(&self) {
        *self.touched.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn touched(&self) -> Instant {
        *self.touched.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A stateless request's binding, handed from the HTTP guard to the handler through the
/// request's extensions.
#[derive(Clone)]
pub(crate) struct SharedBinding(pub(crate) Arc<Binding>);

/// Which requests share a binding.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BindingKey {
    owner: Owner,
    conversation: Option<String>,
}

impl BindingKey {
    /// The requests of `principal` with `Toolwright-Session: conversation` (or none).
    pub(crate) fn new(principal: Option<&Principal>, conversation: Option<String>) -> Self {
        BindingKey {
            owner: Owner::of(principal),
            conversation,
        }
    }
}

/// The bindings of stateless requests, each holding a place under the session caps; one idle for
/// longer than the idle timeout (and not in use) ends, with its taint.
pub(crate) struct Bindings {
    limits: Arc<Limits>,
    idle: Duration,
    entries: Mutex<HashMap<BindingKey, (Arc<Binding>, Slot)>>,
}

impl Bindings {
    /// Bindings under `limits`, ended after `idle` unused.
    pub(crate) fn new(limits: Arc<Limits>, idle: Duration) -> Self {
        Bindings {
            limits,
            idle,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<BindingKey, (Arc<Binding>, Slot)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The binding of `key`, opening it (and taking a place under the caps) when there is none;
    /// refused when no place is free even after idle bindings ended.
    pub(crate) fn acquire(&self, key: BindingKey) -> Result<Arc<Binding>, Refusal> {
        let mut entries = self.entries();
        if let Some((binding, _)) = entries.get(&key) {
            binding.touch();
            return Ok(Arc::clone(binding));
        }
        let slot = match self.limits.admit(key.owner.clone()) {
            Ok(slot) => slot,
            Err(_) => {
                sweep(&mut entries, Instant::now(), self.idle);
                self.limits.admit(key.owner.clone())?
            }
        };
        let binding = Arc::new(Binding::new(true));
        entries.insert(key, (Arc::clone(&binding), slot));
        Ok(binding)
    }

    /// Ends the bindings idle for the idle timeout at `now` and not in use; returns how many.
    pub(crate) fn sweep(&self, now: Instant) -> usize {
        sweep(&mut self.entries(), now, self.idle)
    }

    /// How many bindings are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }
}

fn sweep(
    entries: &mut HashMap<BindingKey, (Arc<Binding>, Slot)>,
    now: Instant,
    idle: Duration,
) -> usize {
    let before = entries.len();
    entries.retain(|_, (binding, _)| {
        // In use: a request holds it (its calls may wait for a person for a long time).
        Arc::strong_count(binding) > 1 || now.saturating_duration_since(binding.touched()) < idle
    });
    before - entries.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_of_one_principal_and_conversation_share_a_binding_under_the_caps() {
        let limits = Limits::new(10, 2);
        let bindings = Bindings::new(Arc::clone(&limits), Duration::from_secs(60));
        let alice = Principal::user("oidc", "alice");
        let first = bindings
            .acquire(BindingKey::new(Some(&alice), None))
            .unwrap();
        let again = bindings
            .acquire(BindingKey::new(Some(&alice), None))
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        first.note_taint("web.fetch");
        first.note_taint("mail.read");
        assert_eq!(again.taint().as_deref(), Some("web.fetch"));
        // Another conversation of alice's is another binding; a third is over her cap.
        let other = bindings
            .acquire(BindingKey::new(Some(&alice), Some("chat-2".into())))
            .unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other.taint(), None);
        let refused = bindings.acquire(BindingKey::new(Some(&alice), Some("chat-3".into())));
        assert_eq!(refused.err(), Some(Refusal::PerPrincipal { max: 2 }));
        assert_eq!(limits.open_sessions(), 2);
    }

    #[test]
    fn idle_bindings_end_unless_in_use_and_free_their_place() {
        let limits = Limits::new(10, 10);
        let idle = Duration::from_secs(60);
        let bindings = Bindings::new(Arc::clone(&limits), idle);
        let alice = Principal::user("oidc", "alice");
        let held = bindings
            .acquire(BindingKey::new(Some(&alice), Some("held".into())))
            .unwrap();
        drop(
            bindings
                .acquire(BindingKey::new(Some(&alice), Some("idle".into())))
                .unwrap(),
        );
        assert_eq!(bindings.sweep(Instant::now()), 0, "not idle yet");
        let later = Instant::now() + idle;
        assert_eq!(bindings.sweep(later), 1, "the unused one ends");
        assert_eq!(bindings.len(), 1);
        assert_eq!(limits.open_sessions(), 1);
        drop(held);
        assert_eq!(bindings.sweep(later), 1);
        assert_eq!(limits.open_sessions(), 0);
    }

    #[test]
    fn a_full_server_ends_idle_bindings_before_refusing() {
        let limits = Limits::new(1, 1);
        let bindings = Bindings::new(Arc::clone(&limits), Duration::ZERO);
        let alice = Principal::user("oidc", "alice");
        drop(
            bindings
                .acquire(BindingKey::new(Some(&alice), None))
                .unwrap(),
        );
        // Idle (a zero timeout) and unused: it makes room for the next one.
        bindings
            .acquire(BindingKey::new(Some(&alice), Some("next".into())))
            .unwrap();
        assert_eq!(limits.open_sessions(), 1);
    }
}
