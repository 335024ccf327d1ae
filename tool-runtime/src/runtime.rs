//! The runtime, its builder, sessions and turns.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;
use toolwright_core::{Caller, Effect, Principal, Registry, Sandbox, Tool};

use crate::decider::Decider;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::options::Options;
use crate::record::{Permission, SessionRecord, TurnRecord, TurnStatus};
use crate::services::States;
use crate::store::{Claim, Lease, LeaseKind, SqliteStore, Store, StoreError};

/// The tool `name` of `registry`, shared.
pub(crate) fn find_tool(registry: &Registry, name: &str) -> Option<Arc<Tool>> {
    registry
        .index_of(name)
        .map(|index| Arc::clone(&registry.tools()[index]))
}

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    registry: Registry,
    states: States,
    store: Option<Arc<dyn Store>>,
    decider: Option<Arc<dyn Decider>>,
    options: Options,
    connections: Vec<crate::remote::Connection>,
    sandbox: Option<Arc<dyn Sandbox>>,
    sandbox_approvals: Vec<(&'static str, toolwright_core::ApprovalSpec)>,
    toolsets: Vec<crate::toolset::Toolset>,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("registry", &self.registry)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// Registers application state `T`, reached by `State<T>` parameters and `ctx.state::<T>()`.
    pub fn state<T: Send + Sync + 'static>(mut self, state: T) -> Self {
        self.states.insert(
            TypeId::of::<T>(),
            Arc::new(state) as Arc<dyn Any + Send + Sync>,
        );
        self
    }

    /// The store of sessions, parked turns and approval memory (default: an in-memory SQLite
    /// database, which does not survive the process).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The decider for `approval = auto` (without one, `auto` always asks a person).
    pub fn decider(mut self, decider: impl Decider) -> Self {
        self.decider = Some(Arc::new(decider));
        self
    }

    /// Limits and timeouts.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Installs the sandbox plain and durable tools reach through `ctx.sandbox()`, and offers
    /// the built-in tools `read`, `write`, `edit`, `bash`, `grep` and `glob` over it (`bash` asks
    /// every time, the others never, unless [`RuntimeBuilder::sandbox_approval`] says otherwise;
    /// the session's per-effect permissions apply as to any tool: `write`, `edit` and `bash`
    /// have effect `write`).
    pub fn sandbox(mut self, sandbox: impl Sandbox) -> Self {
        self.sandbox = Some(Arc::new(sandbox));
        self
    }

    /// The request policy of built-in sandbox tool `tool` (`"bash"`, `"write"`, ...), e.g.
    /// `RequestPolicy::Never` for `bash` in a sandbox that is itself isolated. The last setting
    /// of a tool wins; a name that is not a built-in tool is refused when the runtime is built.
    pub fn sandbox_approval(
        mut self,
        tool: &'static str,
        policy: toolwright_core::RequestPolicy,
    ) -> Self {
        self.sandbox_approvals.push((
            tool,
            toolwright_core::ApprovalSpec {
                request: policy,
                prompt: None,
                response: None,
                key: toolwright_core::ApprovalKey::ToolName,
            },
        ));
        self
    }

    /// Declares a connection to a remote server whose allowed tools join the registry as
    /// `<connection>__<tool>` once [`Runtime::connect`] has started it.
    pub fn connection(mut self, connection: crate::remote::Connection) -> Self {
        self.connections.push(connection);
        self
    }

    /// Declares what toolset `toolset.name()` adds to the prompt: instructions for the system
    /// prompt ([`Runtime::instructions`]) and a per-turn context provider ([`Turn::context`]).
    /// The name must be the toolset of some `#[tool]` or a declared connection; checked when
    /// the runtime is built.
    pub fn toolset(mut self, toolset: crate::toolset::Toolset) -> Self {
        self.toolsets.push(toolset);
        self
    }

    /// The runtime. Fails when a tool needs state that was not registered.
    pub fn build(mut self) -> Result<Runtime, RuntimeError> {
        if let Some((tool, _)) = self
            .sandbox_approvals
            .iter()
            .find(|(tool, _)| !["read", "write", "edit", "bash", "grep", "glob"].contains(tool))
        {
            return Err(RuntimeError::Sandbox(format!(
                "`sandbox_approval(\"{tool}\", ...)` names no built-in sandbox tool; they are read, write, edit, bash, grep and glob"
            )));
        }
        if self.sandbox.is_some() {
            self.registry = self
                .registry
                .with_sandbox_tools(&self.sandbox_approvals)
                .map_err(|error| RuntimeError::Sandbox(error.to_string()))?;
        } else if !self.sandbox_approvals.is_empty() {
            return Err(RuntimeError::Sandbox(
                "`sandbox_approval` without a sandbox: install one with `RuntimeBuilder::sandbox`"
                    .into(),
            ));
        }
        // Descriptions computed from host services are computed now, once; the lists built
        // from this registry are cached as any list is.
        self.registry = self
            .registry
            .describe(&toolwright_core::Services::new(&self.states))
            .map_err(RuntimeError::Registry)?;
        for tool in self.registry.tools() {
            for requirement in tool.requirements().iter().flatten() {
                if !self.states.contains_key(&(requirement.type_id)()) {
                    return Err(RuntimeError::MissingState {
                        tool: tool.name().to_owned(),
                        type_name: (requirement.type_name)(),
                    });
                }
            }
        }
        for (i, connection) in self.connections.iter().enumerate() {
            if let Some(problem) = connection.problem(&self.registry, &self.connections[..i]) {
                return Err(RuntimeError::Connection {
                    connection: connection.name().to_owned(),
                    problem,
                });
            }
        }
        let connections: Vec<&str> = self.connections.iter().map(|c| c.name()).collect();
        let audiences: Vec<(&str, [bool; 3])> = self
            .connections
            .iter()
            .map(|c| (c.name(), c.audiences()))
            .collect();
        let toolsets = crate::toolset::Toolsets::new(self.toolsets, &self.registry, &audiences)
            .map_err(RuntimeError::Toolset)?;
        let cache = crate::ui::ResultCache::new(&self.registry, &connections);
        let store = match self.store {
            Some(store) => store,
            None => Arc::new(SqliteStore::in_memory()?),
        };
        let remote = crate::remote::Remote::new(self.registry.clone(), self.connections);
        let (events, _) = broadcast::channel(1024);
        Ok(Runtime(Arc::new(Inner {
            semaphore: Semaphore::new(self.options.concurrency.max(1)),
            // Remote tools default to `once`, and their policies can be overridden at any time.
            reads_approvals: !remote.is_empty()
                || self.registry.tools().iter().any(|t| {
                    matches!(
                        t.approval().map(|a| a.request),
                        Some(
                            toolwright_core::RequestPolicy::Once
                                | toolwright_core::RequestPolicy::Custom(_)
                        )
                    )
                }),
            active: std::sync::Mutex::new(HashMap::new()),
            heartbeat: std::sync::atomic::AtomicBool::new(false),
            runs_tasks: self.registry.tools().iter().any(|t| {
                matches!(
                    t.kind(),
                    toolwright_core::ToolKind::Workflow(
                        toolwright_core::Entry::Task | toolwright_core::Entry::Serve
                    )
                )
            }),
            tasks: std::sync::Mutex::new(HashMap::new()),
            task_changed: tokio::sync::Notify::new(),
            registrations: std::sync::atomic::AtomicU64::new(0),
            registry: arc_swap::ArcSwap::from_pointee(self.registry.clone()),
            remote,
            sandbox: self.sandbox,
            toolsets,
            cache,
            states: Arc::new(self.states),
            store,
            decider: self.decider,
            options: self.options,
            events,
        })))
    }
}

