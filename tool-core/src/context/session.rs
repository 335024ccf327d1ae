//! What a call reaches of its session beyond ids: the session's persistent state, read and
//! written through typed [`StateKey`]s, and the model input of the step that made the call
//! ([`Messages`]).

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{CallContext, DurableContext, ToolContext, WorkflowContext};
use crate::error::{ErrorCode, ToolError};
use crate::session::{RESERVED_STATE_PREFIX, StateKey};

/// The model input of the step that made a call: the messages the model was sent before it
/// answered with the call, oldest first, read-only (see `ctx.messages()`).
///
/// Each message is JSON in the format of whoever ran the step: the model loop
/// (`toolwright::agent`) stores its provider-neutral `Message`s, so
/// `messages.decode::<toolwright::agent::Message>()` reads them back; a host without the loop
/// hands its own through `StepOptions::messages`. Empty when the step carried none (a host
/// that gave none, a call from the user interface, a step recorded by an earlier release).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Messages(Arc<[Value]>);

impl Messages {
    /// The messages `messages`, shared.
    pub fn new(messages: impl Into<Arc<[Value]>>) -> Self {
        Messages(messages.into())
    }

    /// The messages as JSON, oldest first.
    pub fn as_slice(&self) -> &[Value] {
        &self.0
    }

    /// The messages read as `T`; the first that does not fit fails with its position.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<Vec<T>, ToolError> {
        self.0
            .iter()
            .enumerate()
            .map(|(i, message)| {
                T::deserialize(message).map_err(|error| {
                    ToolError::with_code(
                        ErrorCode::ToolFailed,
                        format!(
                            "message {i} of the model input does not read as `{}`: {error}",
                            std::any::type_name::<T>()
                        ),
                    )
                })
            })
            .collect()
    }
}

impl std::ops::Deref for Messages {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.0
    }
}

/// A key a tool may not write: the runtime's own.
fn check_writable(name: &str) -> Result<(), ToolError> {
    if name.starts_with(RESERVED_STATE_PREFIX) || name.is_empty() {
        return Err(ToolError::with_code(
            ErrorCode::InvalidInput,
            format!(
                "session state key `{name}` cannot be written by a tool: keys starting with \
                 `{RESERVED_STATE_PREFIX}` are the runtime's own, and a key needs a name; \
                 choose another name for the `StateKey`"
            ),
        ));
    }
    Ok(())
}

impl CallContext {
    /// The session state's value of `key`, read as `T`.
    pub(super) async fn session_state<T: DeserializeOwned>(
        &self,
        key: &StateKey<T>,
    ) -> Result<Option<T>, ToolError> {
        let Some(value) = self.host().session_state(key.name()).await? else {
            return Ok(None);
        };
        T::deserialize(&value).map(Some).map_err(|error| {
            ToolError::with_code(
                ErrorCode::MissingState,
                format!(
                    "session state `{}` holds a value that does not read as `{}`: {error}; \
                     write it with the same `StateKey` type",
                    key.name(),
                    std::any::type_name::<T>()
                ),
            )
        })
    }

    /// Sets (`Some`) or removes (`None`) `key` in the session state.
    pub(super) async fn write_session_state<T: Serialize>(
        &self,
        key: &StateKey<T>,
        value: Option<&T>,
    ) -> Result<(), ToolError> {
        check_writable(key.name())?;
        let value = value
            .map(serde_json::to_value)
            .transpose()
            .map_err(|error| {
                ToolError::with_code(
                    ErrorCode::ToolFailed,
                    format!(
                        "the value for session state `{}` is not JSON: {error}",
                        key.name()
                    ),
                )
            })?;
        self.host().set_session_state(key.name(), value).await
    }
}

