//! Calls from the user interface: a page or widget runs a tool as the user
//! ([`Session::invoke`]), and reads a read tool's result through a shared cache
//! ([`Session::tool_data`]).
//!
//! A user's call is a turn of its own with [`Caller::User`] and the user as the acting principal:
//! `user_only` tools may be called, no approval is asked for the user's own action (a tool's
//! response policy still decides whether this user may approve it), and the turn record and the
//! `turn.started` / `action.requested` events name the user as the caller.
//!
//! What a page shows of the tools is in the session's locale ([`crate::SessionSpec::locale`]):
//! [`Session::catalog`] lists the tools a user may call, [`Session::tool_texts`] gives one
//! tool's title and summary.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolwright_core::{
    Audience, Caller, Catalog, Effect, Entry, Principal, Registry, Tool, ToolKind, ToolTexts,
};

use crate::call::{StepOutcome, ToolCall};
use crate::engine::cache::Key;
use crate::engine::find_tool;
use crate::error::RuntimeError;
use crate::record::{CallResult, InputRequest};
use crate::session::Session;
use crate::turn::Turn;

/// What became of a call from the user interface.
#[allow(clippy::large_enum_variant)]
// reason: returned once per call and matched at once; boxing would only cost the caller a deref
#[derive(Debug)]
pub enum Invoked {
    /// The call has its result. Its turn is completed, unless the tool started a workflow task
    /// (then the turn stays open until the task delivers: see [`Turn::wait_task_results`]).
    Done {
        /// The result.
        result: CallResult,
        /// The call's turn.
        turn: Turn,
    },
    /// The call waits for input: a workflow body's question, or a person's approval of a
    /// remote tool's changed definition. Answer with [`crate::Runtime::respond`].
    Waiting {
        /// The call's turn, parked.
        turn: Turn,
        /// What it waits for.
        requests: Vec<InputRequest>,
    },
}

impl Invoked {
    /// The result, if the call has one.
    pub fn result(&self) -> Option<&CallResult> {
        match self {
            Invoked::Done { result, .. } => Some(result),
            Invoked::Waiting { .. } => None,
        }
    }
}