pub(crate) struct Inner {
    /// The tools now: the local registry joined by the connections' tools. Read once per step
    /// (a snapshot), replaced whole when a connection's list changes.
    pub(crate) registry: arc_swap::ArcSwap<Registry>,
    /// Remote connections and their supervisors.
    pub(crate) remote: crate::remote::Remote,
    /// The sandbox the host installed.
    pub(crate) sandbox: Option<Arc<dyn Sandbox>>,
    /// The toolsets' instructions and context providers.
    pub(crate) toolsets: crate::toolset::Toolsets,
    /// Read tools' results shared by the user interface's views.
    pub(crate) cache: crate::ui::ResultCache,
    pub(crate) states: Arc<States>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) decider: Option<Arc<dyn Decider>>,
    pub(crate) options: Options,
    pub(crate) events: broadcast::Sender<Event>,
    pub(crate) semaphore: Semaphore,
    /// Whether some tool's policy (`once` or custom) reads the session's approvals.
    pub(crate) reads_approvals: bool,
    /// Turns whose calls run in this process now: their cancellation tokens, each with the
    /// registration it came from and the lease of the claim.
    pub(crate) active: std::sync::Mutex<HashMap<String, Running>>,
    /// Whether the task renewing this instance's leases was started.
    pub(crate) heartbeat: std::sync::atomic::AtomicBool,
    pub(crate) registrations: std::sync::atomic::AtomicU64,
    /// Whether some tool is a `task` or `serve` workflow (else no task can owe a turn anything).
    pub(crate) runs_tasks: bool,
    /// Workflow tasks whose bodies run in this process now (as for turns).
    pub(crate) tasks: std::sync::Mutex<HashMap<String, Running>>,
    /// Notified whenever this process records something about a task (a result, an end).
    pub(crate) task_changed: tokio::sync::Notify,
}

