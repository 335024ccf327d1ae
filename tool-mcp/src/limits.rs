//! Bounds on what the HTTP server holds: how many MCP sessions are open, in all and per
//! principal, counted over both kinds of session: the sessions of 2025-11-25 clients (rmcp's,
//! with an `Mcp-Session-Id`) and the bindings of 2026-07-28 clients (see `binding.rs`).
//!
//! A [`Slot`] is one open session's place under the caps; dropping it frees the place. The
//! HTTP guard takes a slot before a request may open a session and refuses the request when
//! none is free ([`Refusal`]); [`BoundedSessions`] keeps each rmcp session's slot until rmcp
//! closes the session (a `DELETE`, the idle timeout, the server shutting down).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use toolwright_core::Principal;

/// How many MCP sessions the HTTP server keeps open at once, by default.
pub(crate) const DEFAULT_MAX_SESSIONS: usize = 1_000;
/// How many MCP sessions one principal may keep open at once, by default.
pub(crate) const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 100;
/// How long an MCP session may stay idle before the server closes it, by default.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// What `Retry-After` says when a session is refused, in seconds.
pub(crate) const RETRY_AFTER_SECS: u64 = 5;

/// Whose sessions count together: a principal's identity (authenticator, issuer, type, id),
/// or `None` for requests without a verified principal (they act as the server's own).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Owner(Option<String>);

impl Owner {
    /// The owner of requests that `principal` makes.
    pub(crate) fn of(principal: Option<&Principal>) -> Owner {
        Owner(principal.map(identity))
    }
}

/// A principal's identity as one string: two principals are the same principal when these
/// fields match, whatever their attributes say.
pub(crate) fn identity(principal: &Principal) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{:?}\u{1f}{}",
        principal.authenticator,
        principal.issuer.as_deref().unwrap_or_default(),
        principal.principal_type,
        principal.principal_id
    )
}

/// The caps, and what is open under them.
#[derive(Debug)]
pub(crate) struct Limits {
    max_total: usize,
    max_per_owner: usize,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_owner: HashMap<Owner, usize>,
}

/// Why a new session was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The server holds its maximum of sessions.
    Full {
        /// The global cap.
        max: usize,
    },
    /// This principal holds its maximum of sessions.
    PerPrincipal {
        /// The per-principal cap.
        max: usize,
    },
}

impl Refusal {
    /// `503` when the server is full, `429` when the principal is.
    pub(crate) fn status(self) -> http::StatusCode {
        match self {
            Refusal::Full { .. } => http::StatusCode::SERVICE_UNAVAILABLE,
            Refusal::PerPrincipal { .. } => http::StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// What the client reads.
    pub(crate) fn message(self) -> String {
        match self {
            Refusal::Full { max } => format!(
                "the MCP server has its maximum of {max} open sessions; close a session you no \
                 longer use (HTTP DELETE with its Mcp-Session-Id) or retry after \
                 {RETRY_AFTER_SECS} s"
            ),
            Refusal::PerPrincipal { max } => format!(
                "you have {max} open MCP sessions, the most one principal may have; close a \
                 session you no longer use (HTTP DELETE with its Mcp-Session-Id) or retry after \
                 {RETRY_AFTER_SECS} s"
            ),
        }
    }

    /// The HTTP response: the status, `Retry-After` and the message as plain text.
    pub(crate) fn into_response(self) -> axum::response::Response {
        axum::response::Response::builder()
            .status(self.status())
            .header(http::header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())
            .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(axum::body::Body::from(self.message()))
            .unwrap_or_default()
    }
}

impl Limits {
    /// Caps of `max_total` sessions in all and `max_per_owner` per principal.
    pub(crate) fn new(max_total: usize, max_per_owner: usize) -> Arc<Limits> {
        Arc::new(Limits {
            max_total,
            max_per_owner,
            open: Mutex::new(Open::default()),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for one more session of `owner`, or why there is none.
    pub(crate) fn admit(self: &Arc<Self>, owner: Owner) -> Result<Slot, Refusal> {
        let mut open = self.open();
        if open.total >= self.max_total {
            return Err(Refusal::Full {
                max: self.max_total,
            });
        }
        let mine = open.per_owner.entry(owner.clone()).or_default();
        if *mine >= self.max_per_owner {
            return Err(Refusal::PerPrincipal {
                max: self.max_per_owner,
            });
        }
        *mine += 1;
        open.total += 1;
        Ok(Slot {
            limits: Arc::clone(self),
            owner,
        })
    }

    /// How many sessions are open now.
    pub(crate) fn open_sessions(&self) -> usize {
        self.open().total
    }
}

/// One open session's place under the caps, freed when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    limits: Arc<Limits>,
    owner: Owner,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.limits.open();
        open.total = open.total.saturating_sub(1);
        if let Some(mine) = open.per_owner.get_mut(&self.owner) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                open.per_owner.remove(&self.owner);
            }
        }
    }
}

tokio::task_local! {
    /// The slot the HTTP guard took for a request that opens an rmcp session: rmcp creates the
    /// session within that request's future, and [`BoundedSessions`] takes the slot there.
    pub(crate) static ADMITTED: Mutex<Option<Slot>>;
}

/// rmcp's in-memory session manager, holding each session's [`Slot`] until rmcp closes it.
#[derive(Debug)]
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    limits: Arc<Limits>,
    slots: Arc<Mutex<HashMap<SessionId, Slot>>>,
}

