//! The parameters a tool may take after its arguments: its context and [`State<T>`], checked at
//! compile time per kind of tool through [`PlainParam`], [`DurableParam`] and [`WorkflowParam`].

use std::any::TypeId;
use std::sync::Arc;

use super::{CallContext, DurableContext, ToolContext, WorkflowContext};
use crate::error::ToolError;

/// Typed application state registered on the runtime. As a tool parameter, the runtime checks
/// when it is built that a `T` is registered.
#[derive(Debug)]
pub struct State<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T: ?Sized> std::ops::Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Application state a tool needs, recorded in its descriptor so the runtime can refuse to start
/// without it.
#[derive(Clone, Copy, Debug)]
pub struct Requirement {
    /// The state's type id.
    pub type_id: fn() -> TypeId,
    /// The state's type name, for messages.
    pub type_name: fn() -> &'static str,
}

impl Requirement {
    /// The requirement of state `T`.
    pub const fn of<T: ?Sized + 'static>() -> Self {
        Requirement {
            type_id: TypeId::of::<T>,
            type_name: std::any::type_name::<T>,
        }
    }
}

macro_rules! param_trait {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        pub trait $name: Sized {
            /// The application state this parameter needs, if any.
            const REQUIREMENT: Option<Requirement> = None;
            /// Extracts the parameter from the call.
            fn from_call(cx: &CallContext) -> Result<Self, ToolError>;
        }
    };
}

param_trait!(
    /// A parameter a plain tool may take after its arguments: [`ToolContext`] or [`State<T>`].
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a parameter of a plain tool",
        label = "not a plain tool's context",
        note = "after its arguments a plain tool takes `ToolContext` and `State<T>` parameters; `durable` tools take `DurableContext`, `workflow` tools take `WorkflowContext`"
    )]
    PlainParam
);
param_trait!(
    /// A parameter a `durable` tool may take after its arguments: [`DurableContext`] or [`State<T>`].
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a parameter of a `durable` tool",
        label = "not a durable tool's context",
        note = "a `durable` tool takes `DurableContext` (it has `step`) and `State<T>` parameters"
    )]
    DurableParam
);
param_trait!(
    /// A parameter a `workflow` tool may take after its arguments: [`WorkflowContext`] or [`State<T>`].
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a parameter of a `workflow` tool",
        label = "not a workflow tool's context",
        note = "a `workflow` tool takes `WorkflowContext` (it has `step`, `ask` and `sleep`, and no sandbox) and `State<T>` parameters"
    )]
    WorkflowParam
);

impl PlainParam for ToolContext {
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        Ok(ToolContext { cx: cx.clone() })
    }
}

impl DurableParam for DurableContext {
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        Ok(DurableContext {
            tool: ToolContext { cx: cx.clone() },
        })
    }
}

impl WorkflowParam for WorkflowContext {
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        Ok(WorkflowContext { cx: cx.clone() })
    }
}

impl<T: Send + Sync + 'static> PlainParam for State<T> {
    const REQUIREMENT: Option<Requirement> = Some(Requirement::of::<T>());
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        cx.state::<T>()
    }
}

impl<T: Send + Sync + 'static> DurableParam for State<T> {
    const REQUIREMENT: Option<Requirement> = Some(Requirement::of::<T>());
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        cx.state::<T>()
    }
}

impl<T: Send + Sync + 'static> WorkflowParam for State<T> {
    const REQUIREMENT: Option<Requirement> = Some(Requirement::of::<T>());
    fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        cx.state::<T>()
    }
}