/// Work running in this process: a turn's calls or a task's body.
pub(crate) struct Running {
    /// Which registration put it there (a later one for the same id replaces it).
    pub(crate) registration: u64,
    /// Fired to cancel the work.
    pub(crate) token: CancellationToken,
    /// The claim it runs under, once the claiming write returned it, with when it was taken.
    pub(crate) lease: Option<(Lease, std::time::Instant)>,
}

/// Removes a turn's token from [`Inner::active`] when its calls are done; only its own
/// registration, never a later one for the same turn.
pub(crate) struct Tracked {
    runtime: Runtime,
    turn_id: String,
    registration: u64,
    token: CancellationToken,
}

impl Tracked {
    /// Records the lease the claiming write took for the tracked turn.
    /// The claiming write won: whatever entry a competing registration left, the turn's calls
    /// now run here under this one.
    pub(crate) fn hold(&self, lease: Option<Lease>) {
        let Some(lease) = lease else { return };
        if let Ok(mut active) = self.runtime.0.active.lock() {
            active.insert(
                self.turn_id.clone(),
                Running {
                    registration: self.registration,
                    token: self.token.clone(),
                    lease: Some((lease, std::time::Instant::now())),
                },
            );
        }
        self.runtime.ensure_heartbeat();
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Ok(mut active) = self.runtime.0.active.lock()
            && active
                .get(&self.turn_id)
                .is_some_and(|r| r.registration == self.registration)
        {
            active.remove(&self.turn_id);
        }
    }
}

/// The tool runtime: built once, cheap to clone.
#[derive(Clone)]
pub struct Runtime(pub(crate) Arc<Inner>);

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("registry", &self.0.registry)
            .field("options", &self.0.options)
            .finish_non_exhaustive()
    }
}

/// How to open a session.
#[derive(Clone, Debug)]
pub struct SessionSpec {
    record: SessionRecord,
}

impl SessionSpec {
    /// A session with id `id`, interactive, with no identities.
    pub fn new(id: impl Into<String>) -> Self {
        SessionSpec {
            record: SessionRecord::new(id),
        }
    }