/// The session-state and model-input methods every context has.
macro_rules! session_methods {
    ($($context:ty),*) => {$(
        impl $context {
            /// The value of `key` in the session's persistent state, `None` when unset. In a
            /// `durable` or `workflow` body the read is journaled: a replay reads what the
            /// first run read.
            pub async fn session_state<T: DeserializeOwned>(
                &self,
                key: &StateKey<T>,
            ) -> Result<Option<T>, ToolError> {
                self.cx.session_state(key).await
            }

            /// Sets `key` in the session's persistent state. Conditional tools (`enabled`)
            /// see it from the next step on; the tool list's change is announced then (and
            /// MCP clients are told to list again at once). In a `durable` or `workflow` body
            /// the write is journaled like a step: a replay does not write again.
            pub async fn set_session_state<T: Serialize>(
                &self,
                key: &StateKey<T>,
                value: &T,
            ) -> Result<(), ToolError> {
                self.cx.write_session_state(key, Some(value)).await
            }

            /// Removes `key` from the session's persistent state (journaled like
            /// [`set_session_state`](Self::set_session_state)).
            pub async fn remove_session_state<T: Serialize>(
                &self,
                key: &StateKey<T>,
            ) -> Result<(), ToolError> {
                self.cx.write_session_state(key, None).await
            }

            /// The model input of the step that made this call (see [`Messages`]): the same
            /// after a park, a resume or a crash, since the step records where it is.
            pub async fn messages(&self) -> Result<Messages, ToolError> {
                self.cx.host().messages().await
            }
        }
    )*};
}

session_methods!(ToolContext, DurableContext, WorkflowContext);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::context::{DetachedHost, PlainParam};

    const APPROVED: StateKey<bool> = StateKey::new("approved");
    const RESERVED: StateKey<bool> = StateKey::new("toolwright.ask#1");

    fn context(host: DetachedHost) -> (Arc<DetachedHost>, ToolContext) {
        let host = Arc::new(host);
        let cx = CallContext::builder().host(host.clone()).build();
        (host, ToolContext::from_call(&cx).unwrap())
    }

    #[test]
    fn a_tool_reads_and_writes_typed_session_state() {
        futures_executor::block_on(async {
            let (host, ctx) = context(DetachedHost::default());
            assert_eq!(ctx.session_state(&APPROVED).await.unwrap(), None);
            ctx.set_session_state(&APPROVED, &true).await.unwrap();
            assert_eq!(ctx.session_state(&APPROVED).await.unwrap(), Some(true));
            assert_eq!(host.session_state_now().get("approved"), Some(&json!(true)));
            ctx.remove_session_state(&APPROVED).await.unwrap();
            assert_eq!(ctx.session_state(&APPROVED).await.unwrap(), None);
        })
    }

    #[test]
    fn a_value_of_another_type_is_an_error_naming_the_key() {
        futures_executor::block_on(async {
            let (_, ctx) =
                context(DetachedHost::default().with_session_state("approved", json!("yes")));
            let error = ctx.session_state(&APPROVED).await.unwrap_err();
            assert_eq!(error.code(), ErrorCode::MissingState);
            assert!(error.message().contains("`approved`"), "{error}");
            assert!(error.message().contains("bool"), "{error}");
        })
    }

    #[test]
    fn the_runtimes_keys_cannot_be_written() {
        futures_executor::block_on(async {
            let (host, ctx) = context(DetachedHost::default());
            let error = ctx.set_session_state(&RESERVED, &true).await.unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidInput);
            assert!(error.message().contains("toolwright."), "{error}");
            assert!(host.session_state_now().is_empty());
        })
    }

    #[test]
    fn messages_are_the_hosts_and_decode_as_a_type() {
        futures_executor::block_on(async {
            let (_, ctx) = context(DetachedHost::default());
            assert!(ctx.messages().await.unwrap().is_empty());
            let given = vec![json!({ "text": "hi" }), json!({ "text": "there" })];
            let (_, ctx) = context(DetachedHost::default().with_messages(given.clone()));
            let messages = ctx.messages().await.unwrap();
            assert_eq!(messages.as_slice(), given.as_slice());
            #[derive(serde::Deserialize)]
            struct Text {
                text: String,
            }
            let texts = messages.decode::<Text>().unwrap();
            assert_eq!(texts[1].text, "there");
            let error = messages.decode::<u32>().unwrap_err();
            assert!(error.message().contains("message 0"), "{error}");
        })
    }
}
