//! The engine: everything a runtime shares between its handles and its running work, each part
//! a component with state of its own, reached through named accessors. Its fields are private
//! to this module, so the compiler shows which parts a fn uses.

pub(crate) mod cache;
pub(crate) mod kept;
pub(crate) mod parked;
pub(crate) mod work;

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::broadcast;
use toolwright_core::credentials::{self, TokenError, TokenHolder};
use toolwright_core::{CredentialBroker, ModelBackend, Principal, Registry, Sandbox, Tool};

use crate::call::InputResponse;
use crate::decider::Decider;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::hooks::Hooks;
use crate::options::Options;
use crate::record::{InputRequest, Outcome, RequestKind, SessionRecord, TaskRecord, TurnRecord};
use crate::remote::connections::Remote;
use crate::services::States;
use crate::store::{Claim, Lease, Store, requester_key};
use crate::toolset::Toolsets;
use crate::transition::answer::TokenCheck;
use cache::ResultCache;
use kept::{KeptTurn, KeptTurns};
use parked::ParkedTurns;
use work::WorkTracker;

/// The shared state of one runtime.
pub(crate) struct Engine {
    store: Arc<dyn Store>,
    options: Options,
    events: broadcast::Sender<Event>,
    /// Application state registered on the builder.
    services: Arc<States>,
    sandbox: Option<Arc<dyn Sandbox>>,
    /// The model bodies ask through `ctx.model()`, unless their step brings one: set by the
    /// builder, or once later ([`crate::Runtime::install_model`]).
    model: std::sync::OnceLock<Arc<dyn ModelBackend>>,
    /// The broker of tokens (`RuntimeBuilder::credentials`).
    credentials: Option<Arc<dyn CredentialBroker>>,
    decider: Option<Arc<dyn Decider>>,
    /// The runtime's guardrails and tool preparation.
    hooks: Hooks,
    /// The connections, and the tools now (local and remote).
    remote: Remote,
    /// The toolsets' instructions and context providers.
    toolsets: Toolsets,
    /// Read tools' results shared by the user interface's views.
    cache: ResultCache,
    /// The work running here and its leases.
    work: Arc<WorkTracker>,
    /// Parked turns as the answer path last wrote them.
    parked: ParkedTurns,
    /// Active turns as their last step here left them, with their sessions.
    kept: KeptTurns,
    /// How many calls run at once.
    calls: Arc<tokio::sync::Semaphore>,
    /// Whether some tool's policy (`once` or custom) reads the session's approvals; set again
    /// when such a tool is registered at run time.
    reads_approvals: std::sync::atomic::AtomicBool,
    /// Whether some tool is a `task` or `serve` workflow (else no task can owe a turn anything).
    runs_tasks: bool,
}

/// The parts an engine is built from (see [`crate::RuntimeBuilder::build`]).
pub(crate) struct Parts {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) options: Options,
    pub(crate) events: broadcast::Sender<Event>,
    pub(crate) services: Arc<States>,
    pub(crate) sandbox: Option<Arc<dyn Sandbox>>,
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
    pub(crate) credentials: Option<Arc<dyn CredentialBroker>>,
    pub(crate) decider: Option<Arc<dyn Decider>>,
    pub(crate) hooks: Hooks,
    pub(crate) remote: Remote,
    pub(crate) toolsets: Toolsets,
    pub(crate) cache: ResultCache,
    pub(crate) reads_approvals: bool,
    pub(crate) runs_tasks: bool,
}

