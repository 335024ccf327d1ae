//! Hooks and webhooks: a `workflow` body waits durably for an outside system (a payment
//! provider's callback, a CI run, another service's event), resumed by a delivery to the
//! hook's token (`Runtime::resume_hook`) or its URL (the route a host mounts).
//!
//! A hook is made once per run position ([`WorkflowContext::hook`]): its token is recorded in
//! the journal, so a replay gets the same token. A delivery is checked against the payload
//! type's JSON Schema, recorded once (a second delivery is refused), and kept until the body
//! waits for it ([`WorkflowContext::wait_hook`]): a delivery that arrives before the body
//! waits is not lost.

use std::marker::PhantomData;
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::WorkflowContext;
use crate::error::{ErrorCode, ToolError};
use crate::workflow::AskAnswer;

/// A hook as its host made it: what a body hands to the outside system, and what identifies
/// it in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookHandle {
    /// The secret that resumes the hook: whoever holds it may deliver once. Give it only to
    /// the system that should answer.
    pub token: String,
    /// The hook's public id (a digest of the token): what records and events name.
    pub id: String,
    /// The name the body gave the hook.
    pub name: String,
    /// For a webhook, the URL that delivers to it (the host's webhook route with the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A hook a `workflow` body waits on for a payload of type `T`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook<T> {
    handle: HookHandle,
    payload: PhantomData<fn() -> T>,
}

impl<T> Hook<T> {
    /// The secret that resumes the hook (`Runtime::resume_hook(token, payload)`).
    pub fn token(&self) -> &str {
        &self.handle.token
    }

    /// The URL that delivers to the hook, for a webhook ([`WorkflowContext::webhook`]);
    /// `None` for a plain hook.
    pub fn url(&self) -> Option<&str> {
        self.handle.url.as_deref()
    }

    /// The hook's public id, as input requests and events name it.
    pub fn id(&self) -> &str {
        &self.handle.id
    }

    /// The name the body gave the hook.
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// The untyped handle.
    pub fn handle(&self) -> &HookHandle {
        &self.handle
    }
}

/// How a wait on a hook ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookEvent<T> {
    /// The outside system delivered this payload.
    Received(T),
    /// Nothing arrived before the wait's deadline ([`WorkflowContext::wait_hook_for`]). The
    /// hook stays open: a delivery that arrives later is kept for the next wait.
    Timeout,
    /// The wait was withdrawn: the call or its turn was cancelled, or a new message ended the
    /// turn's wait. Go on to the body's cleanup.
    Cancelled,
}

impl<T> HookEvent<T> {
    /// The payload, if one arrived.
    pub fn received(self) -> Option<T> {
        match self {
            HookEvent::Received(payload) => Some(payload),
            _ => None,
        }
    }
}

/// A hook needs a name, the same on every run.
fn check_name(name: &str) -> Result<(), ToolError> {
    if name.trim().is_empty() {
        return Err(ToolError::with_code(
            ErrorCode::Journal,
            "a hook needs a name, e.g. `ctx.hook::<Payment>(\"payment-confirmed\")`",
        ));
    }
    Ok(())
}

/// How the host's answer to a wait reads as the body's event.
fn event_of<T: DeserializeOwned>(hook: &str, answer: AskAnswer) -> Result<HookEvent<T>, ToolError> {
    match answer {
        AskAnswer::Received { payload } => serde_json::from_value(payload)
            .map(HookEvent::Received)
            .map_err(|error| {
                ToolError::with_code(
                    ErrorCode::Journal,
                    format!(
                        "the payload delivered to hook `{hook}` passed its schema but cannot be read as {}: {error}; make the payload type's schema say what it reads",
                        std::any::type_name::<T>()
                    ),
                )
            }),
        AskAnswer::Timeout => Ok(HookEvent::Timeout),
        _ => Ok(HookEvent::Cancelled),
    }
}

