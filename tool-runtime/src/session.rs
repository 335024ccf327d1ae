//! Sessions: how to open one, and the handle that begins turns and sets the session's
//! permissions and state.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_core::{Caller, Effect, ModelOutput, Principal};

use crate::attachments::{self, Attachment};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{Permission, SessionRecord, TurnRecord};
use crate::store::Deleted;
use crate::task::results::{cancel_task, tasks};
use crate::turn::Turn;

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

    /// Limits the session to the tools `names` (registry names): no other tool is listed for
    /// it or runs in it; a call to one is answered as a call to an unknown tool. What a
    /// subagent's session is given. Tools hidden from its audience stay hidden.
    pub fn tools<I>(mut self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let mut names: Vec<String> = names.into_iter().map(Into::into).collect();
        names.sort();
        names.dedup();
        self.record.tools = Some(names);
        self
    }

    /// The locale of the person using the session (a BCP 47 tag such as `zh-Hans-CN`; an
    /// invalid one fails [`Runtime::open_session`](crate::Runtime::open_session)): titles and
    /// summaries in its catalog, UI calls and `tool_search` results are resolved for it.
    /// Without it, the registry's default locale.
    pub fn locale(mut self, locale: impl Into<String>) -> Self {
        self.record.locale = Some(locale.into());
        self
    }

    /// The record to store; fails when the locale is not a language tag.
    pub(crate) fn into_record(self) -> Result<SessionRecord, RuntimeError> {
        match &self.record.locale {
            Some(locale) if !toolwright_core::locale::is_locale(locale) => {
                Err(RuntimeError::InvalidLocale(locale.clone()))
            }
            _ => Ok(self.record),
        }
    }
}

/// How many turns, and how many tasks, [`Session::delete`] deletes per store transaction.
const DELETE_BATCH: usize = 100;

/// A session handle.
#[derive(Clone, Debug)]
pub struct Session {
    engine: Arc<Engine>,
    id: String,
}

impl Session {
    pub(crate) fn new(engine: Arc<Engine>, id: String) -> Session {
        Session { engine, id }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's record as stored now: its persistent state (what hosts and tools wrote
    /// with [`Session::set_state`] and `ctx.set_session_state`), permissions and identities.
    pub async fn record(&self) -> Result<SessionRecord, RuntimeError> {
        Ok(self.engine.session(&self.id).await?.0)
    }

    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
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
        self.begin(current, caller, false, None).await
    }

    /// Begins a turn that is tainted from its start, as if the untrusted tool `tainted_by` had
    /// returned in it: its `write`, `money` and `public` calls need the user's confirmation, and
    /// their requests name `tainted_by` as the source.
    ///
    /// For hosts that cannot see where a conversation's turns begin, so that taint must outlive
    /// the turn it was noted in: the MCP server begins each new turn of an MCP session with the
    /// taint of the turns before it. A turn taints itself when an untrusted tool returns in it;
    /// read the source from [`TurnRecord::tainted_by`](crate::TurnRecord::tainted_by).
    pub async fn begin_tainted_turn(
        &self,
        current: Option<Principal>,
        caller: Caller,
        tainted_by: impl Into<String>,
    ) -> Result<Turn, RuntimeError> {
        self.begin(current, caller, false, Some(tainted_by.into()))
            .await
    }

    /// Begins a turn that asks for structured output (`ends_turn` is ignored in it).
    pub async fn begin_structured_turn(
        &self,
        current: Option<Principal>,
        caller: Caller,
    ) -> Result<Turn, RuntimeError> {
        self.begin(current, caller, true, None).await
    }

