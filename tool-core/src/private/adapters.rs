//! The generic call adapters `#[tool]` calls instead of writing an `async` block for each tool:
//! rustc checks and lowers such a block on every build of the tools' crate, where a generic fn
//! here is instantiated once per tool. Each parses the argument struct, extracts the context
//! parameters, calls the tool (awaiting it, or not for a plain `fn`), and finishes its output as
//! it is; the tag the return type chose ([`ValueTag`](super::ValueTag) or
//! [`ResultTag`](super::ResultTag)) converts it first.
//!
//! The argument struct's parser and each parameter's extractor come in as fn pointers the
//! expansion names at the parameter (`parse_input::<Args>`, `<T as PlainParam>::from_call`), so
//! a type that is not an argument struct or not a context parameter is reported there, once,
//! and not at the call of the adapter.

use serde_json::Value;

use super::{CallContext, ToolError};

/// [`super::parse_input`] for one argument struct, as the adapters take it.
pub type ParseFn<A> = fn(Value) -> Result<A, ToolError>;

/// A context parameter's extractor, as the adapters take it: the parameter trait's `from_call`
/// for the kind of tool (`PlainParam`, `DurableParam`, `WorkflowParam`).
pub type ParamFn<P> = fn(&CallContext) -> Result<P, ToolError>;

/// One adapter: `$name<generics>` (the generics after `A`, the parameters' types and `F`), whose
/// fn returns `$ret` (awaited with `[.await]`, or not with `[]`), under the other `[bounds]`.
macro_rules! adapter {
    (
        $(#[$doc:meta])* $name:ident<$($generic:ident),*>, $ret:ty, [$($await:tt)*],
        [$($bound:tt)*]; $($param:ident: $P:ident),*
    ) => {
        $(#[$doc])*
        #[allow(unused_variables)] // reason: `cx` when there is no parameter to extract
        #[allow(clippy::too_many_arguments)] // reason: one for each of the tool's parameters
        pub fn $name<A, $($P,)* F, $($generic),*>(
            self,
            input: Value,
            cx: CallContext,
            parse: ParseFn<A>,
            $($param: ParamFn<$P>,)*
            f: F,
        ) -> Invoked
        where
            A: 'static,
            $($P: 'static,)*
            F: FnOnce(A $(, $P)*) -> $ret + Send + 'static,
            $($bound)*
        {
            Box::pin(async move {
                let args = parse(input)?;
                $(let $param = $param(&cx)?;)*
                let output = self.into_output(f(args $(, $param)*) $($await)*)?;
                finish(&output, false, None, None)
            })
        }
    };
}

pub(super) use adapter;

/// The adapters for each number of context parameters: `(async name, plain fn name; the
/// parameters' names and types)`. Invoked in `private`, beside the tags: rustc's notes then name
/// an adapter `__private::ValueTag::invoke`.
macro_rules! adapters {
    ($(($invoke:ident, $invoke_sync:ident; $($param:ident: $P:ident),*)),+ $(,)?) => {
        impl ValueTag {
            $(
                adapters::adapter!(
                    /// The call adapter of an `async fn` tool returning its output itself.
                    $invoke<Fut>, Fut, [.await],
                    [Fut: ::std::future::Future + Send + 'static, Fut::Output: ToolOutput + 'static,];
                    $($param: $P),*
                );
                adapters::adapter!(
                    /// The call adapter of a plain `fn` tool returning its output itself.
                    $invoke_sync<T>, T, [], [T: ToolOutput + 'static,];
                    $($param: $P),*
                );
            )+
        }

        impl ResultTag {
            $(
                adapters::adapter!(
                    /// The call adapter of an `async fn` tool returning a `Result`.
                    $invoke<Fut, T, E>, Fut, [.await],
                    [
                        Fut: ::std::future::Future<Output = Result<T, E>> + Send + 'static,
                        T: ToolOutput + 'static,
                        E: IntoToolError + 'static,
                    ];
                    $($param: $P),*
                );
                adapters::adapter!(
                    /// The call adapter of a plain `fn` tool returning a `Result`.
                    $invoke_sync<T, E>, Result<T, E>, [],
                    [T: ToolOutput + 'static, E: IntoToolError + 'static,];
                    $($param: $P),*
                );
            )+
        }
    };
}

pub(super) use adapters;
