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
use toolwright_core::{Caller, Effect, Principal, Registry, Tool, ToolKind};

use crate::call::{StepOutcome, ToolCall};
use crate::error::RuntimeError;
use crate::record::{CallResult, InputRequest};
use crate::runtime::{Session, Turn};

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
        let rt = self.runtime();
        let found = rt.user_tool(tool)?;
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
        if matches!(
            found.kind(),
            ToolKind::Workflow(toolwright_core::Entry::Task | toolwright_core::Entry::Serve)
        ) {
            return Err(refuse(
                "it starts a workflow task, whose result arrives later; run it with `Session::invoke`"
                    .into(),
            ));
        }
        // The cache key uses the input as the tool will see it.
        let validated = found
            .validate(input.clone())
            .map_err(|error| refuse(error.into_tool_error().message().to_owned()))?;
        let cache = &rt.0.cache;
        let clock = &rt.0.options.clock;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let key = Key {
            session: self.id().to_owned(),
            user: toolwright_core::registry::input_digest(
                &serde_json::to_value(&user).unwrap_or_default(),
            ),
            tool: found.name().to_owned(),
            input: toolwright_core::registry::input_digest(&validated),
        };
        let group = cache.group(&found);
        let slot = cache.slot(&key, clock.now_ms());
        let arrived = slot.completed.load(Ordering::SeqCst);
        let mut state = slot.state.lock().await;
        // A call finished while this view waited for it: its outcome, failed or not, is this
        // view's too (a failing or hanging tool is called once, not once per view).
        if slot.completed.load(Ordering::SeqCst) != arrived
            && let Some(last) = &state.last
        {
            return Ok(last.clone());
        }
        let now = clock.now_ms();
        if let Some(entry) = state.entry.as_mut()
            && group.unchanged_since(entry.generation)
            && now.saturating_sub(entry.at_ms) < ttl_ms
        {
            entry.expires_ms = entry.expires_ms.max(entry.at_ms.saturating_add(ttl_ms));
            return Ok(entry.result.clone());
        }
        // Read before the call: a write that starts, runs or ends meanwhile makes the result
        // unfit to keep (it still answers this view).
        let before = group.quiet_generation();
        let name = found.name().to_owned();
        let session = self.clone();
        // On its own task: a view that goes away does not cut the call (and its turn) short.
        let invoked = tokio::spawn(async move { session.run_as_user(user, &name, &input).await })
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))??;
        let result = match invoked {
            Invoked::Done { result, .. } => result,
            Invoked::Waiting { turn, .. } => {
                turn.cancel().await?;
                return Err(refuse(
                    "it waits for input, so it cannot serve cached data; run it with `Session::invoke`"
                        .into(),
                ));
            }
        };
        let keep = !result.is_error && before.is_some() && group.quiet_generation() == before;
        state.entry = keep.then(|| {
            let at_ms = clock.now_ms();
            Entry {
                generation: before.unwrap_or_default(),
                at_ms,
                expires_ms: at_ms.saturating_add(ttl_ms),
                result: result.clone(),
            }
        });
        state.last = Some(result.clone());
        slot.completed.fetch_add(1, Ordering::SeqCst);
        Ok(result)
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
    /// The latest moment an asker's `ttl` has it fresh (for sweeping).
    expires_ms: u64,
    result: CallResult,
}

#[derive(Default)]
struct SlotState {
    entry: Option<Entry>,
    /// The outcome of the last call, kept or not: what views that waited for it get.
    last: Option<CallResult>,
}

/// One key's entry, behind a lock its call holds: views asking at once wait for one call.
#[derive(Default)]
struct Slot {
    state: tokio::sync::Mutex<SlotState>,
    /// How many calls have finished, read before waiting for the lock.
    completed: AtomicU64,
}

/// The write state of one toolset (or connection).
#[derive(Default)]
struct Group {
    /// Bumped when a write starts and when it ends.
    generation: AtomicU64,
    /// Writes running now.
    writing: AtomicU64,
}

impl Group {
    /// The generation, if no write is running.
    fn quiet_generation(&self) -> Option<u64> {
        let generation = self.generation.load(Ordering::SeqCst);
        (self.writing.load(Ordering::SeqCst) == 0
            && self.generation.load(Ordering::SeqCst) == generation)
            .then_some(generation)
    }

    /// Whether no write started since `generation` was read (and none runs).
    fn unchanged_since(&self, generation: u64) -> bool {
        self.quiet_generation() == Some(generation)
    }
}

/// Held while a tool that may write runs: cached reads of its toolset are not served, nor
/// kept, until it is dropped, whichever way the call ends (a result, a park, a timeout, a
/// panic, a dropped future).
pub(crate) struct Writing<'a>(Option<&'a Group>);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            group.generation.fetch_add(1, Ordering::SeqCst);
            group.writing.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The shared result cache of read tools, and the write state that invalidates it.
pub(crate) struct ResultCache {
    /// One per toolset (`""` for tools without one) and per connection, fixed when the runtime
    /// is built: a write changes atomics, taking no lock.
    groups: HashMap<String, Group>,
    /// Shared by tools whose group is unknown (none, in practice).
    fallback: Group,
    entries: Mutex<Entries>,
}

struct Entries {
    slots: HashMap<Key, Arc<Slot>>,
    /// The size at which expired entries are swept next.
    sweep_at: usize,
}