    /// Who creates the session.
    pub fn initiator(mut self, principal: Principal) -> Self {
        self.record.initiator = Some(principal);
        self
    }

    /// Makes it a subagent session of `parent`.
    pub fn parent(mut self, parent: impl Into<String>) -> Self {
        self.record.parent = Some(parent.into());
        self
    }

    /// A session no person watches (schedules): a call needing approval fails at once.
    pub fn non_interactive(mut self) -> Self {
        self.record.interactive = false;
        self
    }

    /// Sets the permission for `effect`.
    pub fn permission(mut self, effect: Effect, permission: Permission) -> Self {
        self.record.permissions.insert(effect, permission);
        self
    }

    /// Sets a key of the session's persistent state.
    pub fn state(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.record.state.insert(key.into(), value.into());
        self
    }
}
impl Runtime {
    /// A builder over `registry`.
    pub fn builder(registry: Registry) -> RuntimeBuilder {
        RuntimeBuilder {
            registry,
            states: HashMap::new(),
            store: None,
            decider: None,
            options: Options::default(),
            connections: Vec::new(),
            sandbox: None,
            sandbox_approvals: Vec::new(),
            toolsets: Vec::new(),
        }
    }

    /// The tools now: the registry the runtime was built with, joined by the tools of its
    /// connections as they are listed (see [`Runtime::connect`]). A snapshot: cheap to take,
    /// consistent while held.
    pub fn registry(&self) -> Registry {
        Registry::clone(&self.0.registry.load())
    }

    /// The toolsets' instructions for the system prompt of `audience`'s sessions (empty when
    /// no toolset it sees has any): one `## Tools `name__*`` section per toolset, by name.
    /// Rendered once when the runtime is built, so the prompt's prefix stays byte-identical
    /// across turns.
    pub fn instructions(&self, audience: toolwright_core::Audience) -> Arc<str> {
        self.0.toolsets.instructions(audience)
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        &*self.0.store
    }

