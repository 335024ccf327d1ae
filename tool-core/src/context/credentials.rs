//! Tokens of connected services in a tool's context: the acting principal's, and on approved
//! calls the approver's (see [`crate::credentials`]).

use super::{CallContext, ToolContext, WorkflowContext};
use crate::credentials::{self, Token, TokenError, TokenHolder};

impl CallContext {
    /// The token of the principal acting in this turn ([`SessionInfo::current`]) for
    /// `provider`, from the host's credential broker; see [`ToolContext::token`].
    ///
    /// [`SessionInfo::current`]: crate::SessionInfo::current
    pub async fn token(&self, provider: &str) -> Result<Token, TokenError> {
        let host = self.host();
        let broker = host.credentials();
        credentials::fetch(
            broker.as_deref(),
            provider,
            self.session().current.as_ref(),
            TokenHolder::Caller,
            host.now_ms(),
        )
        .await
    }

    /// The token of the person who approved this call for `provider`; see
    /// [`ToolContext::approver_token`].
    pub async fn approver_token(&self, provider: &str) -> Result<Token, TokenError> {
        let host = self.host();
        let broker = host.credentials();
        let responder = self.approval().and_then(|grant| grant.responder.as_ref());
        credentials::fetch(
            broker.as_deref(),
            provider,
            responder,
            TokenHolder::Approver,
            host.now_ms(),
        )
        .await
    }
}

macro_rules! token_method {
    ($($context:ty),*) => {$(
        impl $context {
            /// The token of the principal acting in this turn (never the approver's: approval
            /// is consent, not borrowed identity) for `provider`, from the broker the host
            /// installed (`RuntimeBuilder::credentials`).
            ///
            /// Nobody signed in, a provider not connected or an expired token is
            /// [`TokenError::AuthorizationRequired`]: `?` turns it into an error whose details
            /// are the status object, and [`TokenError::status`] gives the object to return as
            /// data. The token is asked for on every run (a durable replay included) and is
            /// never recorded: keep it out of outputs, logs and partial results.
            pub async fn token(&self, provider: &str) -> Result<Token, TokenError> {
                self.cx.token(provider).await
            }
        }
    )*};
}

token_method!(ToolContext, WorkflowContext);

impl ToolContext {
    /// On a call a person approved, that person's token for `provider`: for tools that act
    /// with the approver's rights on purpose (an administrator granting access). Without an
    /// approval by a signed-in person, or when the approver has no valid token, it is
    /// [`TokenError::AuthorizationRequired`] with status `approver_authorization_required`;
    /// it never starts a sign-in. A `durable` tool reaches it through its `ToolContext`. Pair
    /// it with `approval(require_auth = "provider")`, which lets only a person holding the
    /// token approve.
    pub async fn approver_token(&self, provider: &str) -> Result<Token, TokenError> {
        self.cx.approver_token(provider).await
    }
}
