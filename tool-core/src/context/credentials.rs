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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::future::BoxFuture;

    use super::*;
    use crate::context::{DetachedHost, PlainParam};
    use crate::credentials::{AuthReason, CredentialBroker};
    use crate::error::ToolError;
    use crate::session::{Principal, SessionInfo};

    /// Alice holds a GitHub token; nobody else holds any.
    struct Vault;

    impl CredentialBroker for Vault {
        fn token<'a>(
            &'a self,
            provider: &'a str,
            principal: &'a Principal,
        ) -> BoxFuture<'a, Result<Option<Token>, ToolError>> {
            let found = (provider == "github" && principal.principal_id == "alice")
                .then(|| Token::new("gho_alice"));
            Box::pin(async move { Ok(found) })
        }
    }

    fn context(current: &str, approver: Option<&str>) -> ToolContext {
        let mut session = SessionInfo::new("s1", "t1");
        session.current = Some(Principal::user("sso", current));
        let host = Arc::new(DetachedHost::default().with_credentials(Vault));
        let mut builder = CallContext::builder()
            .session(session)
            .host(host as Arc<dyn crate::CallHost>);
        if let Some(id) = approver {
            builder = builder.approved_by(Some(Principal::user("sso", id)));
        }
        let cx = builder.build();
        ToolContext::from_call(&cx).unwrap()
    }

    fn reason(error: TokenError) -> (AuthReason, TokenHolder) {
        match error {
            TokenError::AuthorizationRequired(required) => (required.reason(), required.holder()),
            TokenError::Unavailable(error) => panic!("the host failed: {error}"),
        }
    }

    #[test]
    fn the_callers_token_is_the_acting_principals_and_the_approvers_is_the_approvers() {
        futures_executor::block_on(async {
            let ctx = context("alice", Some("bob"));
            assert_eq!(ctx.token("github").await.unwrap().secret(), "gho_alice");
            // Bob approved and holds no token: the caller's token does not stand in for it.
            let approver = ctx.approver_token("github").await.unwrap_err();
            assert_eq!(
                reason(approver),
                (AuthReason::Missing, TokenHolder::Approver)
            );

            let ctx = context("bob", Some("alice"));
            assert_eq!(
                ctx.approver_token("github").await.unwrap().secret(),
                "gho_alice"
            );
            let caller = ctx.token("github").await.unwrap_err();
            assert_eq!(reason(caller), (AuthReason::Missing, TokenHolder::Caller));

            // Not approved by anyone: no approver's token.
            let ctx = context("alice", None);
            let none = ctx.approver_token("github").await.unwrap_err();
            assert_eq!(
                reason(none),
                (AuthReason::NotSignedIn, TokenHolder::Approver)
            );
        });
    }
}
