//! The runtime handle: built once, cheap to clone. Its methods delegate to the engine's
//! components and the behaviour modules.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwright_core::{Audience, Principal, Registry};

use crate::builder::RuntimeBuilder;
use crate::call::{InputResponse, RespondOutcome, StepOutcome};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{DefinitionChange, TaskRecord};
use crate::remote::{ConnectError, ConnectionStatus};
use crate::session::{Session, SessionSpec};
use crate::store::{Store, StoreError};
use crate::turn::Turn;

/// The tool runtime: built once, cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.engine, f)
    }
}

impl Runtime {
    /// A builder over `registry`.
    pub fn builder(registry: Registry) -> RuntimeBuilder {
        RuntimeBuilder::new(registry)
    }

    pub(crate) fn from_engine(engine: Arc<Engine>) -> Runtime {
        Runtime { engine }
    }

    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The tools now: the registry the runtime was built with, joined by the tools of its
    /// connections as they are listed (see [`Runtime::connect`]). A snapshot: cheap to take,
    /// consistent while held.
    pub fn registry(&self) -> Registry {
        self.engine.registry()
    }

    /// The toolsets' instructions for the system prompt of `audience`'s sessions (empty when
    /// no toolset it sees has any): one `## Tools `name__*`` section per toolset, by name.
    /// Rendered once when the runtime is built, so the prompt's prefix stays byte-identical
    /// across turns.
    pub fn instructions(&self, audience: Audience) -> Arc<str> {
        self.engine.toolsets().instructions(audience)
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
        let record = spec.into_record();
        let store = self.engine.store();
        if store.session(&record.id).await?.is_none() {
            match store.put_session(&record, None).await {
                Ok(_) | Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Session::new(self.clone(), record.id))
    }

    /// The stored session `id`.
    pub async fn session(&self, id: &str) -> Result<Session, RuntimeError> {
        self.engine.session(id).await?;
        Ok(Session::new(self.clone(), id.to_owned()))
    }

    /// The turn `id`, wherever it was started (e.g. after a restart).
    pub async fn turn(&self, id: &str) -> Result<Turn, RuntimeError> {
        let (record, _) = self.engine.turn(id).await?;
        Ok(Turn::new(
            self.clone(),
            record.id,
            record.session_id,
            CancellationToken::new(),
        ))
    }

    /// The ids of parked turns, oldest first.
    pub async fn waiting_turns(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(self.engine.store().waiting_turns().await?)
    }

    /// The approval keys remembered in session `id` (what `once` consults).
    pub async fn approvals(&self, session_id: &str) -> Result<BTreeSet<String>, RuntimeError> {
        Ok(self.engine.store().approvals(session_id).await?)
    }

    /// Answers an input request. The first valid answer wins: later ones are dropped. A response
    /// policy may reject an answer, which leaves the request pending for another approver. When
    /// the last pending request of the step settles, the step resumes here and its approved
    /// calls run (exactly once: the turn is claimed in the store first).
    pub async fn respond(&self, response: InputResponse) -> Result<RespondOutcome, RuntimeError> {
        // On its own task, like `Turn::step`: a resumed step must finish even if the caller
        // stops waiting.
        let engine = Arc::clone(&self.engine);
        tokio::spawn(async move { crate::input::settle::settle(&engine, response).await })
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))?
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
    /// of their own.
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
    /// It looks again whenever the store reports a change from another process (Postgres
    /// `LISTEN/NOTIFY`) and every `poll` in any case, so nothing depends on a notification
    /// arriving. With one instance it replaces [`Runtime::run_timers`].
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
                    runtime.engine.store().changed(poll).await;
                }
            };
            let timers = async {
                loop {
                    if let Err(error) = runtime.wake_due().await {
                        tracing::warn!("waking due timers failed: {error}");
                    }
                    runtime.engine.store().changed(poll).await;
                }
            };
            tokio::join!(take_over, timers);
        })
    }
}
