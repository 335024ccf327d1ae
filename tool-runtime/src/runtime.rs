//! The runtime handle, built once and cheap to clone, whose methods delegate to the engine's
//! components and the behaviour modules; and its builder, which checks everything once.

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwright_core::{
    Audience, Catalog, CredentialBroker, DynamicTool, Entry, ModelBackend, ModelOutput, Principal,
    Registry, RequestPolicy, Sandbox, Services, Tool, ToolKind,
};

use crate::attachments::{self, Attachment};
use crate::call::{InputResponse, RespondOutcome, StepOptions, StepOutcome};
use crate::decider::Decider;
use crate::engine::cache::ResultCache;
use crate::engine::{Engine, Parts};
use crate::error::RuntimeError;
use crate::event::Event;
use crate::options::Options;
use crate::record::{DefinitionChange, TaskRecord};
use crate::remote::connections::Remote;
use crate::remote::{ConnectError, Connection, ConnectionStatus};
use crate::retention::Swept;
use crate::services::States;
use crate::session::{Session, SessionSpec};
use crate::store::{Store, StoreError};
use crate::toolset::{Toolset, Toolsets};
use crate::turn::Turn;

/// The tool runtime: built once, cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    engine: Arc<Engine>,
}

/// A [`Runtime`] that does not keep it alive ([`Runtime::downgrade`]): for what the runtime
/// itself holds (an installed model backend that drives the runtime's own sessions), so that
/// the two do not keep each other alive.
#[derive(Clone)]
pub struct WeakRuntime {
    engine: std::sync::Weak<Engine>,
}

impl std::fmt::Debug for WeakRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakRuntime")
            .field("alive", &(self.engine.strong_count() > 0))
            .finish()
    }
}

impl WeakRuntime {
    /// The runtime, while some [`Runtime`] handle still keeps it.
    pub fn upgrade(&self) -> Option<Runtime> {
        self.engine.upgrade().map(|engine| Runtime { engine })
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.engine, f)
    }
}

impl Runtime {
    /// A builder over `registry`. Give it a store ([`RuntimeBuilder::store`]) before
    /// [`RuntimeBuilder::build`]: there is no default.
    pub fn builder(registry: Registry) -> RuntimeBuilder {
        RuntimeBuilder::new(registry)
    }

    /// The tools now: the registry the runtime was built with, joined by the tools of its
    /// connections as they are listed (see [`Runtime::connect`]). A snapshot: cheap to take,
    /// consistent while held.
    pub fn registry(&self) -> Registry {
        self.engine.registry()
    }

    /// The tools `audience` may use now (remote connections' included), described for people
    /// reading `locale`: see [`Registry::catalog`]. Shared until the tools change.
    pub fn catalog(&self, audience: Audience, locale: &str) -> Arc<Catalog> {
        self.registry().catalog(audience, locale)
    }

    /// The toolsets' instructions for the system prompt of `audience`'s sessions (empty when
    /// no toolset it sees has any): one `## Tools `name__*`` section per toolset, by name.
    /// Rendered once when the runtime is built, so the prompt's prefix stays byte-identical
    /// across turns.
    pub fn instructions(&self, audience: Audience) -> Arc<str> {
        self.engine.toolsets().instructions(audience)
    }

    /// `arguments` (JSON text) of a call of tool `name` in session `session`, as a host keeps
    /// them in its history: the values the tool's schema marks sensitive sealed with
    /// [`Options::sealing`] (`{"$sealed": "..."}`, bound to the tool and the session),
    /// everything else as it was; the input of a tool this runtime does not know now (its
    /// connection down) sealed whole. A later call of the tool in the session with these
    /// arguments (the model repeating them, or calls run from stored history) has them opened
    /// before validation. Arguments of tools without sensitive input come back unchanged. The
    /// model loop stores the model's calls this way.
    pub fn seal_arguments(&self, session: &str, name: &str, arguments: &str) -> String {
        let sealing = &self.engine.options().sealing;
        crate::sealing::seal_arguments(&self.registry(), sealing, session, name, arguments)
    }

    /// The store.
    pub fn store(&self) -> &dyn Store {
        &**self.engine.store()
    }