/// Who opened each open rmcp session (its slot's owner), for the guard: a session is its
/// opener's, whatever request names it.
#[derive(Clone, Debug)]
pub(crate) struct SessionOwners(Arc<Mutex<HashMap<SessionId, Slot>>>);

impl SessionOwners {
    /// Whether session `id` is open and was opened by another owner than `owner`.
    pub(crate) fn someone_elses(&self, id: &str, owner: &Owner) -> bool {
        let slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slots.get(id).is_some_and(|slot| slot.owner != *owner)
    }
}

/// Why the session manager failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// No place under the caps (a session opened without the guard's slot).
    #[error("{0}")]
    Refused(String),
}

impl BoundedSessions {
    /// Sessions closed after `idle` without a request, under `limits`.
    pub(crate) fn new(limits: Arc<Limits>, idle: Duration) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        BoundedSessions {
            inner,
            limits,
            slots: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Who opened the sessions, as they open and close.
    pub(crate) fn owners(&self) -> SessionOwners {
        SessionOwners(Arc::clone(&self.slots))
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let admitted = ADMITTED
            .try_with(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).take())
            .ok()
            .flatten();
        let slot = match admitted {
            Some(slot) => slot,
            None => self
                .limits
                .admit(Owner(None))
                .map_err(|refusal| SessionsError::Refused(refusal.message()))?,
        };
        let (id, transport) = self.inner.create_session().await?;
        self.slots().insert(id.clone(), slot);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        // Freed whatever closing said: the session is gone from the manager either way.
        let slot = self.slots().remove(id);
        drop(slot);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_in_all_and_per_owner_and_free_on_drop() {
        let limits = Limits::new(3, 2);
        let alice = Owner::of(Some(&Principal::user("oidc", "alice")));
        let bob = Owner::of(Some(&Principal::user("oidc", "bob")));
        let a1 = limits.admit(alice.clone()).unwrap();
        let _a2 = limits.admit(alice.clone()).unwrap();
        assert_eq!(
            limits.admit(alice.clone()).unwrap_err(),
            Refusal::PerPrincipal { max: 2 }
        );
        let _b1 = limits.admit(bob.clone()).unwrap();
        assert_eq!(
            limits.admit(bob.clone()).unwrap_err(),
            Refusal::Full { max: 3 }
        );
        assert_eq!(limits.open_sessions(), 3);
        drop(a1);
        assert_eq!(limits.open_sessions(), 2);
        let _b2 = limits.admit(bob).unwrap();
        assert_eq!(Refusal::Full { max: 3 }.status(), 503);
        assert_eq!(Refusal::PerPrincipal { max: 2 }.status(), 429);
    }

    #[test]
    fn a_principal_is_its_identity_not_its_attributes() {
        let mut with_role = Principal::user("oidc", "alice");
        with_role
            .attributes
            .insert("role".into(), serde_json::json!("admin"));
        assert_eq!(
            Owner::of(Some(&with_role)),
            Owner::of(Some(&Principal::user("oidc", "alice")))
        );
        assert_ne!(
            Owner::of(Some(&Principal::user("oidc", "alice"))),
            Owner::of(Some(&Principal::user("saml", "alice")))
        );
        assert_ne!(Owner::of(None), Owner::of(Some(&Principal::user("", ""))));
    }
}