impl WorkflowContext {
    /// Makes the hook `name`, resumed by a payload of type `T` delivered to its token
    /// ([`Hook::token`]) from any process: `Runtime::resume_hook(token, payload)`. The token is
    /// recorded in the journal, so a replay gets the same hook; hand it to the outside system
    /// inside a step, so it is sent once. Deliveries are checked against `T`'s JSON Schema and
    /// the first one is kept until the body waits for it ([`wait_hook`](Self::wait_hook)).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use toolwright_core::{HookEvent, ToolError, WorkflowContext};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Payment { amount: u64 }
    ///
    /// async fn fulfil(ctx: WorkflowContext) -> Result<String, ToolError> {
    ///     let hook = ctx.hook::<Payment>("payment").await?;
    ///     let token = hook.token().to_owned();
    ///     // Hand the token to the payment provider once: inside a step.
    ///     ctx.step("charge", async move { let _ = token; Ok(()) }).await?;
    ///     Ok(match ctx.wait_hook_for(&hook, Duration::from_secs(3600)).await? {
    ///         HookEvent::Received(payment) => format!("paid {}", payment.amount),
    ///         HookEvent::Timeout | HookEvent::Cancelled => "refunded".to_owned(),
    ///     })
    /// }
    /// ```
    pub async fn hook<T>(&self, name: impl AsRef<str>) -> Result<Hook<T>, ToolError>
    where
        T: JsonSchema + DeserializeOwned,
    {
        self.make_hook::<T>(name.as_ref(), false).await
    }

    /// [`hook`](Self::hook) with a URL ([`Hook::url`]): an HTTP `POST` of the JSON payload
    /// to it delivers, through the webhook route the host mounts (the token in the URL is the
    /// only secret). Fails when the runtime has no webhook URL
    /// (`RuntimeBuilder::webhook_url`).
    pub async fn webhook<T>(&self, name: impl AsRef<str>) -> Result<Hook<T>, ToolError>
    where
        T: JsonSchema + DeserializeOwned,
    {
        self.make_hook::<T>(name.as_ref(), true).await
    }

    async fn make_hook<T: JsonSchema>(&self, name: &str, url: bool) -> Result<Hook<T>, ToolError> {
        check_name(name)?;
        let schema = crate::schema::schema_of::<T>(true).to_value();
        let handle = self.cx.host().create_hook(name, schema, url).await?;
        Ok(Hook {
            handle,
            payload: PhantomData,
        })
    }

    /// Waits for `hook`'s delivery: at once if it arrived already, else the run parks (nothing
    /// waits in memory) until a delivery resumes it. The outcome is journaled.
    pub async fn wait_hook<T>(&self, hook: &Hook<T>) -> Result<HookEvent<T>, ToolError>
    where
        T: DeserializeOwned,
    {
        let answer = self.cx.host().wait_hook(&hook.handle, None).await?;
        event_of(hook.name(), answer)
    }

    /// [`wait_hook`](Self::wait_hook) raced against a deadline `timeout` from when the body
    /// first waits (kept in the store, so it holds across replays and restarts; the
    /// runtime's timer worker fires it): past it the body gets [`HookEvent::Timeout`]. A
    /// delivery that arrives later is kept for the next wait.
    pub async fn wait_hook_for<T>(
        &self,
        hook: &Hook<T>,
        timeout: Duration,
    ) -> Result<HookEvent<T>, ToolError>
    where
        T: DeserializeOwned,
    {
        let answer = self
            .cx
            .host()
            .wait_hook(&hook.handle, Some(timeout))
            .await?;
        event_of(hook.name(), answer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::context::{CallContext, DetachedHost, WorkflowParam};

    #[test]
    fn a_detached_body_cannot_make_a_hook_and_a_hook_needs_a_name() {
        futures_executor::block_on(async {
            let cx = CallContext::builder()
                .host(Arc::new(DetachedHost::default()))
                .build();
            let ctx = <WorkflowContext as WorkflowParam>::from_call(&cx).unwrap();
            let error = ctx.hook::<String>("payment").await.unwrap_err();
            assert_eq!(error.code(), ErrorCode::Journal);
            assert!(error.message().contains("runtime"), "{}", error.message());
            let error = ctx.hook::<String>(" ").await.unwrap_err();
            assert!(error.message().contains("needs a name"));
        })
    }

    #[test]
    fn a_wait_reads_the_payload_as_its_type_and_says_when_it_cannot() {
        let received = event_of::<u32>(
            "h",
            AskAnswer::Received {
                payload: Value::from(7),
            },
        );
        assert_eq!(received.unwrap(), HookEvent::Received(7));
        assert_eq!(
            event_of::<u32>("h", AskAnswer::Timeout).unwrap(),
            HookEvent::Timeout
        );
        assert_eq!(
            event_of::<u32>("h", AskAnswer::Cancelled).unwrap(),
            HookEvent::Cancelled
        );
        let wrong = event_of::<u32>(
            "h",
            AskAnswer::Received {
                payload: Value::from("x"),
            },
        )
        .unwrap_err();
        assert!(wrong.message().contains("cannot be read as u32"));
    }
}
