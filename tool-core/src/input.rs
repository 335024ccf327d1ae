//! Tool arguments: the [`ToolInput`] trait, [`NoInput`], and the call stream of `serve` tools.

use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::CallContext;
use crate::error::ToolError;
use crate::output::CallOutput;

/// The argument struct of a tool: a struct with named fields (or an empty `struct X {}`) that
/// deserializes from, and is described as, a JSON object.
///
/// Implement it with `#[derive(ToolInput)]` beside `Deserialize` and `JsonSchema`; the derive
/// refuses tuple structs, unit structs and enums at compile time, and records the field names as
/// they appear in JSON (after `rename` and `rename_all`), which lets `#[tool]` check rules about
/// fields (a `serve` tool's struct must not declare `task_id`) at compile time.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool argument struct",
    label = "add `#[derive(ToolInput)]` to this type",
    note = "an argument struct is a struct with named fields deriving `Deserialize, JsonSchema, ToolInput`; for a tool without arguments take `NoInput`"
)]
pub trait ToolInput: Send + Sync + 'static {
    /// The JSON names of the fields, in declaration order.
    const FIELDS: &'static [&'static str];
    /// Whether some field is `#[serde(flatten)]`ed (then `FIELDS` is not the whole list).
    const FLATTENS: bool;
    /// The JSON names of the fields marked `#[toolwright(sensitive)]`: the runtime marks them
    /// `writeOnly` in the schema and keeps their values out of records, events, approval
    /// prompts and logs (see [`crate::sensitive`]).
    const SENSITIVE: &'static [&'static str] = &[];
    /// The Rust names of the same fields, which `#[tool]` checks its templates against: a
    /// label or an approval prompt never shows a sensitive field.
    const SENSITIVE_FIELDS: &'static [&'static str] = &[];
}

/// The arguments of a tool that takes none: `async fn now(_: NoInput) -> Stamp`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

impl JsonSchema for NoInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoInput".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object", "properties": {}, "additionalProperties": false })
    }
}

impl ToolInput for NoInput {
    const FIELDS: &'static [&'static str] = &[];
    const FLATTENS: bool = false;
}

/// The calls a `serve` task receives: the first is the call that started the task, the following
/// ones arrive in order as the model calls the tool again with the task's `task_id`.
///
/// The `#[tool]` docs of the `toolwright` crate show a complete `serve` tool.
pub struct ServeCalls<A, T = Value> {
    first: Option<ServeCall<A, T>>,
    cx: CallContext,
    finish: fn(T) -> Result<CallOutput, ToolError>,
    _args: PhantomData<fn() -> A>,
}

impl<A, T> std::fmt::Debug for ServeCalls<A, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeCalls")
            .field("task", &self.cx.call_id())
            .finish_non_exhaustive()
    }
}

/// One call to a `serve` task. Reply once; a call dropped without a reply fails with a message
/// saying so.
pub struct ServeCall<A, T = Value> {
    /// The validated input of this call.
    pub input: A,
    call_id: String,
    key: String,
    cx: CallContext,
    finish: fn(T) -> Result<CallOutput, ToolError>,
    replied: bool,
}

impl<A, T> std::fmt::Debug for ServeCall<A, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeCall")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl<A, T> ServeCall<A, T> {
    /// The id of this call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Whether this call is cancelled: on its own (the turn that made it was cancelled, or the
    /// host cancelled it with `Runtime::cancel_task_call`), or with the whole task. Its turn
    /// has a `CANCELLED` result already and a reply is dropped: stop working on it. A call
    /// cancelled on its own leaves the task serving: take the next one.
    ///
    /// The answer is journaled like a step, so a replay of the body takes the same branch the
    /// first run took: check it between steps, not inside one.
    pub async fn is_cancelled(&self) -> Result<bool, ToolError> {
        self.cx.host().serve_call_is_cancelled(&self.key).await
    }

    /// Completes when this call is cancelled (see [`ServeCall::is_cancelled`]). It is not
    /// journaled: race long work against it *inside* a step, whose recorded value then
    /// stands for the race (`ctx.step("render", async { /* select(work, call.cancelled()) */ })`),
    /// and decide between steps with [`ServeCall::is_cancelled`].
    pub async fn cancelled(&self) {
        let host = self.cx.host();
        futures_util::future::select(host.serve_call_cancelled(&self.key), host.cancelled()).await;
    }

    /// The model input of the step that made this call (see `ctx.messages()`): each revision
    /// has its own, where the body's `ctx.messages()` is the starting call's.
    pub async fn messages(&self) -> Result<crate::context::Messages, ToolError> {
        self.cx.host().serve_call_messages(&self.key).await
    }

    /// Hands back the result of this call; the task then idles until the next call.
    pub fn reply(mut self, output: T) {
        self.replied = true;
        let result = (self.finish)(output);
        self.cx.host().serve_reply(&self.key, result);
    }

    /// Fails this call with `error`; the task keeps serving.
    pub fn fail(mut self, error: ToolError) {
        self.replied = true;
        self.cx.host().serve_reply(&self.key, Err(error));
    }
}

impl<A, T> Drop for ServeCall<A, T> {
    fn drop(&mut self) {
        if !self.replied {
            self.cx.host().serve_reply(
                &self.key,
                Err(ToolError::new(
                    "the serve task finished this call without replying; call `reply` once per call",
                )),
            );
        }
    }
}

impl<A: ToolInput + DeserializeOwned, T> ServeCalls<A, T> {
    /// The next call, or `None` when the task is over (cancelled or closed).
    pub async fn next(&mut self) -> Option<ServeCall<A, T>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            let incoming = self.cx.host().serve_next().await?;
            match serde_json::from_value::<A>(incoming.input) {
                Ok(input) => {
                    return Some(ServeCall {
                        input,
                        call_id: incoming.call_id,
                        key: incoming.key,
                        cx: self.cx.clone(),
                        finish: self.finish,
                        replied: false,
                    });
                }
                Err(error) => self.cx.host().serve_reply(
                    &incoming.key,
                    Err(ToolError::with_code(
                        crate::ErrorCode::InvalidInput,
                        format!("invalid input: {error}"),
                    )),
                ),
            }
        }
    }
}

/// The first parameter of a `serve` tool: [`ServeCalls<Args, Output>`].
#[diagnostic::on_unimplemented(
    message = "the first parameter of a `serve` tool must be `ServeCalls<Args, Output>`, not `{Self}`",
    label = "expected `ServeCalls<Args, Output>`",
    note = "a `serve` task receives its calls one by one: `async fn f(mut calls: ServeCalls<Args, Output>, ctx: WorkflowContext)`"
)]
pub trait ServeInput: Sized {
    /// The argument struct of each call.
    type Args: ToolInput + DeserializeOwned;
    /// What each call replies with.
    type Output: Serialize;
    /// The stream starting with the call `call_id` carrying `first`.
    fn start(
        first: Self::Args,
        cx: CallContext,
        finish: fn(Self::Output) -> Result<CallOutput, ToolError>,
    ) -> Self;
}

impl<A: ToolInput + DeserializeOwned, T: Serialize> ServeInput for ServeCalls<A, T> {
    type Args = A;
    type Output = T;

    fn start(first: A, cx: CallContext, finish: fn(T) -> Result<CallOutput, ToolError>) -> Self {
        let call = ServeCall {
            input: first,
            call_id: cx.call_id().to_owned(),
            key: "#0".to_owned(),
            cx: cx.clone(),
            finish,
            replied: false,
        };
        ServeCalls {
            first: Some(call),
            cx,
            finish,
            _args: PhantomData,
        }
    }
}