impl Engine {
    pub(crate) fn new(parts: Parts) -> Arc<Engine> {
        let work = WorkTracker::new(
            Arc::clone(&parts.store),
            parts.options.instance.clone(),
            parts.options.lease,
        );
        Arc::new(Engine {
            calls: Arc::new(tokio::sync::Semaphore::new(
                parts.options.concurrency.max(1),
            )),
            store: parts.store,
            options: parts.options,
            events: parts.events,
            services: parts.services,
            sandbox: parts.sandbox,
            model: parts
                .model
                .map(std::sync::OnceLock::from)
                .unwrap_or_default(),
            credentials: parts.credentials,
            decider: parts.decider,
            hooks: parts.hooks,
            remote: parts.remote,
            toolsets: parts.toolsets,
            cache: parts.cache,
            work,
            parked: ParkedTurns::default(),
            kept: KeptTurns::default(),
            reads_approvals: std::sync::atomic::AtomicBool::new(parts.reads_approvals),
            runs_tasks: parts.runs_tasks,
        })
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn services(&self) -> &Arc<States> {
        &self.services
    }

    pub(crate) fn sandbox(&self) -> Option<&Arc<dyn Sandbox>> {
        self.sandbox.as_ref()
    }

    /// Adds `tool` (defined at run time) to the tools now.
    pub(crate) fn register_tool(&self, tool: Tool) -> Result<(), RuntimeError> {
        if reads_approvals(&tool) {
            self.reads_approvals
                .store(true, std::sync::atomic::Ordering::Release);
        }
        self.remote
            .register(Arc::new(tool))
            .map_err(RuntimeError::Registry)
    }

    pub(crate) fn credentials(&self) -> Option<&Arc<dyn CredentialBroker>> {
        self.credentials.as_ref()
    }

    /// Whether the responder of `response` holds the token that `tool`'s
    /// `approval(require_auth = ..)` names, asked of the broker now (approval requests only; a
    /// token is never kept).
    pub(crate) async fn token_check(
        &self,
        tool: Option<&Tool>,
        request: &InputRequest,
        response: &InputResponse,
    ) -> TokenCheck {
        let provider = match tool.and_then(|t| t.approval()).and_then(|a| a.require_auth) {
            Some(provider) if request.kind == RequestKind::ToolApproval => provider,
            _ => return TokenCheck::NotRequired,
        };
        let fetched = credentials::fetch(
            self.credentials.as_deref(),
            provider,
            response.principal.as_ref(),
            TokenHolder::Approver,
            self.options.clock.now_ms(),
        )
        .await;
        match fetched {
            Ok(_) => TokenCheck::Held,
            Err(TokenError::AuthorizationRequired(required)) => TokenCheck::Lacking(format!(
                "only a person holding a `{provider}` token may approve this call: {}",
                required.message()
            )),
            Err(TokenError::Unavailable(error)) => TokenCheck::Lacking(format!(
                "the approver's `{provider}` token cannot be checked now ({}); the request stays pending",
                error.message()
            )),
        }
    }

    pub(crate) fn model(&self) -> Option<&Arc<dyn ModelBackend>> {
        self.model.get()
    }

    /// Installs the model bodies ask, unless one is installed already (then it is returned).
    pub(crate) fn install_model(
        &self,
        backend: Arc<dyn ModelBackend>,
    ) -> Result<(), Arc<dyn ModelBackend>> {
        self.model.set(backend)
    }

    pub(crate) fn decider(&self) -> Option<&dyn Decider> {
        self.decider.as_deref()
    }

    pub(crate) fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    pub(crate) fn remote(&self) -> &Remote {
        &self.remote
    }

    pub(crate) fn toolsets(&self) -> &Toolsets {
        &self.toolsets
    }

    pub(crate) fn cache(&self) -> &ResultCache {
        &self.cache
    }

    pub(crate) fn parked(&self) -> &ParkedTurns {
        &self.parked
    }

    pub(crate) fn kept(&self) -> &KeptTurns {
        &self.kept
    }

    pub(crate) fn work(&self) -> &Arc<WorkTracker> {
        &self.work
    }

    /// Whether a task or serve workflow tool exists (else no task can owe a turn a result).
    pub(crate) fn runs_tasks(&self) -> bool {
        self.runs_tasks
    }

    /// The places of the calls that may run at once.
    pub(crate) fn call_slots(&self) -> Arc<tokio::sync::Semaphore> {
        Arc::clone(&self.calls)
    }

    /// A permit to run one call, within [`Options::concurrency`].
    pub(crate) async fn call_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.calls).acquire_owned().await.ok()
    }

    /// [`Engine::call_permit`] at once, when a place is free; `None` when the call must wait.
    pub(crate) fn free_call_permit(&self) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
        match Arc::clone(&self.calls).try_acquire_owned() {
            Ok(permit) => Some(Some(permit)),
            Err(tokio::sync::TryAcquireError::Closed) => Some(None),
            Err(tokio::sync::TryAcquireError::NoPermits) => None,
        }
    }

    /// The tools now: a snapshot, cheap to take, consistent while held.
    pub(crate) fn registry(&self) -> Registry {
        self.remote.registry()
    }

    /// The tool `name` as the registry holds it now, shared.
    pub(crate) fn tool(&self, name: &str) -> Option<Arc<Tool>> {
        find_tool(&self.registry(), name)
    }

    /// The sender events go through (a running call's host sends its own).
    pub(crate) fn events(&self) -> &broadcast::Sender<Event> {
        &self.events
    }

    pub(crate) fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    /// Emits the event `event` makes, made only when somebody listens (an event that clones a
    /// result costs nothing without subscribers).
    pub(crate) fn emit_with(&self, event: impl FnOnce() -> Event) {
        if self.has_subscribers() {
            self.emit(event());
        }
    }

    /// Announces that `requests` of turn `turn_id` were resolved with `outcome`.
    pub(crate) fn emit_resolved(
        &self,
        session_id: &str,
        turn_id: &str,
        requests: Vec<String>,
        outcome: Outcome,
    ) {
        for request_id in requests {
            self.emit(Event::InputResolved {
                session_id: session_id.to_owned(),
                turn_id: turn_id.to_owned(),
                request_id,
                outcome,
            });
        }
    }

    /// Whether anybody listens to events (without subscribers, nothing needs rendering).
    pub(crate) fn has_subscribers(&self) -> bool {
        self.events.receiver_count() > 0
    }

    /// The claim a taking write makes for this instance.
    pub(crate) fn claim_here(&self) -> Claim<'_> {
        Claim::Take {
            owner: &self.options.instance,
            ttl: self.options.lease,
        }
    }

    /// The claim of a write taking over the work of an instance whose lease expired.
    pub(crate) fn take_over(&self) -> Claim<'_> {
        Claim::TakeOver {
            owner: &self.options.instance,
            ttl: self.options.lease,
        }
    }

    /// The turn `id` with its version.
    pub(crate) async fn turn(&self, id: &str) -> Result<(TurnRecord, u64), RuntimeError> {
        self.store
            .turn(id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownTurn(id.to_owned()))
    }

    /// The session `id` with its version.
    pub(crate) async fn session(&self, id: &str) -> Result<(SessionRecord, u64), RuntimeError> {
        self.store
            .session(id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownSession(id.to_owned()))
    }

    /// Turn `turn_id` and its session `session_id` as a step starts from them: the copy its
    /// last step here kept (see [`kept`]) when the store says the turn and the session are
    /// still at the copy's versions, else what the store holds now (both checks in one
    /// [`crate::Store::step_since`], or both reads at once).
    pub(crate) async fn step_records(
        &self,
        turn_id: &str,
        session_id: &str,
    ) -> Result<KeptTurn, RuntimeError> {
        let copy = self
            .kept
            .take(turn_id)
            .filter(|copy| copy.session.id == session_id);
        let Some(copy) = copy else {
            let (turn, session) = tokio::join!(self.turn(turn_id), self.session(session_id));
            let ((turn, version), (session, session_version)) = (turn?, session?);
            return Ok(KeptTurn {
                turn,
                version,
                session,
                session_version,
            });
        };
        let (turn, session) = self
            .store
            .step_since((turn_id, copy.version), (session_id, copy.session_version))
            .await?;
        let (turn, version) = match turn {
            Some((None, _)) => (copy.turn, copy.version),
            Some((Some(turn), version)) => (turn, version),
            None => return Err(RuntimeError::UnknownTurn(turn_id.to_owned())),
        };
        let (session, session_version) = match session {
            Some((None, _)) => (copy.session, copy.session_version),
            Some((Some(session), version)) => (session, version),
            None => return Err(RuntimeError::UnknownSession(session_id.to_owned())),
        };
        Ok(KeptTurn {
            turn,
            version,
            session,
            session_version,
        })
    }

    /// The task `id`.
    pub(crate) async fn task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        self.store
            .task(id)
            .await?
            .map(|(task, _)| task)
            .ok_or_else(|| RuntimeError::UnknownTask(id.to_owned()))
    }

    /// The approval keys remembered in session `session_id` for `requester` (the principal the
    /// calls run for), read only when some tool's policy reads them (`once`, custom).
    pub(crate) async fn approvals(
        &self,
        session_id: &str,
        requester: Option<&Principal>,
    ) -> Result<BTreeSet<String>, RuntimeError> {
        if !self
            .reads_approvals
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(BTreeSet::new());
        }
        let requester = requester_key(requester);
        Ok(self.store.approvals(session_id, &requester).await?)
    }

    /// Changes session `id` with `change` and writes it (again on a concurrent write).
    pub(crate) async fn update_session(
        &self,
        id: &str,
        change: impl Fn(&mut SessionRecord),
    ) -> Result<(), RuntimeError> {
        if crate::store::update_session(&*self.store, id, change).await? {
            Ok(())
        } else {
            Err(RuntimeError::UnknownSession(id.to_owned()))
        }
    }
}

/// Whether `tool`'s policy (`once` or custom) reads the session's approvals.
pub(crate) fn reads_approvals(tool: &Tool) -> bool {
    matches!(
        tool.approval().map(|a| a.request),
        Some(toolwright_core::RequestPolicy::Once | toolwright_core::RequestPolicy::Custom(_))
    )
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("registry", &self.registry())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The claim of a write by the holder of `lease` (a plain write when this process holds none).
pub(crate) fn keeping(lease: Option<&Lease>) -> Claim<'_> {
    lease.map_or(Claim::None, Claim::Keep)
}

/// The tool `name` of `registry`, shared.
pub(crate) fn find_tool(registry: &Registry, name: &str) -> Option<Arc<Tool>> {
    registry
        .index_of(name)
        .map(|index| Arc::clone(&registry.tools()[index]))
}