    /// Every event from now on. A slow subscriber that falls more than 1024 events behind loses
    /// the oldest ones (`RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.0.events.subscribe()
    }

    /// Registers `token` as the cancellation of turn `turn_id`'s running calls until the
    /// returned guard drops.
    pub(crate) fn track(&self, turn_id: &str, token: &CancellationToken) -> Tracked {
        let registration = self
            .0
            .registrations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut active) = self.0.active.lock()
            // Calls running here under a claim keep their entry: a competing claim of the same
            // turn loses its write, and if it wins, `hold` puts its own entry back.
            && active.get(turn_id).is_none_or(|r| r.lease.is_none())
        {
            active.insert(
                turn_id.to_owned(),
                Running {
                    registration,
                    token: token.clone(),
                    lease: None,
                },
            );
        }
        Tracked {
            runtime: self.clone(),
            turn_id: turn_id.to_owned(),
            registration,
            token: token.clone(),
        }
    }

    /// Fires the token of turn `turn_id`'s calls running in this process, if any.
    pub(crate) fn cancel_running(&self, turn_id: &str) {
        if let Ok(active) = self.0.active.lock()
            && let Some(running) = active.get(turn_id)
        {
            running.token.cancel();
        }
    }

    /// The claim a taking write makes for this instance.
    pub(crate) fn take(&self) -> Claim<'_> {
        Claim::Take {
            owner: &self.0.options.instance,
            ttl: self.0.options.lease,
        }
    }

    /// Starts renewing this instance's leases (once per runtime): every third of
    /// [`Options::lease`], one store call extends the leases of the work running here. Work
    /// whose lease another instance took over meanwhile has its token fired (its writes are
    /// fenced anyway); when renewals keep failing for two thirds of the lease, every piece of
    /// leased work here is cancelled, since other instances will soon take it over.
    pub(crate) fn ensure_heartbeat(&self) {
        if self
            .0
            .heartbeat
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let weak = Arc::downgrade(&self.0);
        let every = (self.0.options.lease / 3).max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut renewed_at = std::time::Instant::now();
            loop {
                tokio::time::sleep(every).await;
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                Runtime(inner).renew(&mut renewed_at).await;
            }
        });
    }

    /// The leases of the work running here, with when each was taken.
    fn held_leases(&self) -> Vec<(Lease, std::time::Instant)> {
        let mut held = Vec::new();
        for map in [&self.0.active, &self.0.tasks] {
            if let Ok(running) = map.lock() {
                held.extend(running.values().filter_map(|w| w.lease.clone()));
            }
        }
        held
    }

    /// Fires the token of the work running here under `lease`, if it still does.
    fn cancel_leased(&self, lease: &Lease) {
        let map = match lease.kind {
            LeaseKind::Turn => &self.0.active,
            LeaseKind::Task => &self.0.tasks,
        };
        if let Ok(running) = map.lock()
            && let Some(work) = running.get(&lease.id)
            && work.lease.as_ref().is_some_and(|(l, _)| l == lease)
        {
            work.token.cancel();
        }
    }

    /// One renewal round of [`Runtime::ensure_heartbeat`].
    async fn renew(&self, renewed_at: &mut std::time::Instant) {
        let started = std::time::Instant::now();
        let held = self.held_leases();
        if held.is_empty() {
            *renewed_at = started;
            return;
        }
        let leases: Vec<Lease> = held.iter().map(|(l, _)| l.clone()).collect();
        let lease = self.0.options.lease;
        let renewal = tokio::time::timeout(lease / 3, self.0.store.renew_leases(&leases, lease));
        let renewed = match renewal.await {
            Ok(Ok(renewed)) => renewed,
            failed => {
                let error = match failed {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no answer within {:?}", lease / 3),
                };
                if started.duration_since(*renewed_at) >= lease * 2 / 3 {
                    tracing::error!(
                        "instance `{}` could not renew its leases for {:?} ({error}); other instances may take its work over, so it cancels the work running here",
                        self.0.options.instance,
                        started.duration_since(*renewed_at)
                    );
                    for (lease, _) in &held {
                        self.cancel_leased(lease);
                    }
                } else {
                    tracing::warn!(
                        "renewing the leases of instance `{}` failed: {error}",
                        self.0.options.instance
                    );
                }
                return;
            }
        };
        *renewed_at = started;
        for (lease, since) in held {
            // Claims taken while the renewal ran may be missing from its answer.
            if since >= started || renewed.contains(&lease) {
                continue;
            }
            // Missing: taken over, or the holder's own write just ended the running state.
            // Only the first is a loss.
            let still_running = match lease.kind {
                LeaseKind::Turn => self
                    .0
                    .store
                    .turn(&lease.id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|(t, _)| t.status == TurnStatus::Running),
                LeaseKind::Task => self
                    .0
                    .store
                    .task(&lease.id)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|(t, _)| t.is_leased()),
            };
            if still_running {
                tracing::warn!(
                    "instance `{}` lost its lease on {} `{}` (token {}): another instance took the work over; cancelling it here",
                    self.0.options.instance,
                    lease.kind,
                    lease.id,
                    lease.token
                );
                self.cancel_leased(&lease);
            }
        }
    }

    pub(crate) fn emit(&self, event: Event) {
        let _ = self.0.events.send(event);
    }

    /// Opens session `spec` (creating it, or returning the stored one with the same id).
    pub async fn open_session(&self, spec: SessionSpec) -> Result<Session, RuntimeError> {
        let id = spec.record.id.clone();
        if self.0.store.session(&id).await?.is_none() {
            match self.0.store.put_session(&spec.record, None).await {
                Ok(_) | Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Session {
            runtime: self.clone(),
            id,
        })
    }

    /// The stored session `id`.
    pub async fn session(&self, id: &str) -> Result<Session, RuntimeError> {
        match self.0.store.session(id).await? {
            Some(_) => Ok(Session {
                runtime: self.clone(),
                id: id.to_owned(),
            }),
            None => Err(RuntimeError::UnknownSession(id.to_owned())),
        }
    }

    /// The turn `id`, wherever it was started (e.g. after a restart).
    pub async fn turn(&self, id: &str) -> Result<Turn, RuntimeError> {
        match self.0.store.turn(id).await? {
            Some((record, _)) => Ok(Turn {
                runtime: self.clone(),
                id: record.id,
                session_id: record.session_id,
                token: CancellationToken::new(),
            }),
            None => Err(RuntimeError::UnknownTurn(id.to_owned())),
        }
    }

    /// The ids of parked turns, oldest first.
    pub async fn waiting_turns(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(self.0.store.waiting_turns().await?)
    }

    /// The approval keys remembered in session `id` (what `once` consults).
    pub async fn approvals(&self, session_id: &str) -> Result<BTreeSet<String>, RuntimeError> {
        Ok(self.0.store.approvals(session_id).await?)
    }
}