impl Session {
    /// Runs `tool` (its model-facing name, `focus__start`, or its id, `focus.start`) with
    /// `input` as `user`, from a page or widget: the full pipeline (validation, events,
    /// journaling, timeouts) in a turn of its own whose caller is [`Caller::User`].
    ///
    /// `user_only` tools may be called; provider-native tools may not (the provider runs them).
    /// No approval is asked: the user's own action is the approval. A tool with a response
    /// policy (who may approve it) still runs only if that policy lets this user approve it.
    /// Cached results of the tool's toolset are invalidated when a tool other than `read` runs.
    pub async fn invoke(
        &self,
        user: Principal,
        tool: &str,
        input: Value,
    ) -> Result<Invoked, RuntimeError> {
        let name = user_tool(&self.engine().registry(), tool)?
            .name()
            .to_owned();
        let session = self.clone();
        // On its own task: a page that goes away does not cut the call (and its turn) short.
        tokio::spawn(async move { session.run_as_user(user, &name, &input).await })
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))?
    }

    /// The result of read tool `tool` with `input` for `user`, through the runtime's shared
    /// cache: views of this session asking for the same tool and input (compared canonically:
    /// key order does not matter, defaults are applied first) within `ttl` share one call, and
    /// views asking at the same time wait for the call already running instead of starting
    /// another. Entries are kept per session and user; they expire after `ttl` and are
    /// invalidated when any tool of the same toolset (or connection) other than a `read` one
    /// runs, from any session. Failed calls are not cached.
    ///
    /// Refused for tools whose effect is not `read` (call them with [`Session::invoke`]).
    pub async fn tool_data(
        &self,
        user: Principal,
        tool: &str,
        input: Value,
        ttl: Duration,
    ) -> Result<CallResult, RuntimeError> {
        let engine = self.engine();
        let found = user_tool(&engine.registry(), tool)?;
        let refuse = |problem: String| RuntimeError::UserCall {
            tool: found.name().to_owned(),
            problem,
        };
        if found.effect() != Effect::Read {
            return Err(refuse(format!(
                "its effect is `{}`, and only `read` tools' results are cached; run it with `Session::invoke`",
                found.effect()
            )));
        }
        if matches!(found.kind(), ToolKind::Workflow(Entry::Task | Entry::Serve)) {
            return Err(refuse(
                "it starts a workflow task, whose result arrives later; run it with `Session::invoke`"
                    .into(),
            ));
        }
        // The cache key uses the input as the tool will see it.
        let validated = found
            .validate(input.clone())
            .map_err(|error| refuse(error.into_tool_error().message().to_owned()))?;
        let key = Key::new(self.id(), &user, found.name(), &validated);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let name = found.name().to_owned();
        let session = self.clone();
        let call = async move {
            // On its own task: a view that goes away does not cut the call (and its turn) short.
            let invoked =
                tokio::spawn(async move { session.run_as_user(user, &name, &input).await })
                    .await
                    .map_err(|error| RuntimeError::Task(error.to_string()))??;
            match invoked {
                Invoked::Done { result, .. } => Ok(result),
                Invoked::Waiting { turn, .. } => {
                    turn.cancel().await?;
                    Err(refuse(
                        "it waits for input, so it cannot serve cached data; run it with `Session::invoke`"
                            .into(),
                    ))
                }
            }
        };
        let clock = &*engine.options().clock;
        engine
            .cache()
            .shared(key, &found, ttl_ms, clock, call)
            .await
    }

    /// The tools a user may call from this session's pages, described in the session's locale
    /// (see [`Catalog`]): the runtime's tools now, remote connections' included, limited to the
    /// session's tools when it has a subset. Shared between sessions of one locale until the
    /// tools change.
    pub async fn catalog(&self) -> Result<Arc<Catalog>, RuntimeError> {
        let (record, _) = self.engine().session(self.id()).await?;
        let registry = self.engine().registry();
        let locale = record
            .locale
            .as_deref()
            .unwrap_or(registry.default_locale());
        let catalog = registry.catalog(Audience::User, locale);
        Ok(match &record.tools {
            None => catalog,
            Some(_) => Arc::new(catalog.filtered(|e| record.allows(&e.name))),
        })
    }

    /// The title and summary of `tool` (model-facing name or id) in the session's locale. Fails
    /// like [`Session::invoke`] for a tool a user cannot call.
    pub async fn tool_texts(&self, tool: &str) -> Result<ToolTexts, RuntimeError> {
        let registry = self.engine().registry();
        let found = user_tool(&registry, tool)?;
        let (record, _) = self.engine().session(self.id()).await?;
        let default = registry.default_locale();
        Ok(found.texts(record.locale.as_deref().unwrap_or(default), default))
    }

    async fn run_as_user(
        &self,
        user: Principal,
        name: &str,
        input: &Value,
    ) -> Result<Invoked, RuntimeError> {
        let turn = self.begin_turn(Some(user), Caller::User).await?;
        let call_id = crate::ids::new_id("ui");
        let outcome = turn
            .step(vec![ToolCall::new(call_id, name, input.to_string())])
            .await?;
        match outcome {
            StepOutcome::Completed {
                results, ends_turn, ..
            } => {
                let Some(result) = results.into_iter().next() else {
                    return Err(RuntimeError::Task(format!(
                        "the call of `{name}` from the user interface has no result"
                    )));
                };
                if !ends_turn {
                    match turn.complete().await {
                        // A `task` tool's turn stays open until the task delivers.
                        Ok(()) | Err(RuntimeError::TasksOpen { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
                Ok(Invoked::Done {
                    result: Arc::unwrap_or_clone(result),
                    turn,
                })
            }
            StepOutcome::Waiting { requests, .. } => Ok(Invoked::Waiting { turn, requests }),
        }
    }
}

/// The tool `name` (model-facing name or id) as a user may call it.
fn user_tool(registry: &Registry, name: &str) -> Result<Arc<Tool>, RuntimeError> {
    let found = registry
        .get(name)
        .or_else(|| registry.by_id(name))
        .map(|t| t.name().to_owned());
    let problem = match found {
        Some(found) => match registry.resolve(&found, Caller::User) {
            Ok(_) => {
                return find_tool(registry, &found).ok_or_else(|| RuntimeError::UserCall {
                    tool: name.to_owned(),
                    problem: "it is not in the registry".into(),
                });
            }
            Err(error) => error.message().to_owned(),
        },
        None => match registry.resolve(name, Caller::User) {
            Err(error) => error.message().to_owned(),
            Ok(_) => "it is not in the registry".into(),
        },
    };
    Err(RuntimeError::UserCall {
        tool: name.to_owned(),
        problem,
    })
}
