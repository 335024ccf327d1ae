//! A durable call's journal: what earlier runs recorded, replayed in order, and what this run
//! records.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::future::BoxFuture;
use serde_json::Value;
use toolwright_core::{AskAnswer, ErrorCode, ToolError};

use crate::event::StepProgress;
use crate::record::{EntryKind, JournalEntry};
use crate::store::{Lease, Store, StoreError};

/// A durable call's journal: what earlier runs recorded, and where this run is in it.
pub(crate) struct Journal {
    run_id: String,
    store: Arc<dyn Store>,
    /// The lease the run's record is claimed under: entries are recorded only while it holds.
    fence: Option<Lease>,
    recorded: Vec<JournalEntry>,
    cursor: AtomicU32,
    /// What `patched` answered for each marker in this run: the first answer holds.
    markers: std::sync::Mutex<std::collections::HashMap<String, bool>>,
}

impl Journal {
    /// The journal of run `run_id` as `recorded`, from its start, recording under `fence`.
    pub(crate) fn new(
        run_id: String,
        store: Arc<dyn Store>,
        fence: Option<Lease>,
        recorded: Vec<JournalEntry>,
    ) -> Journal {
        Journal {
            run_id,
            store,
            fence,
            recorded,
            cursor: AtomicU32::new(0),
            markers: std::sync::Mutex::default(),
        }
    }

    /// The position of the body's next step, ask or sleep.
    pub(crate) fn next_position(&self) -> u32 {
        self.cursor.fetch_add(1, Ordering::SeqCst)
    }

    /// What an earlier run recorded at `position`.
    pub(crate) fn recorded_at(&self, position: u32) -> Option<&JournalEntry> {
        self.recorded.get(position as usize)
    }

    /// Records `entry` (a new position) and returns its value; when another run recorded the
    /// position first, its value is the one on record, and this run continues with it.
    pub(crate) async fn record(&self, entry: JournalEntry) -> Result<Value, ToolError> {
        match self
            .store
            .record_journal(&self.run_id, &entry, self.fence.as_ref())
            .await
        {
            Ok(()) => Ok(entry.value),
            Err(StoreError::Conflict(_)) => {
                self.recorded_elsewhere(entry.position, entry.kind, &entry.name)
                    .await
            }
            Err(error) => Err(journal_error(error)),
        }
    }

    /// Replays or records step `name`: a recorded value returns without running `run`; a new
    /// value is recorded before it is returned (exactly once on record, at least once run).
    /// `progress` hears what happens to it, with its position.
    pub(crate) async fn step(
        &self,
        name: &str,
        run: BoxFuture<'_, Result<Value, ToolError>>,
        progress: &(dyn Fn(u32, StepProgress) + Send + Sync),
    ) -> Result<Value, ToolError> {
        let position = self.next_position();
        if let Some(replayed) = self.replay_step(position, name, progress) {
            return replayed;
        }
        progress(position, StepProgress::Started);
        let recorded = match run.await {
            Ok(value) => {
                self.record(JournalEntry {
                    position,
                    kind: EntryKind::Step,
                    name: name.to_owned(),
                    value,
                })
                .await
            }
            Err(error) => Err(error),
        };
        progress(position, settled(&recorded));
        recorded
    }

    /// Replays or runs step `name` with `work` inside the store's transaction (see
    /// [`Store::journal_in_transaction`]): exactly once, on record and in effect. `progress`
    /// hears what happens to it, with its position.
    pub(crate) async fn step_in_store(
        &self,
        name: &str,
        work: toolwright_core::StoreWork,
        progress: &(dyn Fn(u32, StepProgress) + Send + Sync),
    ) -> Result<Value, ToolError> {
        let position = self.next_position();
        if let Some(replayed) = self.replay_step(position, name, progress) {
            return replayed;
        }
        progress(position, StepProgress::Started);
        let recorded = match self
            .store
            .journal_in_transaction(&self.run_id, position, name, self.fence.as_ref(), work)
            .await
        {
            Ok(outcome) => outcome,
            // Another run recorded the position first (its transaction committed, this one's
            // rolled back): its value is the one on record.
            Err(StoreError::Conflict(_)) => {
                self.recorded_elsewhere(position, EntryKind::Step, name)
                    .await
            }
            Err(error) => Err(journal_error(error)),
        };
        progress(position, settled(&recorded));
        recorded
    }

    /// The value an earlier run recorded for step `name` at `position` (told to `progress` as
    /// replayed), or `None` when the position is new.
    fn replay_step(
        &self,
        position: u32,
        name: &str,
        progress: &(dyn Fn(u32, StepProgress) + Send + Sync),
    ) -> Option<Result<Value, ToolError>> {
        let entry = self.recorded_at(position)?;
        let value = self.replayed_as(entry, EntryKind::Step, name);
        if value.is_ok() {
            progress(position, StepProgress::Replayed);
        }
        Some(value)
    }

