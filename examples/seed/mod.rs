//! The tools of the four seed documents, written with toolwright.
//!
//! Every backend is faked in-process with fixed data, so the tools run anywhere without a
//! network: `ops` (service status, logs, restarts, error budgets), `incidents`, `chat` (a reaction
//! that ends the turn), `reports` (streamed and deferred tools), `payments` (a custom approval
//! policy), `deploy` (a response policy and a workflow), `workspace` (a durable tool), `release`
//! (a user-only tool and a conditional one), and the plugin SDK's `wallet` and `treehole` toolsets.

pub(crate) mod chat;
pub(crate) mod deploy;
pub(crate) mod incidents;
pub(crate) mod ops;
pub(crate) mod payments;
pub(crate) mod release;
pub(crate) mod reports;
pub(crate) mod treehole;
pub(crate) mod wallet;
pub(crate) mod workspace;

use toolwright::context::PrincipalType;
use toolwright::{Principal, ToolContext, ToolError};

/// The signed-in user acting in this turn. Identity comes from the session, never from the
/// input; anonymous calls and schedules have no user, and the error tells the model so.
fn signed_in_user(ctx: &ToolContext) -> Result<&Principal, ToolError> {
    ctx.current()
        .filter(|principal| principal.principal_type == PrincipalType::User)
        .ok_or_else(|| {
            ToolError::new(format!(
                "`{}` acts for a signed-in user and this session has none (an anonymous call or \
                 a schedule); ask the user to sign in, then call it again",
                ctx.tool_name()
            ))
        })
}