    /// Every event from now on. A slow subscriber that falls more than 1024 events behind loses
    /// the oldest ones (`RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.engine.events().subscribe()
    }

    /// Opens session `spec` (creating it, or returning the stored one with the same id).
    pub async fn open_session(&self, spec: SessionSpec) -> Result<Session, RuntimeError> {
        let record = spec.into_record()?;
        let store = self.engine.store();
        if store.session(&record.id).await?.is_none() {
            match store.put_session(&record, None).await {
                Ok(_) | Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Session::new(Arc::clone(&self.engine), record.id))
    }

    /// The stored session `id`.
    pub async fn session(&self, id: &str) -> Result<Session, RuntimeError> {
        self.engine.session(id).await?;
        Ok(Session::new(Arc::clone(&self.engine), id.to_owned()))
    }

    /// The turn `id`, wherever it was started (e.g. after a restart).
    pub async fn turn(&self, id: &str) -> Result<Turn, RuntimeError> {
        let (record, _) = self.engine.turn(id).await?;
        Ok(Turn::new(
            Arc::clone(&self.engine),
            record.id,
            record.session_id,
            CancellationToken::new(),
        ))
    }

    /// The attachment `id` of session `session_id` (see [`Session::attachment`]), without
    /// opening the session first.
    pub async fn attachment(
        &self,
        session_id: &str,
        id: &str,
    ) -> Result<Option<Attachment>, RuntimeError> {
        attachments::load(&self.engine, session_id, id).await
    }

    /// `output` of a call in session `session_id` with its attachments put back as file parts
    /// (see [`Session::resolve_attachments`]), without opening the session first.
    pub async fn resolve_attachments(&self, session_id: &str, output: &ModelOutput) -> ModelOutput {
        attachments::resolve(&self.engine, session_id, output).await
    }

    /// Deletes what finished work left behind, by the runtime's retention
    /// ([`Options::retention`](crate::Options::retention)), now: finished turns past their time
    /// or count, then idle sessions whole, in batches. Nothing a parked or running turn, task or
    /// timer needs is deleted. [`Runtime::run_worker`] calls it every `Retention::every`.
    pub async fn sweep(&self) -> Result<Swept, RuntimeError> {
        crate::retention::sweep(&self.engine, &self.engine.options().retention).await
    }

    /// The ids of parked turns, oldest first.
    pub async fn waiting_turns(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(self.engine.store().waiting_turns().await?)
    }

    /// The approval keys remembered in session `session_id` for `requester` (what `once`
    /// consults for the calls made on `requester`'s behalf; `None`: calls made on behalf of
    /// nobody in particular). A grant belongs to the person whose call was approved: one
    /// person's consent never covers another person's call.
    pub async fn approvals(
        &self,
        session_id: &str,
        requester: Option<&Principal>,
    ) -> Result<BTreeSet<String>, RuntimeError> {
        let requester = crate::store::requester_key(requester);
        Ok(self
            .engine
            .store()
            .approvals(session_id, &requester)
            .await?)
    }

    /// Answers an input request. The first valid answer wins: later ones are dropped. A response
    /// policy may reject an answer, which leaves the request pending for another approver. When
    /// the last pending request of the step settles, the step resumes here and its approved
    /// calls run (exactly once: the turn is claimed in the store first).
    pub async fn respond(&self, response: InputResponse) -> Result<RespondOutcome, RuntimeError> {
        crate::input::settle::respond(&self.engine, response, StepOptions::new()).await
    }

    /// Whether [`Runtime::respond`] would take `response` from its principal, asked without
    /// answering and recording nothing: the request is pending and a person's to answer (not
    /// a hook's wait), and the tool's response policy (or, without one, only the requester)
    /// and, for an approval, the token `require_auth` names allow this principal's decision.
    /// The answer itself (a question's option or text, a form's fields) is not looked at.
    /// [`ResponseVerdict::Rejected`](toolwright_core::ResponseVerdict::Rejected) says why not,
    /// as `respond` would, or that the request is no longer pending; an id no turn or task
    /// holds is [`RuntimeError::UnknownRequest`]. For a console or an inbox: show a request's
    /// input to those who may answer it, and its tool, status and requester to the others.
    /// The answer can still be refused when it comes (another answer may win first).
    pub async fn may_respond(
        &self,
        response: &InputResponse,
    ) -> Result<toolwright_core::ResponseVerdict, RuntimeError> {
        crate::input::may::may_respond(&self.engine, response).await
    }

    /// Delivers `payload` to the hook with `token` (made by a workflow body's `ctx.hook` or
    /// `ctx.webhook`), from any process on the same store, and waits until the run took it:
    /// the payload is checked against the hook's schema, recorded once (a second delivery is
    /// refused with [`HookRefused::Delivered`](crate::HookRefused::Delivered)), and the wait
    /// it settles resumes the run (a turn's step runs here, as with [`Runtime::respond`]; a
    /// task runs again on a task of its own). A body that does not wait on the hook yet finds
    /// the payload when it does ([`HookDelivery::outcome`](crate::HookDelivery::outcome) is then `None`).
    ///
    /// Refusals are [`RuntimeError::Hook`]: an unknown token, a second delivery, a payload
    /// the schema refuses, or a run that has ended. Nothing is recorded then.
    pub async fn resume_hook(
        &self,
        token: &str,
        payload: serde_json::Value,
    ) -> Result<crate::HookDelivery, RuntimeError> {
        crate::input::hook::deliver(&self.engine, token, payload, true).await
    }

    /// [`Runtime::resume_hook`] that returns once the delivery is recorded and wakes the run
    /// in the background: what an HTTP route answering an outside system wants (its
    /// response does not wait for the workflow to run on). The webhook route uses it.
    pub async fn deliver_hook(
        &self,
        token: &str,
        payload: serde_json::Value,
    ) -> Result<crate::HookDelivery, RuntimeError> {
        crate::input::hook::deliver(&self.engine, token, payload, false).await
    }

    /// Registers a tool defined from data ([`DynamicTool`]) on the running runtime: it goes
    /// through the same validation, policies, events and exports as a `#[tool]`, from the next
    /// step on. Each session's model is told `New tool available: ..` at its next step, and
    /// MCP clients are told to list again ([`Event::ToolsRegistered`]).
    ///
    /// Fails, with every problem found, when the definition breaks a rule `#[tool]` checks at
    /// compile time (a schema that does not compile, a `money` tool without a stated policy),
    /// or when its name is taken (a tool of this program, of a connection, or one registered
    /// before: unregister that first).
    ///
    /// Tools defined at run time are not stored: a process that registers a tool registers it
    /// again when it starts, before it resumes parked turns that may call it.
    pub fn register_tool(&self, tool: DynamicTool) -> Result<(), RuntimeError> {
        self.engine.register_tool(Tool::dynamic(tool)?)
    }

    /// Unregisters the tool defined at run time named `name`; `false` when there is none (tools
    /// of `#[tool]` and of connections cannot be unregistered). Calls already running finish;
    /// later calls of it fail as calls of an unknown tool, and each session's model is told
    /// `Tool no longer available: ..` at its next step.
    pub fn unregister_tool(&self, name: &str) -> bool {
        self.engine.remote().unregister(name)
    }

    /// A handle that does not keep the runtime alive.
    pub fn downgrade(&self) -> WeakRuntime {
        WeakRuntime {
            engine: Arc::downgrade(&self.engine),
        }
    }

    /// Installs the model tools ask through `ctx.model()` after the runtime was built (for a
    /// backend that needs the runtime, like the model loop's subagents: hold a
    /// [`WeakRuntime`] in it). Refused with [`RuntimeError::ModelInstalled`] when one is
    /// installed already ([`RuntimeBuilder::model`], or an earlier call).
    pub fn install_model(&self, backend: impl ModelBackend) -> Result<(), RuntimeError> {
        self.engine
            .install_model(Arc::new(backend))
            .map_err(|_| RuntimeError::ModelInstalled)
    }

    /// Whether a model is installed on the runtime ([`RuntimeBuilder::model`]): what
    /// `ctx.model()` asks when a step brings none.
    pub fn has_model(&self) -> bool {
        self.engine.model().is_some()
    }

    /// [`Runtime::respond`], with `options` for the calls the answer resumes (see
    /// [`StepOptions`]): a transport that carries the answer in a request of the client whose
    /// model the calls should ask.
    pub async fn respond_with(
        &self,
        response: InputResponse,
        options: StepOptions,
    ) -> Result<RespondOutcome, RuntimeError> {
        crate::input::settle::respond(&self.engine, response, options).await
    }

    /// Starts every declared connection at once and waits until each has connected and listed
    /// its tools, or failed its first attempt. Connections stay up for the life of the runtime:
    /// their lists are refreshed when the server says they changed, and a server that goes away
    /// is reconnected with backoff (its tools stay listed; their calls fail meanwhile).
    ///
    /// Fails, naming each, when a connection's first attempt failed:
    /// [`ConnectionState::Refused`](crate::remote::ConnectionState::Refused) for a declaration
    /// that does not fit the server (an allowed tool it does not expose; never retried),
    /// [`ConnectionState::Down`](crate::remote::ConnectionState::Down) otherwise (retried in the
    /// background). Calling it again waits for the current attempts without starting anything
    /// twice.
    pub async fn connect(&self) -> Result<(), ConnectError> {
        self.engine.remote().connect().await
    }

    /// Each declared connection: its state and its tools.
    pub fn connections(&self) -> Vec<ConnectionStatus> {
        self.engine.remote().statuses()
    }

    /// The definition change of withheld tool `name` (`<connection>__<tool>`), for a user
    /// interface that reviews changes outside any turn.
    pub fn definition_change(&self, name: &str) -> Option<DefinitionChange> {
        self.registry()
            .get(name)
            .and_then(crate::remote::definition_change)
    }

    /// Approves the definition the server of withheld tool `name` lists now, for every session:
    /// the tool is listed and callable again. `by` is recorded with the pin. Returns `false`
    /// when the tool is not withheld (any more).
    pub async fn approve_definition(
        &self,
        name: &str,
        by: Option<Principal>,
    ) -> Result<bool, RuntimeError> {
        let Some(change) = self.definition_change(name) else {
            return Ok(false);
        };
        Ok(self.engine.remote().approve_change(&change, by).await?)
    }

    /// The task `id`.
    pub async fn task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        self.engine.task(id).await
    }

    /// The tasks of session `session_id`, oldest first.
    pub async fn tasks(&self, session_id: &str) -> Result<Vec<TaskRecord>, RuntimeError> {
        crate::task::results::tasks(&self.engine, session_id).await
    }

    /// Cancels, on their own, the calls with id `call_id` that `serve` task `id` has not
    /// answered yet: each gets a `CANCELLED` result at once (delivered to its turn like any
    /// result), the body sees the call cancelled (`ServeCall::is_cancelled`, at once when it
    /// runs in this process, else when it next replays) and its reply is dropped, and the task
    /// keeps serving the next calls. Cancelling the turn that made a call does the same for
    /// that turn's calls. Returns how many calls were cancelled (0 when none waited, and for a
    /// `workflow = task` task, which is cancelled whole with [`Runtime::cancel_task`]).
    pub async fn cancel_task_call(&self, id: &str, call_id: &str) -> Result<usize, RuntimeError> {
        crate::task::results::cancel_task_calls(&self.engine, id, Some(call_id), None).await
    }

    /// Cancels task `id`: its body's token fires and the body gets up to
    /// [`crate::Options::task_cleanup`] to run its cleanup (a parked body is run again for it,
    /// with every wait returning at once: `ask` answers `cancelled`, `sleep` fails, a `serve`
    /// body's `next` returns `None`). Its pending questions are revoked and calls still waiting
    /// for a result fail with `CANCELLED`. Returns the task as it is after the cleanup (or when
    /// the window has passed, if another process runs it).
    pub async fn cancel_task(&self, id: &str) -> Result<TaskRecord, RuntimeError> {
        crate::task::results::cancel_task(&self.engine, id).await
    }

    /// Settles turns left `running` by a process that stopped while their calls ran. A `durable`
    /// call runs again from its journal: steps it recorded return their values without running,
    /// and it continues at the first unrecorded step. Any other interrupted call ends with a
    /// `RESULT_UNKNOWN` error (it is never run again, since its side effects may have happened).
    /// Each turn becomes active again so the model can decide what to do. Returns the recovered
    /// turns with the outcome of their step.
    ///
    /// Workflow tasks left `running` (or `cancelling`) run again from their journals, on tasks
    /// of their own. Runs waiting on a hook whose delivery was recorded by a process that
    /// stopped before it woke them are woken (this reads every waiting turn and open task).
    ///
    /// Call it at startup when this process is the only one using the store. It takes every
    /// running piece of work over whatever its lease says, so with several instances on one
    /// database it would settle calls still running on a sibling: there, use
    /// [`Runtime::run_worker`] (or [`Runtime::take_over_expired`]), which waits for leases to
    /// expire.
    pub async fn recover(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        crate::recovery::recover(&self.engine).await
    }

    /// Takes over the running work of instances that stopped renewing their leases (killed,
    /// frozen, cut off from the database) and finishes it as [`Runtime::recover`] does: a
    /// `durable` call runs again from its journal, any other interrupted call ends with
    /// `RESULT_UNKNOWN`, tasks run again from their journals. Work whose lease is still live is
    /// left to its holder, so this is safe to call while other instances run; each piece of
    /// work is taken over by exactly one instance (the claim is a versioned write), and the
    /// former holder's later writes are refused ([`crate::StoreError::Fenced`]).
    ///
    /// [`Runtime::run_worker`] calls it periodically. Returns the turns taken over with the
    /// outcome of their step.
    pub async fn take_over_expired(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        crate::recovery::take_over_expired(&self.engine).await
    }

    /// Wakes workflow calls whose durable sleep is over (by [`crate::Options::clock`]): each runs
    /// again, replaying its journal past the sleep. Returns the turns whose step went on.
    ///
    /// Timers live in the store, so they fire after a restart too; run this periodically (see
    /// [`Runtime::run_timers`]).
    ///
    /// Workflow tasks whose sleep is over run again too, on tasks of their own (their results
    /// arrive as `task.result` events and through [`crate::Turn::task_results`]).
    pub async fn wake_due(&self) -> Result<Vec<(String, StepOutcome)>, RuntimeError> {
        crate::recovery::wake_due(&self.engine).await
    }

    /// Calls [`Runtime::wake_due`] every `every` on a task of its own, until the returned handle
    /// is aborted. One task serves every sleeping run; a sleeping run itself holds none.
    pub fn run_timers(&self, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let runtime = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            loop {
                interval.tick().await;
                if let Err(error) = runtime.wake_due().await {
                    tracing::warn!("waking due timers failed: {error}");
                }
            }
        })
    }

    /// Runs this instance's share of the work several instances on one database share, on a
    /// task of its own until the returned handle is aborted:
    ///
    /// - takes over running work whose lease expired ([`Runtime::take_over_expired`]), so the
    ///   work of an instance that died or froze is finished by another;
    /// - wakes durable timers that are due ([`Runtime::wake_due`]);
    /// - renews this instance's leases (every third of [`crate::Options::lease`]).
    ///
    /// It looks for expired leases every `poll` (a lease expires with time, not with a write:
    /// work is taken over at most `lease` + `poll` after its holder last renewed it). It looks
    /// for due timers every `poll`, and earlier when the store says one may have come due
    /// ([`crate::Store::changed_since`]: on Postgres a write that sets a wake-up time announces it
    /// with `NOTIFY`, and the worker looks when that time comes), so nothing depends on a
    /// notification arriving. With one instance it replaces [`Runtime::run_timers`].
    pub fn run_worker(&self, poll: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let runtime = self.clone();
        runtime.engine.work().ensure_heartbeat();
        tokio::spawn(async move {
            // Two loops, so that a long take-over (a durable call running again) does not hold
            // up due timers, nor the other way round.
            let take_over = async {
                loop {
                    if let Err(error) = runtime.take_over_expired().await {
                        tracing::warn!("taking over expired work failed: {error}");
                    }
                    // No write makes a lease expire: a notification would only bring the scan
                    // forward to find nothing.
                    tokio::time::sleep(poll).await;
                }
            };
            let timers = async {
                // Taken before the first look: a time that comes while the worker looks ends
                // its next wait at once.
                let mut mark = runtime.engine.store().change_mark();
                loop {
                    if let Err(error) = runtime.wake_due().await {
                        tracing::warn!("waking due timers failed: {error}");
                    }
                    runtime.engine.store().changed_since(&mut mark, poll).await;
                }
            };
            // A third, when a retention rule is set: a sweep at start, then every `every`.
            let retention = async {
                let policy = runtime.engine.options().retention.clone();
                if !policy.is_set() {
                    return std::future::pending::<()>().await;
                }
                loop {
                    if let Err(error) = runtime.sweep().await {
                        tracing::warn!("sweeping finished work failed: {error}");
                    }
                    tokio::time::sleep(policy.every.max(MIN_SWEEP_INTERVAL)).await;
                }
            };
            tokio::join!(take_over, timers, retention);
        })
    }
}