    /// Whether this run takes the path behind version marker `marker`. Where the journal holds
    /// the marker, a replay: `true`, and the position is taken. Where it holds anything else,
    /// or `settled(position)` says an answer waits there (a task's answer not journaled yet),
    /// the run was recorded before the marker existed: `false`, and no position is taken, so
    /// the old path replays from there. Past the journal's end, new work: the marker is
    /// recorded, `true`. A run asking again about the same marker gets its first answer.
    pub(crate) async fn patched(
        &self,
        marker: &str,
        settled: impl Fn(u32) -> bool,
    ) -> Result<bool, ToolError> {
        if let Some(known) = self.marker(marker) {
            return Ok(known);
        }
        let position = self.cursor.load(Ordering::SeqCst);
        let taken = match self.recorded_at(position) {
            Some(entry) if entry.kind == EntryKind::Patch && entry.name == marker => true,
            Some(_) => false,
            None if settled(position) => false,
            None => {
                self.record(JournalEntry {
                    position,
                    kind: EntryKind::Patch,
                    name: marker.to_owned(),
                    value: Value::Bool(true),
                })
                .await?;
                true
            }
        };
        if taken {
            self.cursor.store(position + 1, Ordering::SeqCst);
        }
        if let Ok(mut markers) = self.markers.lock() {
            markers.insert(marker.to_owned(), taken);
        }
        Ok(taken)
    }

    fn marker(&self, marker: &str) -> Option<bool> {
        self.markers.lock().ok()?.get(marker).copied()
    }

    /// The value another run recorded at `position` first.
    async fn recorded_elsewhere(
        &self,
        position: u32,
        kind: EntryKind,
        name: &str,
    ) -> Result<Value, ToolError> {
        let entries = self
            .store
            .journal(&self.run_id)
            .await
            .map_err(journal_error)?;
        match entries.iter().find(|e| e.position == position) {
            Some(entry) => self.replayed_as(entry, kind, name),
            None => Err(journal_error(StoreError::Conflict(self.run_id.clone()))),
        }
    }

    /// The value of `entry`, recorded by an earlier run, which this run reached as `expected`
    /// `name`: a body that reaches something else diverged from its journal.
    pub(crate) fn replayed_as(
        &self,
        entry: &JournalEntry,
        expected: EntryKind,
        name: &str,
    ) -> Result<Value, ToolError> {
        if entry.kind != expected || entry.name != name {
            let kind = kind_word(entry.kind);
            let reached = kind_word(expected);
            if entry.kind == EntryKind::Patch {
                return Err(ToolError::with_code(
                    ErrorCode::Journal,
                    format!(
                        "the replay of `{}` diverged from its journal: at position {} the journal holds version marker `{}`, but this run reached {reached} `{name}`; runs recorded with the marker still replay, so keep `ctx.patched(\"{}\")` in the body until none is left",
                        self.run_id, entry.position, entry.name, entry.name
                    ),
                ));
            }
            return Err(ToolError::with_code(
                ErrorCode::Journal,
                format!(
                    "the replay of `{}` diverged from its journal: at position {} the journal holds {kind} `{}`, but this run reached {reached} `{name}`; a durable body must reach the same steps in the same order on every run (derive names and order from its input and earlier step values, never from clocks, randomness or concurrent steps). If the body's code changed while this run was parked, keep the old path for runs recorded before the change behind a version marker: `if ctx.patched(\"{marker}\").await? {{ <new code> }} else {{ <old code> }}`",
                    self.run_id,
                    entry.position,
                    entry.name,
                    marker = suggested_marker(name),
                ),
            ));
        }
        Ok(entry.value.clone())
    }
}

/// How a step that ran ended: recorded, or failed.
fn settled(recorded: &Result<Value, ToolError>) -> StepProgress {
    if recorded.is_ok() {
        StepProgress::Recorded
    } else {
        StepProgress::Failed
    }
}

fn kind_word(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::Step => "step",
        EntryKind::Ask => "question",
        EntryKind::Sleep => "sleep",
        EntryKind::Patch => "version marker",
        EntryKind::Hook => "hook",
        EntryKind::HookWait => "wait on a hook",
        EntryKind::Delivery => "hook delivery",
    }
}

/// A marker name for the change that made a run reach `name`: `change-<name>`, with what a
/// name may hold kept to letters, digits, `-` and `_`.
fn suggested_marker(name: &str) -> String {
    // A question or a sleep is named by its position: name the change by what it is.
    let name = match name.split_once('#') {
        Some((what @ ("ask" | "sleep"), _)) => what,
        _ => name.split_once(':').map_or(name, |(_, hook)| hook),
    };
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("change-{}", cleaned.trim_matches('-'))
}

/// The answer recorded at `position`, as the body gets it.
pub(crate) fn answer_at(position: u32, value: Value) -> Result<AskAnswer, ToolError> {
    serde_json::from_value(value).map_err(|error| {
        ToolError::with_code(
            ErrorCode::Journal,
            format!("the answer recorded at position {position} cannot be read: {error}"),
        )
    })
}

fn journal_error(error: StoreError) -> ToolError {
    ToolError::with_code(
        ErrorCode::Journal,
        format!("the step could not be recorded: {error}; the call can be retried"),
    )
}