const FIRST_SWEEP: usize = 256;
/// The most entries kept; past it, those closest to expiring go first.
const MAX_ENTRIES: usize = 10_000;

impl ResultCache {
    pub(crate) fn new(registry: &Registry, connections: &[&str]) -> Self {
        let mut groups: HashMap<String, Group> = HashMap::new();
        groups.insert(String::new(), Group::default());
        for tool in registry.tools() {
            groups.entry(group_of(tool).to_owned()).or_default();
        }
        for connection in connections {
            groups.entry((*connection).to_owned()).or_default();
        }
        ResultCache {
            groups,
            fallback: Group::default(),
            entries: Mutex::new(Entries {
                slots: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            }),
        }
    }

    fn group(&self, tool: &Tool) -> &Group {
        self.groups.get(group_of(tool)).unwrap_or(&self.fallback)
    }

    /// `tool` starts: if it may change data, cached results of its toolset are stale from now
    /// until the returned guard is dropped, and again after.
    pub(crate) fn writing(&self, tool: &Tool) -> Writing<'_> {
        if tool.effect() == Effect::Read {
            return Writing(None);
        }
        let group = self.group(tool);
        group.writing.fetch_add(1, Ordering::SeqCst);
        group.generation.fetch_add(1, Ordering::SeqCst);
        Writing(Some(group))
    }

    /// Drops the entries of session `id` (it ended).
    pub(crate) fn forget_session(&self, id: &str) {
        self.lock().slots.retain(|key, _| key.session != id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn slot(&self, key: &Key, now_ms: u64) -> Arc<Slot> {
        let mut entries = self.lock();
        if let Some(slot) = entries.slots.get(key) {
            return Arc::clone(slot);
        }
        if entries.slots.len() >= entries.sweep_at {
            sweep(&mut entries.slots, now_ms);
            entries.sweep_at = (entries.slots.len() * 2).clamp(FIRST_SWEEP, MAX_ENTRIES);
        }
        let slot = Arc::new(Slot::default());
        entries.slots.insert(key.clone(), Arc::clone(&slot));
        slot
    }
}

/// Drops expired entries nobody is using; past [`MAX_ENTRIES`], also those closest to expiring.
fn sweep(slots: &mut HashMap<Key, Arc<Slot>>, now_ms: u64) {
    // A slot in use (locked) is kept; `None` means "keep".
    let expiry = |slot: &Arc<Slot>| -> Option<u64> {
        let state = slot.state.try_lock().ok()?;
        Some(state.entry.as_ref().map_or(0, |e| e.expires_ms))
    };
    slots.retain(|_, slot| expiry(slot).is_none_or(|expires| expires > now_ms));
    if slots.len() > MAX_ENTRIES {
        let mut by_expiry: Vec<(u64, Key)> = slots
            .iter()
            .filter_map(|(key, slot)| expiry(slot).map(|expires| (expires, key.clone())))
            .collect();
        by_expiry.sort_unstable_by_key(|(expires, _)| *expires);
        let excess = slots.len() - MAX_ENTRIES * 3 / 4;
        for (_, key) in by_expiry.into_iter().take(excess) {
            slots.remove(&key);
        }
    }
}

/// The invalidation group of `tool`: its toolset, or its connection for a remote tool.
fn group_of(tool: &Tool) -> &str {
    match tool.remote_tool() {
        Some(remote) => remote.connection(),
        None => tool
            .descriptor()
            .and_then(|d| d.toolset)
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> Key {
        Key {
            session: "s".into(),
            user: "u".into(),
            tool: "t".into(),
            input: n.to_string(),
        }
    }

    fn slot(expires_ms: Option<u64>) -> Arc<Slot> {
        let slot = Slot::default();
        if let Some(expires_ms) = expires_ms {
            slot.state.try_lock().unwrap().entry = Some(Entry {
                generation: 0,
                at_ms: 0,
                expires_ms,
                result: CallResult::failed("c", "t", toolwright_core::ToolError::new("unused")),
            });
        }
        Arc::new(slot)
    }

    #[test]
    fn sweeping_drops_expired_and_empty_entries_but_not_those_in_use() {
        let mut slots = HashMap::new();
        slots.insert(key(0), slot(Some(50)));
        slots.insert(key(1), slot(Some(500)));
        slots.insert(key(2), slot(None));
        let busy = slot(Some(50));
        let _held = busy.state.try_lock().unwrap();
        slots.insert(key(3), Arc::clone(&busy));
        sweep(&mut slots, 100);
        let mut left: Vec<String> = slots.keys().map(|k| k.input.clone()).collect();
        left.sort();
        assert_eq!(left, ["1", "3"]);
    }

    #[test]
    fn past_the_cap_those_closest_to_expiring_go_first() {
        let mut slots: HashMap<Key, Arc<Slot>> = (0..MAX_ENTRIES + 1)
            .map(|n| (key(n), slot(Some(1_000 + n as u64))))
            .collect();
        sweep(&mut slots, 0);
        assert_eq!(slots.len(), MAX_ENTRIES * 3 / 4);
        let oldest_kept = slots
            .keys()
            .map(|k| k.input.parse::<usize>().unwrap())
            .min();
        assert_eq!(oldest_kept, Some(MAX_ENTRIES + 1 - MAX_ENTRIES * 3 / 4));
    }
}
