//! The result cache of read tools that the user interface's views share
//! ([`crate::Session::tool_data`]), and the write state that invalidates it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use toolwright_core::{Effect, Principal, Registry, Tool};

use crate::error::RuntimeError;
use crate::options::Clock;
use crate::record::CallResult;

/// What a cached result is kept under: the session, the user (the whole principal, attributes
/// included), the tool and the canonical validated input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    session: String,
    user: String,
    tool: String,
    input: String,
}

impl Key {
    /// The key of `tool`'s result with `validated` input for `user` in session `session`.
    pub(crate) fn new(
        session: &str,
        user: &Principal,
        tool: &str,
        validated: &serde_json::Value,
    ) -> Key {
        Key {
            session: session.to_owned(),
            user: toolwright_core::registry::input_digest(
                &serde_json::to_value(user).unwrap_or_default(),
            ),
            tool: tool.to_owned(),
            input: toolwright_core::registry::input_digest(validated),
        }
    }
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

    /// The result of `tool` under `key`: a fresh entry (younger than `ttl_ms` on `clock`,
    /// and no write of the tool's toolset since), else the outcome of a call already running
    /// for the key, else `call`'s. A result is kept only when it succeeded and no write of
    /// the toolset started, ran or ended while it was produced; a failure answers the views
    /// waiting for it, and is not kept for later ones.
    pub(crate) async fn shared<F>(
        &self,
        key: Key,
        tool: &Tool,
        ttl_ms: u64,
        clock: &dyn Clock,
        call: F,
    ) -> Result<CallResult, RuntimeError>
    where
        F: Future<Output = Result<CallResult, RuntimeError>>,
    {
        let group = self.group(tool);
        let slot = self.slot(&key, clock.now_ms());
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
        let result = call.await?;
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
    // A slot a view holds is kept, whether its call has the lock or the view is on its way to
    // it (a new slot has no entry yet; dropped here, a second view of the key would make
    // another and run the tool again). `None` means "keep".
    let expiry = |slot: &Arc<Slot>| -> Option<u64> {
        if Arc::strong_count(slot) > 1 {
            return None;
        }
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
        // Just made for a view that has not locked it yet.
        let arriving = slot(None);
        slots.insert(key(4), Arc::clone(&arriving));
        sweep(&mut slots, 100);
        let mut left: Vec<String> = slots.keys().map(|k| k.input.clone()).collect();
        left.sort();
        assert_eq!(left, ["1", "3", "4"]);
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