/// A session handle.
#[derive(Clone, Debug)]
pub struct Session {
    runtime: Runtime,
    id: String,
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Begins a turn in which `current` acts and `caller` issues the calls (a subagent session's
    /// model calls are `Caller::Subagent` whatever is passed). With `Caller::User`, the calls
    /// are `current`'s own actions and ask no approval: use it only for what a person did in
    /// the user interface ([`Session::invoke`] does), never to relay a model's calls.
    pub async fn begin_turn(
        &self,
        current: Option<Principal>,
        caller: Caller,
    ) -> Result<Turn, RuntimeError> {
        self.begin(current, caller, false).await
    }

    /// Begins a turn that asks for structured output (`ends_turn` is ignored in it).
    pub async fn begin_structured_turn(
        &self,
        current: Option<Principal>,
        caller: Caller,
    ) -> Result<Turn, RuntimeError> {
        self.begin(current, caller, true).await
    }

    async fn begin(
        &self,
        current: Option<Principal>,
        caller: Caller,
        structured_output: bool,
    ) -> Result<Turn, RuntimeError> {
        let (session, _) = self
            .runtime
            .0
            .store
            .session(&self.id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownSession(self.id.clone()))?;
        if session.ended {
            return Err(RuntimeError::SessionEnded(self.id.clone()));
        }
        let caller = match caller {
            Caller::Model if session.parent.is_some() => Caller::Subagent,
            other => other,
        };
        let current = match caller {
            Caller::Schedule => Some(current.unwrap_or_else(Principal::app)),
            _ => current,
        };
        let record = TurnRecord::begin(
            crate::ids::new_id("turn"),
            self.id.clone(),
            current,
            caller,
            structured_output,
        );
        self.runtime.0.store.put_turn(&record, None).await?;
        self.runtime.emit(Event::TurnStarted {
            session_id: self.id.clone(),
            turn_id: record.id.clone(),
            caller: record.caller,
            principal: record.current.clone(),
        });
        Ok(Turn {
            runtime: self.runtime.clone(),
            id: record.id,
            session_id: self.id.clone(),
            token: CancellationToken::new(),
        })
    }

    /// Sets the permission for `effect` in this session.
    pub async fn set_permission(
        &self,
        effect: Effect,
        permission: Permission,
    ) -> Result<(), RuntimeError> {
        self.update(|record| {
            record.permissions.insert(effect, permission);
        })
        .await
    }

    /// Sets a key of the session's persistent state (read by `enabled` predicates at the next
    /// step).
    pub async fn set_state(
        &self,
        key: impl Into<String>,
        value: impl Into<Value>,
    ) -> Result<(), RuntimeError> {
        let (key, value) = (key.into(), value.into());
        self.update(move |record| {
            record.state.insert(key.clone(), value.clone());
        })
        .await
    }

    /// Ends the session: it takes no new turns, and its workflow tasks (including idle `serve`
    /// tasks) are cancelled, each body getting its cleanup window. Returns when they have ended.
    pub async fn end(&self) -> Result<(), RuntimeError> {
        self.update(|record| record.ended = true).await?;
        self.runtime.0.cache.forget_session(&self.id);
        let tasks = self.runtime.tasks(&self.id).await?;
        let cancels = tasks
            .iter()
            .filter(|t| !t.status.is_over())
            .map(|t| self.runtime.cancel_task(&t.id));
        for result in futures_util::future::join_all(cancels).await {
            result?;
        }
        Ok(())
    }

    async fn update(&self, change: impl Fn(&mut SessionRecord)) -> Result<(), RuntimeError> {
        loop {
            let (mut record, version) = self
                .runtime
                .0
                .store
                .session(&self.id)
                .await?
                .ok_or_else(|| RuntimeError::UnknownSession(self.id.clone()))?;
            change(&mut record);
            match self
                .runtime
                .0
                .store
                .put_session(&record, Some(version))
                .await
            {
                Ok(_) => {
                    self.runtime.emit(Event::SessionChanged {
                        session_id: self.id.clone(),
                    });
                    return Ok(());
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// A turn handle. The turn itself lives in the store: a handle can be dropped while the turn is
/// parked, and [`Runtime::turn`] gives a new one, in this process or another.
#[derive(Clone, Debug)]
pub struct Turn {
    pub(crate) runtime: Runtime,
    pub(crate) id: String,
    pub(crate) session_id: String,
    pub(crate) token: CancellationToken,
}

impl Turn {
    /// The turn id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The results of the last step that closed, as stored with the close: what a host restarted
    /// after a step (or a resumption, or `wake_due`) hands to the model.
    pub async fn last_results(&self) -> Result<Option<crate::record::ClosedStep>, RuntimeError> {
        Ok(self.record().await?.last_step)
    }

    /// What the toolsets' context providers say about `query`, the message this turn answers:
    /// call it before sending the model the turn's first request and send
    /// [`TurnContext::render`](crate::toolset::TurnContext::render) beside the message (it is
    /// marked as data). Providers run at once, each given the query, the session's state, the
    /// acting principal and the host's services; one that does not answer within
    /// [`Options::context_deadline`], fails or panics is skipped, logged and reported as a
    /// `warning` event, never failing the turn.
    pub async fn context(&self, query: &str) -> Result<crate::toolset::TurnContext, RuntimeError> {
        let inner = &self.runtime.0;
        if !inner.toolsets.has_context() {
            return Ok(Default::default());
        }
        let turn = self.record().await?;
        let (session, _) = inner
            .store
            .session(&self.session_id)
            .await?
            .ok_or_else(|| RuntimeError::UnknownSession(self.session_id.clone()))?;
        let request = crate::toolset::ContextRequest::new(
            query,
            &self.session_id,
            turn.current.clone(),
            session.state,
            Arc::clone(&inner.states),
        );
        let context = inner
            .toolsets
            .context(
                toolwright_core::Audience::of(turn.caller),
                request,
                inner.options.context_deadline,
            )
            .await;
        for skipped in &context.skipped {
            tracing::warn!(
                session = %self.session_id,
                turn = %self.id,
                toolset = %skipped.toolset,
                "context provider skipped: {}",
                skipped.reason
            );
            self.runtime.emit(Event::Warning {
                session_id: self.session_id.clone(),
                turn_id: self.id.clone(),
                call_id: None,
                message: format!(
                    "the context provider of toolset `{}` was skipped this turn: {}",
                    skipped.toolset, skipped.reason
                ),
            });
        }
        Ok(context)
    }

    /// The stored record.
    pub async fn record(&self) -> Result<TurnRecord, RuntimeError> {
        self.runtime
            .0
            .store
            .turn(&self.id)
            .await?
            .map(|(record, _)| record)
            .ok_or_else(|| RuntimeError::UnknownTurn(self.id.clone()))
    }
}
