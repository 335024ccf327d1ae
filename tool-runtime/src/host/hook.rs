//! Hooks of workflow bodies, as the host makes and waits on them. A hook has a journal of its
//! own ([`crate::ids::hook_run_id`]): position 0 registers it (the payload's schema and the
//! run that waits), position 1 holds its one delivery, so the first delivery wins in the
//! store and one that arrives before the body waits is kept for it.

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwright_core::{AskAnswer, ErrorCode, HookHandle, ToolError};

use super::RuntimeHost;
use super::journal::answer_at;
use crate::record::{EntryKind, JournalEntry};
use crate::store::{Store, StoreError};
use crate::transition::{HookRef, Suspension};

/// What position 0 of a hook's journal holds: what a delivery is checked against, and the run
/// it resumes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Registration {
    /// The name the body gave the hook.
    pub(crate) name: String,
    /// The payload's JSON Schema.
    pub(crate) schema: Value,
    /// The session of the run.
    pub(crate) session_id: String,
    /// The turn of the call (for a task, the turn that started it).
    pub(crate) turn_id: String,
    /// The call whose body made the hook (for a task, its first call).
    pub(crate) call_id: String,
    /// The task whose body made the hook, if a task's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
}

/// The registration and the delivery (if any) of hook `id`, as the store holds them; `None`
/// when no hook has the id.
pub(crate) async fn lookup(
    store: &dyn Store,
    id: &str,
) -> Result<Option<(Registration, Option<Value>)>, StoreError> {
    let entries = store.journal(&crate::ids::hook_run_id(id)).await?;
    let Some(first) = entries.iter().find(|e| e.position == 0) else {
        return Ok(None);
    };
    let registration: Registration =
        serde_json::from_value(first.value.clone()).map_err(|error| StoreError::Corrupt {
            id: id.to_owned(),
            error: format!("the hook's registration cannot be read: {error}"),
        })?;
    let delivered = entries
        .iter()
        .find(|e| e.position == 1)
        .map(|e| e.value.clone());
    Ok(Some((registration, delivered)))
}

/// The delivery of hook `id`, if one arrived.
pub(crate) async fn delivery(store: &dyn Store, id: &str) -> Result<Option<Value>, StoreError> {
    Ok(lookup(store, id)
        .await?
        .and_then(|(_, delivered)| delivered))
}

/// Records `payload` as hook `id`'s delivery; `false` when one was recorded before.
pub(crate) async fn record_delivery(
    store: &dyn Store,
    id: &str,
    payload: &Value,
) -> Result<bool, StoreError> {
    let entry = JournalEntry {
        position: 1,
        kind: EntryKind::Delivery,
        name: "delivery".into(),
        value: payload.clone(),
    };
    match store
        .append_journal(&crate::ids::hook_run_id(id), &entry)
        .await
    {
        Ok(()) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(error) => Err(error),
    }
}

fn store_error(error: StoreError) -> ToolError {
    ToolError::with_code(
        ErrorCode::Journal,
        format!("the hook could not be recorded: {error}; the call can be retried"),
    )
}

fn only_workflows(what: &str) -> ToolError {
    ToolError::with_code(
        ErrorCode::Journal,
        format!("only a `workflow` tool can {what}: its journal keeps the hook across restarts"),
    )
}

