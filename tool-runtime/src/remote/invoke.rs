//! How a remote tool's calls reach its connection's current session.

use std::sync::{Arc, Weak};

use futures_util::future::BoxFuture;
use serde_json::Value;
use toolwright_core::{CallContext, CallOutput, ErrorCode, RemoteInvoke, ToolError, names};

use super::ConnectionState;
use super::links::Link;

/// Runs calls of one remote tool through its connection's current session.
pub(super) struct LinkInvoker {
    link: Weak<Link>,
    tool: String,
    /// The definition this tool was built from: a call runs only while it is the one the
    /// connection holds, approved.
    digest: String,
}

impl LinkInvoker {
    /// The invoker of `link`'s tool `tool`, built from the definition with `digest`.
    pub(super) fn new(link: &Arc<Link>, tool: &str, digest: &str) -> LinkInvoker {
        LinkInvoker {
            link: Arc::downgrade(link),
            tool: tool.to_owned(),
            digest: digest.to_owned(),
        }
    }
}

impl RemoteInvoke for LinkInvoker {
    fn invoke(
        &self,
        input: Value,
        cx: CallContext,
    ) -> BoxFuture<'static, Result<CallOutput, ToolError>> {
        let Some(link) = self.link.upgrade() else {
            return Box::pin(async {
                Err(ToolError::with_code(
                    ErrorCode::Unavailable,
                    "the runtime is shutting down",
                ))
            });
        };
        let (session, state, listed, current) = {
            let guard = link.lock();
            let current = guard
                .tools
                .iter()
                .filter_map(|t| t.remote_tool())
                .find(|r| r.definition().name == self.tool)
                .map(|r| (r.digest() == self.digest, r.withheld().is_some()));
            (
                guard.session.clone(),
                guard.connection.clone(),
                guard.listed,
                current,
            )
        };
        let name = names::model_name(Some(&link.decl.name), &self.tool);
        // The last check before anything reaches the server: a step resolves its tools when it
        // begins, and the server may have changed this one since.
        let refusal = match current {
            Some((true, false)) => None,
            Some(_) => Some(format!(
                "`{name}` did not run: its server changed its definition since this call was prepared; call it again (a person approves the new definition first)"
            )),
            None if listed => Some(format!(
                "`{name}` did not run: its server no longer lists it"
            )),
            None => None,
        };
        if let Some(message) = refusal {
            return Box::pin(async move { Err(ToolError::with_code(ErrorCode::Denied, message)) });
        }
        match session {
            Some(session) => session.call_tool(self.tool.clone(), input, cx),
            None => {
                let why = match state {
                    ConnectionState::Down { error, .. } => {
                        format!("its server cannot be reached ({error})")
                    }
                    ConnectionState::Refused { error } => format!("it was refused ({error})"),
                    _ => "it is not connected yet".to_owned(),
                };
                let message = format!(
                    "`{name}` cannot be called now: connection `{}` is down, {why}; the runtime reconnects in the background, so try again in a moment or do without this tool",
                    link.decl.name
                );
                Box::pin(async move { Err(ToolError::with_code(ErrorCode::Unavailable, message)) })
            }
        }
    }
}