    async fn begin(
        &self,
        current: Option<Principal>,
        caller: Caller,
        structured_output: bool,
        tainted_by: Option<String>,
    ) -> Result<Turn, RuntimeError> {
        let engine = &self.engine;
        let (session, _) = engine.session(&self.id).await?;
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
        let mut record = TurnRecord::begin(
            crate::ids::new_id("turn"),
            self.id.clone(),
            current,
            caller,
            structured_output,
        );
        record.tainted_by = tainted_by;
        engine.store().put_turn(&record, None).await?;
        engine.emit(Event::TurnStarted {
            session_id: self.id.clone(),
            turn_id: record.id.clone(),
            caller: record.caller,
            principal: record.current.clone(),
        });
        Ok(Turn::new(
            Arc::clone(&self.engine),
            record.id,
            self.id.clone(),
            CancellationToken::new(),
        ))
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
    /// step). A tool writes it with `ctx.set_session_state(&KEY, &value)`; share a
    /// `StateKey` and pass its [`name`](toolwright_core::StateKey::name) here.
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

    /// Sets the locale of the person using the session (see [`SessionSpec::locale`]); `None`
    /// goes back to the registry's default. Fails when `locale` is not a language tag.
    pub async fn set_locale(&self, locale: Option<&str>) -> Result<(), RuntimeError> {
        if let Some(locale) = locale.filter(|l| !toolwright_core::locale::is_locale(l)) {
            return Err(RuntimeError::InvalidLocale(locale.to_owned()));
        }
        let locale = locale.map(str::to_owned);
        self.update(move |record| record.locale.clone_from(&locale))
            .await
    }

    /// The locale texts are resolved for in this session: its own, or the registry's default.
    pub async fn locale(&self) -> Result<String, RuntimeError> {
        let (record, _) = self.engine.session(&self.id).await?;
        Ok(record
            .locale
            .unwrap_or_else(|| self.engine.registry().default_locale().to_owned()))
    }

    /// Ends the session: it takes no new turns, and its workflow tasks (including idle `serve`
    /// tasks) are cancelled, each body getting its cleanup window. Returns when they have ended.
    pub async fn end(&self) -> Result<(), RuntimeError> {
        self.update(|record| record.ended = true).await?;
        self.engine.cache().forget_session(&self.id);
        let tasks = tasks(&self.engine, &self.id).await?;
        let cancels = tasks
            .iter()
            .filter(|t| !t.status.is_over())
            .map(|t| cancel_task(&self.engine, &t.id));
        for result in futures_util::future::join_all(cancels).await {
            result?;
        }
        Ok(())
    }

    /// The attachment `id` of this session (a file a tool returned, stored once; see
    /// [`ContentPart::Attachment`](toolwright_core::ContentPart::Attachment)), with its bytes;
    /// `None` when the session has none of that id or it was deleted.
    pub async fn attachment(&self, id: &str) -> Result<Option<Attachment>, RuntimeError> {
        attachments::load(&self.engine, &self.id, id).await
    }

    /// `output` with its attachments put back as the file parts they replaced, for sending it
    /// out of the process (a model request, a client's response). One that cannot be read
    /// becomes a text part saying why.
    pub async fn resolve_attachments(&self, output: &ModelOutput) -> ModelOutput {
        attachments::resolve(&self.engine, &self.id, output).await
    }

    /// Deletes this session's attachments: the files kept in the sandbox, then the store's
    /// records and bytes. Returns how many there were. References to them left in recorded
    /// results then resolve to a text part saying the file is no longer available.
    pub async fn delete_attachments(&self) -> Result<u64, RuntimeError> {
        attachments::delete(&self.engine, &self.id).await
    }

    /// Deletes this session and everything it holds: its turns with their request index,
    /// answers and journals (durable and workflow calls', steering logs, hooks'), its tasks, its
    /// `once` grants, its conversation and its attachments (in the store and in the sandbox).
    /// The store deletes in batches of 100 turns and 100 tasks, one transaction each,
    /// the session's own record last: a deletion cut short (a crash, an error) is finished by
    /// calling `delete` again.
    ///
    /// The session is ended first, so it takes no new turns. Refused with
    /// [`StoreError::Busy`](crate::StoreError::Busy) (as [`RuntimeError::Store`]) while a turn
    /// is active, waiting or running, or a task has not ended: cancel them
    /// ([`Turn::cancel`], [`Runtime::cancel_task`](crate::Runtime::cancel_task)) or let them
    /// end, then delete again. A store that cannot delete (a store of your own without
    /// [`Store::delete_session`](crate::Store::delete_session)) refuses too.
    pub async fn delete(&self) -> Result<Deleted, RuntimeError> {
        crate::retention::delete_session(&self.engine, &self.id, DELETE_BATCH, true).await
    }

    async fn update(&self, change: impl Fn(&mut SessionRecord)) -> Result<(), RuntimeError> {
        let engine = &self.engine;
        engine.update_session(&self.id, change).await?;
        engine.emit(Event::SessionChanged {
            session_id: self.id.clone(),
        });
        Ok(())
    }
}