/// The shortest time between two sweeps of the worker, whatever `Retention::every` says.
const MIN_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// The built-in sandbox tools, whose policies `sandbox_approval` may set.
const SANDBOX_TOOLS: [&str; 6] = ["read", "write", "edit", "bash", "grep", "glob"];

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    registry: Registry,
    states: States,
    store: Option<Arc<dyn Store>>,
    decider: Option<Arc<dyn Decider>>,
    hooks: crate::hooks::Hooks,
    options: Options,
    connections: Vec<Connection>,
    sandbox: Option<Arc<dyn Sandbox>>,
    sandbox_approvals: Vec<(&'static str, toolwright_core::ApprovalSpec)>,
    toolsets: Vec<Toolset>,
    model: Option<Arc<dyn ModelBackend>>,
    credentials: Option<Arc<dyn CredentialBroker>>,
    dynamic: Vec<DynamicTool>,
    default_locale: Option<String>,
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
    /// A builder over `registry`, with nothing else set.
    pub(crate) fn new(registry: Registry) -> Self {
        RuntimeBuilder {
            registry,
            states: HashMap::new(),
            store: None,
            decider: None,
            hooks: Default::default(),
            options: Options::default(),
            connections: Vec::new(),
            sandbox: None,
            sandbox_approvals: Vec::new(),
            toolsets: Vec::new(),
            model: None,
            credentials: None,
            dynamic: Vec::new(),
            default_locale: None,
        }
    }

    /// The locale the tools' own `title` and `summary` are written in (a BCP 47 tag; default
    /// the registry's, `"en"` unless [`Registry::with_default_locale`] set it): what
    /// [`Registry::with_default_locale`] does, for the registry the runtime serves, remote
    /// tools included. [`RuntimeBuilder::build`] fails when it is not a language tag.
    pub fn default_locale(mut self, locale: impl Into<String>) -> Self {
        self.default_locale = Some(locale.into());
        self
    }

    /// The URL the host serves webhooks at (where it mounts the webhook route, e.g.
    /// `https://api.example.com/hooks`): a workflow body's `ctx.webhook(..)` gets this URL
    /// with its token appended. Without it, `ctx.webhook` fails and `ctx.hook` still works.
    /// Sets [`Options::webhook_url`]; [`RuntimeBuilder::build`] refuses a URL that is not
    /// `http` or `https`.
    pub fn webhook_url(mut self, url: impl Into<String>) -> Self {
        self.options.webhook_url = Some(url.into());
        self
    }

    /// The broker that hands out tokens of connected services: `ctx.token("github")` asks it
    /// for the acting principal's, `ctx.approver_token(..)` for the approver's, and
    /// `approval(require_auth = "github")` checks with it that an approver holds one. Tokens
    /// are never recorded, sent in events or shown in prompts. Without a broker, those calls
    /// fail saying to install one.
    pub fn credentials(mut self, broker: impl CredentialBroker) -> Self {
        self.credentials = Some(Arc::new(broker));
        self
    }

    /// Adds a tool defined from data ([`DynamicTool`]): checked when the runtime is built
    /// ([`RuntimeBuilder::build`] fails with every problem found), then treated as a `#[tool]`
    /// is; see [`Runtime::register_tool`] to add one to a running runtime.
    pub fn tool(mut self, tool: DynamicTool) -> Self {
        self.dynamic.push(tool);
        self
    }

    /// Registers application state `T`, reached by `State<T>` parameters and `ctx.state::<T>()`.
    pub fn state<T: Send + Sync + 'static>(mut self, state: T) -> Self {
        self.states.insert(
            TypeId::of::<T>(),
            Arc::new(state) as Arc<dyn Any + Send + Sync>,
        );
        self
    }

    /// The store of sessions, parked turns, journals and approval memory. Required, with no
    /// default, so that losing them is a choice: [`SqliteStore::open`] keeps them in a file
    /// across restarts, [`SqliteStore::in_memory`] only until the process exits (for tests and
    /// demos), and `PostgresStore` shares them between instances.
    ///
    /// [`SqliteStore::open`]: crate::SqliteStore::open
    /// [`SqliteStore::in_memory`]: crate::SqliteStore::in_memory
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The decider for `approval = auto` (without one, `auto` always asks a person).
    pub fn decider(mut self, decider: impl Decider) -> Self {
        self.decider = Some(Arc::new(decider));
        self
    }

    /// Adds an input guardrail, named `name` in events, run before every call the model, a
    /// subagent or a schedule makes (not calls from the user interface, the user's own
    /// actions), once its input is validated. Guardrails run in the order they were added, the
    /// tool's own (`#[tool(guardrails(input = ...))]`) last; the first that does not allow
    /// decides. [`InputVerdict::Ask`](toolwright_core::InputVerdict::Ask) makes the call wait
    /// for a person (the approval request says why; a denied call stays denied),
    /// [`InputVerdict::Refuse`](toolwright_core::InputVerdict::Refuse) denies it with the
    /// reason, which the model sees. A guardrail that panics asks a person (fail closed).
    ///
    /// ```
    /// # use toolwright_runtime::{Runtime, Registry};
    /// use toolwright_core::{InputCheck, InputVerdict};
    /// let builder = Runtime::builder(Registry::from_tools([]).unwrap()).input_guardrail(
    ///     "no_wildcards",
    ///     |check: &InputCheck<'_>| {
    ///         if check.input.to_string().contains('*') {
    ///             InputVerdict::ask("the input holds a wildcard")
    ///         } else {
    ///             InputVerdict::Allow
    ///         }
    ///     },
    /// );
    /// # let _ = builder;
    /// ```
    pub fn input_guardrail(
        mut self,
        name: impl Into<String>,
        guardrail: impl toolwright_core::InputGuardrail,
    ) -> Self {
        let name: String = name.into();
        self.hooks.input.push((name.into(), Arc::new(guardrail)));
        self
    }

    /// Adds an output guardrail, named `name` in events, run on the output of every call that
    /// succeeded (from the model, a subagent or a schedule) before the model sees it: in the
    /// order they were added, the tool's own (`#[tool(guardrails(output = ...))]`) last; the
    /// first that does not pass decides.
    /// [`OutputVerdict::Redact`](toolwright_core::OutputVerdict::Redact) replaces what the model
    /// sees, and the raw output is dropped (events and the stored turn hold the replacement);
    /// [`OutputVerdict::Stop`](toolwright_core::OutputVerdict::Stop) withholds the output and
    /// ends the turn when the step closes (the step's other calls are cancelled). A guardrail
    /// that panics redacts the output (fail closed). Results of `task` and `serve` workflow
    /// tasks, delivered later through [`crate::Turn::task_results`], are not checked.
    pub fn output_guardrail(
        mut self,
        name: impl Into<String>,
        guardrail: impl toolwright_core::OutputGuardrail,
    ) -> Self {
        let name: String = name.into();
        self.hooks.output.push((name.into(), Arc::new(guardrail)));
        self
    }

    /// Prepares every tool of the model's list at each step, after the tool's own `prepare`:
    /// keep it, hide it (calls to it are refused, as to a disabled conditional tool) or change
    /// its description for that step. With it, the lists are rebuilt at each step instead of
    /// coming from the cache; a `#[tool(prepare = path)]` costs only its own tool. A panic
    /// hides the tool (fail closed). The last one set wins.
    pub fn prepare_tools(mut self, prepare: impl toolwright_core::PrepareTools) -> Self {
        self.hooks.prepare = Some(Arc::new(prepare));
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

    /// Installs the model tools ask through `ctx.model()` (see
    /// [`toolwright_core::model`]). A step may bring its own for its calls
    /// ([`StepOptions`](crate::StepOptions)): the MCP server installs the client's model
    /// (sampling) that way, and it wins over this one for those calls.
    pub fn model(mut self, backend: impl ModelBackend) -> Self {
        self.model = Some(Arc::new(backend));
        self
    }

    /// The request policy of built-in sandbox tool `tool` (`"bash"`, `"write"`, ...), e.g.
    /// `RequestPolicy::Never` for `bash` in a sandbox that is itself isolated. The last setting
    /// of a tool wins; a name that is not a built-in tool is refused when the runtime is built.
    pub fn sandbox_approval(mut self, tool: &'static str, policy: RequestPolicy) -> Self {
        self.sandbox_approvals
            .push((tool, toolwright_core::ApprovalSpec::new(policy)));
        self
    }

    /// Declares a connection to a remote server whose allowed tools join the registry as
    /// `<connection>__<tool>` once [`Runtime::connect`] has started it.
    pub fn connection(mut self, connection: Connection) -> Self {
        self.connections.push(connection);
        self
    }

    /// Declares what toolset `toolset.name()` adds to the prompt: instructions for the system
    /// prompt ([`Runtime::instructions`]) and a per-turn context provider
    /// ([`crate::Turn::context`]). The name must be the toolset of some `#[tool]` or a declared
    /// connection; checked when the runtime is built.
    pub fn toolset(mut self, toolset: Toolset) -> Self {
        self.toolsets.push(toolset);
        self
    }

    /// The runtime. Fails with [`RuntimeError::NoStore`] when no [`RuntimeBuilder::store`] was
    /// set, and when a tool needs state that was not registered, or a sandbox setting, a
    /// connection or a toolset cannot be used as declared.
    ///
    /// ```
    /// use toolwright_runtime::{Registry, Runtime, RuntimeError, SqliteStore};
    ///
    /// let registry = Registry::from_tools([]).unwrap();
    /// let error = Runtime::builder(registry.clone()).build().unwrap_err();
    /// assert!(matches!(error, RuntimeError::NoStore));
    /// // In memory: gone when the process exits. `SqliteStore::open(path)` keeps a file.
    /// let runtime = Runtime::builder(registry).store(SqliteStore::in_memory()?).build()?;
    /// # let _ = runtime;
    /// # Ok::<(), RuntimeError>(())
    /// ```
    pub fn build(mut self) -> Result<Runtime, RuntimeError> {
        let Some(store) = self.store.take() else {
            return Err(RuntimeError::NoStore);
        };
        if let Some(locale) = &self.default_locale {
            self.registry = self
                .registry
                .with_default_locale(locale)
                .map_err(RuntimeError::Registry)?;
        }
        if let Some(url) = &self.options.webhook_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(RuntimeError::Connection {
                connection: "webhooks".into(),
                problem: format!(
                    "the webhook URL `{url}` is not an http(s) URL; give the absolute URL the webhook route is mounted at"
                ),
            });
        }
        self.add_dynamic_tools()?;
        self.add_sandbox_tools()?;
        // Descriptions computed from host services are computed now, once; the lists built
        // from this registry are cached as any list is.
        self.registry = self
            .registry
            .describe(&Services::new(&self.states))
            .map_err(RuntimeError::Registry)?;
        self.check_requirements()?;
        self.check_connections()?;
        let names: Vec<&str> = self.connections.iter().map(|c| c.name()).collect();
        let audiences: Vec<(&str, [bool; 3])> = self
            .connections
            .iter()
            .map(|c| (c.name(), c.audiences()))
            .collect();
        let toolsets = Toolsets::new(self.toolsets, &self.registry, &audiences)
            .map_err(RuntimeError::Toolset)?;
        let cache = ResultCache::new(&self.registry, &names);
        let (events, _) = broadcast::channel(1024);
        let remote = Remote::new(
            self.registry.clone(),
            self.connections,
            Arc::clone(&store),
            Arc::clone(&self.options.clock),
            events.clone(),
        );
        // Remote tools default to `once`, and their policies can be overridden at any time.
        let reads_approvals = !remote.is_empty()
            || self
                .registry
                .tools()
                .iter()
                .any(|t| crate::engine::reads_approvals(t));
        let runs_tasks = self
            .registry
            .tools()
            .iter()
            .any(|t| matches!(t.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve)));
        let engine = Engine::new(Parts {
            store,
            options: self.options,
            events,
            services: Arc::new(self.states),
            sandbox: self.sandbox,
            model: self.model,
            credentials: self.credentials,
            decider: self.decider,
            hooks: self.hooks,
            remote,
            toolsets,
            cache,
            reads_approvals,
            runs_tasks,
        });
        Ok(Runtime { engine })
    }

    /// The tools defined from data join the registry, each checked.
    fn add_dynamic_tools(&mut self) -> Result<(), RuntimeError> {
        if self.dynamic.is_empty() {
            return Ok(());
        }
        let tools = std::mem::take(&mut self.dynamic)
            .into_iter()
            .map(|d| Tool::dynamic(d).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        self.registry = self
            .registry
            .with_dynamic(tools)
            .map_err(RuntimeError::Registry)?;
        Ok(())
    }

    /// With a sandbox, the built-in tools over it join the registry, with the approval
    /// policies `sandbox_approval` set.
    fn add_sandbox_tools(&mut self) -> Result<(), RuntimeError> {
        if let Some((tool, _)) = self
            .sandbox_approvals
            .iter()
            .find(|(tool, _)| !SANDBOX_TOOLS.contains(tool))
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
        Ok(())
    }

    /// Every state a tool needs (`State<T>`) is registered.
    fn check_requirements(&self) -> Result<(), RuntimeError> {
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
        Ok(())
    }

    /// Every connection's declaration fits beside the local tools and the other connections.
    fn check_connections(&self) -> Result<(), RuntimeError> {
        for (i, connection) in self.connections.iter().enumerate() {
            if let Some(problem) = connection.problem(&self.registry, &self.connections[..i]) {
                return Err(RuntimeError::Connection {
                    connection: connection.name().to_owned(),
                    problem,
                });
            }
        }
        Ok(())
    }
}
