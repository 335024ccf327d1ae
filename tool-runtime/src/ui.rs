//! Calls from the user interface: a page or widget runs a tool as the user
//! ([`Session::invoke`]), and reads a read tool's result through a shared cache
//! ([`Session::tool_data`]).
//!
//! A user's call is a turn of its own with [`Caller::User`] and the user as the acting principal:
//! `user_only` tools may be called, no approval is asked for the user's own action (a tool's
//! response policy still decides whether this user may approve it), and the turn record and the
//! `turn.started` / `action.requested` events name the user as the caller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use toolwright_core::{Caller, Effect, Principal, Registry, Tool};

use crate::record::{CallResult, InputRequest};
use crate::runtime::{RuntimeError, Session, StepOutcome, ToolCall, Turn};

/// What became of a call from the user interface.
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
        let name = self.runtime().user_tool(tool)?.name().to_owned();
        self.run_as_user(user, &name, &input).await
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
        let rt = self.runtime();
        let found = rt.user_tool(tool)?;
        if found.effect() != Effect::Read {
            return Err(RuntimeError::UserCall {
                tool: found.name().to_owned(),
                problem: format!(
                    "its effect is `{}`, and only `read` tools' results are cached; run it with `Session::invoke`",
                    found.effect()
                ),
            });
        }
        let name = found.name().to_owned();
        // The cache key uses the input as the tool will see it.
        let validated = found
            .validate(input.clone())
            .map_err(|error| RuntimeError::UserCall {
                tool: name.clone(),
                problem: error.into_tool_error().message().to_owned(),
            })?;
        let cache = &rt.0.cache;
        let key = Key {
            session: self.id().to_owned(),
            user: user_key(&user),
            tool: name.clone(),
            input: toolwright_core::registry::input_digest(&validated),
        };
        let generation = cache.generation(&found);
        let slot = cache.slot(&key, rt.0.options.clock.now_ms());
        let mut held = slot.lock().await;
        let now = rt.0.options.clock.now_ms();
        if let Some(entry) = held.as_ref()
            && entry.generation == generation.load(Ordering::Acquire)
            && now.saturating_sub(entry.at_ms) < ttl.as_millis() as u64
        {
            return Ok(entry.result.clone());
        }
        // Read before the call: a write that runs meanwhile makes this result stale at once.
        let before = generation.load(Ordering::Acquire);
        let invoked = self.run_as_user(user, &name, &input).await?;
        let result = match invoked {
            Invoked::Done { result, .. } => result,
            Invoked::Waiting { turn, .. } => {
                turn.cancel().await?;
                return Err(RuntimeError::UserCall {
                    tool: name,
                    problem: "it waits for input, so it cannot serve cached data; run it with `Session::invoke`".into(),
                });
            }
        };
        if result.is_error {
            *held = None;
        } else {
            let at_ms = rt.0.options.clock.now_ms();
            *held = Some(Entry {
                generation: before,
                at_ms,
                expires_ms: at_ms.saturating_add(ttl.as_millis() as u64),
                result: result.clone(),
            });
        }
        Ok(result)
    }

    async fn run_as_user(
        &self,
        user: Principal,
        name: &str,
        input: &Value,
    ) -> Result<Invoked, RuntimeError> {
        let turn = self.begin_turn(Some(user), Caller::User).await?;
        let call_id = crate::pipeline::new_id("ui");
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
                Ok(Invoked::Done { result, turn })
            }
            StepOutcome::Waiting { requests, .. } => Ok(Invoked::Waiting { turn, requests }),
        }
    }
}

impl crate::Runtime {
    /// The tool `name` (model-facing name or id) as a user may call it.
    fn user_tool(&self, name: &str) -> Result<Arc<Tool>, RuntimeError> {
        let registry = self.registry();
        let found = registry
            .get(name)
            .or_else(|| registry.by_id(name))
            .map(|t| t.name().to_owned());
        let problem = match found {
            Some(found) => match registry.resolve(&found, Caller::User) {
                Ok(_) => {
                    return crate::runtime::find_tool(&registry, &found).ok_or_else(|| {
                        RuntimeError::UserCall {
                            tool: name.to_owned(),
                            problem: "it is not in the registry".into(),
                        }
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
}

/// A principal as a cache key part: who it is, not its attributes.
fn user_key(user: &Principal) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{:?}\u{1f}{}",
        user.authenticator,
        user.issuer.as_deref().unwrap_or_default(),
        user.principal_type,
        user.principal_id
    )
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    session: String,
    user: String,
    tool: String,
    input: String,
}

struct Entry {
    /// The toolset's write generation read before the call that produced it.
    generation: u64,
    at_ms: u64,
    /// The latest moment any asker's `ttl` has it fresh (for sweeping).
    expires_ms: u64,
    result: CallResult,
}

type Slot = Arc<tokio::sync::Mutex<Option<Entry>>>;

/// The shared result cache of read tools, and the write generations that invalidate it.
pub(crate) struct ResultCache {
    /// One counter per toolset (`""` for tools without one) and per connection, fixed when the
    /// runtime is built: a write bumps an atomic, taking no lock.
    generations: HashMap<String, Arc<AtomicU64>>,
    /// Shared by tools whose group is unknown (none, in practice).
    fallback: Arc<AtomicU64>,
    entries: Mutex<Entries>,
}

struct Entries {
    slots: HashMap<Key, Slot>,
    /// The size at which expired entries are swept next.
    sweep_at: usize,
}

const FIRST_SWEEP: usize = 256;

impl ResultCache {
    pub(crate) fn new(registry: &Registry, connections: &[&str]) -> Self {
        let mut generations: HashMap<String, Arc<AtomicU64>> = HashMap::new();
        generations.insert(String::new(), Arc::default());
        for tool in registry.tools() {
            generations.entry(group(tool).to_owned()).or_default();
        }
        for connection in connections {
            generations.entry((*connection).to_owned()).or_default();
        }
        ResultCache {
            generations,
            fallback: Arc::default(),
            entries: Mutex::new(Entries {
                slots: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            }),
        }
    }

    fn generation(&self, tool: &Tool) -> &Arc<AtomicU64> {
        self.generations.get(group(tool)).unwrap_or(&self.fallback)
    }

    /// `tool` runs (or ran): if it may change data, cached results of its toolset are stale.
    pub(crate) fn wrote(&self, tool: &Tool) {
        if tool.effect() != Effect::Read {
            self.generation(tool).fetch_add(1, Ordering::AcqRel);
        }
    }

    fn slot(&self, key: &Key, now_ms: u64) -> Slot {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = entries.slots.get(key) {
            return Arc::clone(slot);
        }
        if entries.slots.len() >= entries.sweep_at {
            // Drop expired entries nobody is using; sweep again when the cache has doubled.
            entries.slots.retain(|_, slot| match slot.try_lock() {
                Ok(entry) => entry.as_ref().is_some_and(|e| e.expires_ms > now_ms),
                Err(_) => true,
            });
            entries.sweep_at = (entries.slots.len() * 2).max(FIRST_SWEEP);
        }
        let slot = Slot::default();
        entries.slots.insert(key.clone(), Arc::clone(&slot));
        slot
    }
}

/// The invalidation group of `tool`: its toolset, or its connection for a remote tool.
fn group(tool: &Tool) -> &str {
    match tool.remote_tool() {
        Some(remote) => remote.connection(),
        None => tool
            .descriptor()
            .and_then(|d| d.toolset)
            .unwrap_or_default(),
    }
}