impl RuntimeHost {
    /// `ctx.hook(name)` / `ctx.webhook(name)`: the hook recorded at this position on a
    /// replay; else a fresh token, registered in the hook's own journal before the run's
    /// journal names it (so a token the body hands out always resolves).
    pub(crate) fn create_hook_op<'a>(
        &'a self,
        name: &'a str,
        schema: Value,
        url: bool,
    ) -> BoxFuture<'a, Result<HookHandle, ToolError>> {
        Box::pin(async move {
            let Some(journal) = self.journal_outside_steps() else {
                return Err(only_workflows("make a hook outside a step"));
            };
            let position = journal.next_position();
            let entry_name = crate::ids::hook_name(name);
            let recorded = match journal.recorded_at(position) {
                Some(entry) => journal.replayed_as(entry, EntryKind::Hook, &entry_name)?,
                None => {
                    let handle = self.register_hook(name, schema, url).await?;
                    journal
                        .record(JournalEntry {
                            position,
                            kind: EntryKind::Hook,
                            name: entry_name,
                            value: serde_json::to_value(&handle).unwrap_or(Value::Null),
                        })
                        .await?
                }
            };
            serde_json::from_value(recorded).map_err(|error| {
                ToolError::with_code(
                    ErrorCode::Journal,
                    format!("the hook recorded at position {position} cannot be read: {error}"),
                )
            })
        })
    }

    /// A fresh hook named `name`, registered in its own journal.
    async fn register_hook(
        &self,
        name: &str,
        schema: Value,
        url: bool,
    ) -> Result<HookHandle, ToolError> {
        // A schema no validator accepts would refuse every delivery: say so now.
        toolwright_core::schema::InputValidator::compile(&schema).map_err(|error| {
            ToolError::with_code(
                ErrorCode::Journal,
                format!("the payload type of hook `{name}` has no usable JSON Schema: {error}"),
            )
        })?;
        let url_base = match (url, self.webhook_url.as_deref()) {
            (false, _) => None,
            (true, Some(base)) => Some(base.trim_end_matches('/')),
            (true, None) => {
                return Err(ToolError::with_code(
                    ErrorCode::Unavailable,
                    format!(
                        "webhook `{name}` needs the URL the host serves webhooks at: set `RuntimeBuilder::webhook_url` (and mount the webhook route there), or make a plain hook with `ctx.hook`"
                    ),
                ));
            }
        };
        let token = crate::ids::hook_token();
        let id = crate::ids::hook_id(&token);
        let registration = Registration {
            name: name.to_owned(),
            schema,
            session_id: self.session.id.clone(),
            turn_id: self.session.turn_id.clone(),
            call_id: self.call_id.to_string(),
            task_id: self.task.as_ref().map(|task| task.task_id.clone()),
        };
        let entry = JournalEntry {
            position: 0,
            kind: EntryKind::Hook,
            name: name.to_owned(),
            value: serde_json::to_value(&registration).unwrap_or(Value::Null),
        };
        self.store
            .append_journal(&crate::ids::hook_run_id(&id), &entry)
            .await
            .map_err(store_error)?;
        Ok(HookHandle {
            url: url_base.map(|base| format!("{base}/{token}")),
            token,
            id,
            name: name.to_owned(),
        })
    }

    /// `ctx.wait_hook(hook)`: the outcome recorded at this position on a replay; else the
    /// delivery if it arrived (or an answer a task settled), recorded; else the run parks on
    /// the hook until a delivery, its deadline or a cancel settles the wait.
    pub(crate) fn wait_hook_op<'a>(
        &'a self,
        hook: &'a HookHandle,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<AskAnswer, ToolError>> {
        Box::pin(async move {
            let Some(journal) = self.journal_outside_steps() else {
                return Err(only_workflows("wait on a hook outside a step"));
            };
            let position = journal.next_position();
            let name = crate::ids::wait_name(&hook.name);
            if let Some(entry) = journal.recorded_at(position) {
                return answer_at(
                    position,
                    journal.replayed_as(entry, EntryKind::HookWait, &name)?,
                );
            }
            // Settled on the task (by a delivery, its deadline or a cancel), not journaled yet.
            let settled = self
                .task
                .as_ref()
                .and_then(|task| task.answers.get(&position).cloned());
            let decided = match settled {
                Some(answer) => Some(answer),
                None => match delivery(self.store.as_ref(), &hook.id)
                    .await
                    .map_err(store_error)?
                {
                    Some(payload) => Some(AskAnswer::Received { payload }),
                    None if self.token.is_cancelled() => Some(AskAnswer::Cancelled),
                    None => None,
                },
            };
            if let Some(answer) = decided {
                let recorded = journal
                    .record(JournalEntry {
                        position,
                        kind: EntryKind::HookWait,
                        name,
                        value: serde_json::to_value(&answer).unwrap_or(Value::Null),
                    })
                    .await?;
                return answer_at(position, recorded);
            }
            if let Ok(mut suspended) = self.suspended.lock() {
                let deadline_ms = timeout.map(|timeout| {
                    let timeout = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
                    self.clock.now_ms().saturating_add(timeout)
                });
                *suspended = Some(Suspension::Hook {
                    position,
                    hook: HookRef {
                        id: hook.id.clone(),
                        name: hook.name.clone(),
                    },
                    deadline_ms,
                });
            }
            self.parked.notify_one();
            // The runtime drops the body now; a delivery resumes the run from its journal.
            std::future::pending().await
        })
    }
}
