//! What a body reaches of its session through the host: the session's persistent state (read
//! and written in the store, journaled in durable and workflow bodies) and the model input of
//! the step that made the call.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use toolwright_core::{ErrorCode, Messages, ToolError};

use super::RuntimeHost;
use crate::event::Event;
use crate::record::StepInput;
use crate::store::{Store, StoreError};

/// The model input of a body's step, loaded from the store on first use.
pub(crate) struct StepMessages {
    input: Option<StepInput>,
    loaded: tokio::sync::OnceCell<Messages>,
}

impl StepMessages {
    /// The input the step recorded (`None`: the step carried none).
    pub(crate) fn new(input: Option<StepInput>) -> StepMessages {
        StepMessages {
            input,
            loaded: tokio::sync::OnceCell::new(),
        }
    }

    /// The messages, read from the session's conversation the first time they are asked for.
    async fn get(&self, store: &dyn Store, session_id: &str) -> Result<Messages, ToolError> {
        let load = async {
            match &self.input {
                None => Ok(Messages::default()),
                Some(StepInput::Messages(messages)) => Ok(Messages::new(Arc::clone(messages))),
                Some(StepInput::Conversation { end }) => {
                    let entries = store.conversation(session_id).await.map_err(|error| {
                        unavailable("the model input of the step cannot be read", error)
                    })?;
                    let messages: Vec<Value> = entries
                        .into_iter()
                        .take_while(|entry| entry.position < *end)
                        .map(|entry| entry.message)
                        .collect();
                    Ok(Messages::new(messages))
                }
            }
        };
        self.loaded.get_or_try_init(|| load).await.cloned()
    }
}

fn unavailable(what: &str, error: StoreError) -> ToolError {
    ToolError::with_code(
        ErrorCode::Unavailable,
        format!("{what}: {error}; the call can be retried"),
    )
}

/// The names under which a journaled body records its reads and writes of session state:
/// positions in its journal like its own steps, so a replay returns what the first run read
/// and does not write again.
fn journal_name(op: &str, key: &str) -> String {
    format!("toolwright.state.{op}:{key}")
}

impl RuntimeHost {
    /// The session's value of `key`, from the store.
    async fn read_state(&self, key: &str) -> Result<Option<Value>, ToolError> {
        let session = self
            .store
            .session(&self.session.id)
            .await
            .map_err(|error| unavailable("the session state cannot be read", error))?;
        let (record, _) = session.ok_or_else(|| gone(&self.session.id))?;
        Ok(record.state.get(key).cloned())
    }

    /// Sets or removes `key` in the session's record, then tells the session's watchers (the
    /// MCP server lists again; conditional tools are re-evaluated at the next step).
    async fn write_state(&self, key: &str, value: Option<Value>) -> Result<(), ToolError> {
        let change = |record: &mut crate::record::SessionRecord| match &value {
            Some(value) => {
                record.state.insert(key.to_owned(), value.clone());
            }
            None => {
                record.state.remove(key);
            }
        };
        let found = crate::store::update_session(&*self.store, &self.session.id, change)
            .await
            .map_err(|error| unavailable("the session state cannot be written", error))?;
        if !found {
            return Err(gone(&self.session.id));
        }
        let _ = self.events.send(Event::SessionChanged {
            session_id: self.session.id.clone(),
        });
        Ok(())
    }

    pub(super) fn session_state_op<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        Box::pin(async move {
            let Some(journal) = self.journal_outside_steps() else {
                return self.read_state(key).await;
            };
            let read = Box::pin(async move { Ok(boxed(self.read_state(key).await?)) });
            let recorded = journal
                .step(&journal_name("get", key), read, &|_, _| {})
                .await?;
            Ok(unboxed(recorded))
        })
    }

    pub(super) fn set_session_state_op<'a>(
        &'a self,
        key: &'a str,
        value: Option<Value>,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            let Some(journal) = self.journal_outside_steps() else {
                return self.write_state(key, value).await;
            };
            let recorded = boxed(value.clone());
            let write = Box::pin(async move {
                self.write_state(key, value).await?;
                Ok(recorded)
            });
            journal
                .step(&journal_name("set", key), write, &|_, _| {})
                .await
                .map(drop)
        })
    }

    pub(super) fn messages_op(&self) -> BoxFuture<'_, Result<Messages, ToolError>> {
        Box::pin(self.messages.get(&*self.store, &self.session.id))
    }

    /// The model input of the step that made `serve` call `key` (`#<index>`).
    pub(super) fn serve_call_messages_op<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Messages, ToolError>> {
        Box::pin(async move {
            let index = key.strip_prefix('#').and_then(|n| n.parse::<usize>().ok());
            let call = self
                .task
                .as_ref()
                .zip(index)
                .and_then(|(task, index)| task.calls.get(index));
            let Some(call) = call else {
                return self.messages.get(&*self.store, &self.session.id).await;
            };
            StepMessages::new(call.step_input.clone())
                .get(&*self.store, &self.session.id)
                .await
        })
    }
}

/// A state value as the journal records it: `{"value": ...}`, or `{}` for none (so that a
/// key set to `null` and an unset key stay apart).
fn boxed(value: Option<Value>) -> Value {
    let mut map = Map::new();
    if let Some(value) = value {
        map.insert("value".to_owned(), value);
    }
    Value::Object(map)
}

fn unboxed(mut recorded: Value) -> Option<Value> {
    recorded.get_mut("value").map(Value::take)
}

fn gone(session_id: &str) -> ToolError {
    ToolError::with_code(
        ErrorCode::Unavailable,
        format!("the session `{session_id}` is gone (deleted from the store) and keeps no state"),
    )
}
