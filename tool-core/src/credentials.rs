//! Credentials: the tokens of connected services (GitHub, Google, a company API) that a host's
//! [`CredentialBroker`] hands out for a principal.
//!
//! A tool asks for the token of the principal acting in the turn (`ctx.token("github")`), or,
//! on a call a person approved, for the approver's (`ctx.approver_token("github")`; approval is
//! consent, and borrowing the approver's rights is explicit). A missing or expired token is a
//! state the user can fix: [`TokenError::AuthorizationRequired`], which turns into a
//! [`Status`] object or a [`ToolError`] with code `AUTHORIZATION_REQUIRED` and that status as
//! details. Tokens are never journaled, stored, sent in events or shown in prompts: a
//! [`Token`] has no `Serialize`, no `Display`, and its `Debug` hides the secret; durable and
//! workflow bodies ask the broker again on every run.

use std::fmt;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::error::{ErrorCode, ToolError};
use crate::output::Status;
use crate::session::Principal;

/// A secret token for one provider and principal, as the broker handed it out.
///
/// ```
/// use toolwright_core::credentials::Token;
/// let token = Token::new("gho_secret").expiring_at_ms(1_000);
/// assert_eq!(token.secret(), "gho_secret");
/// assert!(!format!("{token:?}").contains("gho_secret"));
/// assert!(token.is_expired_at(1_000));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    secret: String,
    expires_at_ms: Option<u64>,
}

impl Token {
    /// A token with `secret` that does not expire (or whose expiry the broker does not know).
    pub fn new(secret: impl Into<String>) -> Token {
        Token {
            secret: secret.into(),
            expires_at_ms: None,
        }
    }

    /// This token, expiring at `at_ms` (milliseconds since the Unix epoch): from then on the
    /// runtime treats it as missing and asks the user to reconnect.
    pub fn expiring_at_ms(mut self, at_ms: u64) -> Token {
        self.expires_at_ms = Some(at_ms);
        self
    }

    /// The secret, to put in a request header. Never log it or return it from a tool.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// `Bearer <secret>`, the usual `Authorization` header value.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.secret)
    }

    /// When it expires (milliseconds since the Unix epoch), if the broker said.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.expires_at_ms
    }

    /// Whether it has expired at `now_ms`.
    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("secret", &"<redacted>")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

/// What the host installs (`RuntimeBuilder::credentials`) to hand out tokens: a vault, an OAuth
/// store, the host's own session table.
///
/// ```
/// use futures_util::future::BoxFuture;
/// use toolwright_core::credentials::{CredentialBroker, Token};
/// use toolwright_core::{Principal, ToolError};
///
/// struct Vault;
/// impl CredentialBroker for Vault {
///     fn token<'a>(
///         &'a self,
///         provider: &'a str,
///         principal: &'a Principal,
///     ) -> BoxFuture<'a, Result<Option<Token>, ToolError>> {
///         let found = (provider == "github" && principal.principal_id == "alice")
///             .then(|| Token::new("gho_alice"));
///         Box::pin(async move { Ok(found) })
///     }
/// }
/// ```
pub trait CredentialBroker: Send + Sync + 'static {
    /// The token `principal` holds for `provider`; `Ok(None)` when they have not connected it.
    /// An `Err` is the broker failing (its store cannot be reached), not a missing token.
    fn token<'a>(
        &'a self,
        provider: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<Token>, ToolError>>;

    /// How a person connects `provider` (a URL, a command), added to the message a missing
    /// token gives. The default says nothing more.
    fn connect_hint(&self, provider: &str) -> Option<String> {
        let _ = provider;
        None
    }
}

/// Whose token a call asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenHolder {
    /// The principal acting in the turn (`ctx.token`).
    Caller,
    /// The person who approved the call (`ctx.approver_token`, and `require_auth`).
    Approver,
}

/// Why a token cannot be had, in a way the user can fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthReason {
    /// Nobody is signed in: the call has no principal (or it was not approved by one).
    NotSignedIn,
    /// The principal has not connected the provider.
    Missing,
    /// The principal's token expired.
    Expired,
}

/// A token the user can provide: sign in, connect the provider, or reconnect it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationRequired {
    provider: String,
    holder: TokenHolder,
    reason: AuthReason,
    /// Who was asked for (`authenticator:id`), for the message; never a secret.
    principal: Option<String>,
    hint: Option<String>,
}

impl AuthorizationRequired {
    /// `holder`'s token for `provider` cannot be had for `reason`.
    pub fn new(
        provider: impl Into<String>,
        holder: TokenHolder,
        reason: AuthReason,
        principal: Option<&Principal>,
        hint: Option<String>,
    ) -> Self {
        AuthorizationRequired {
            provider: provider.into(),
            holder,
            reason,
            principal: principal.map(|p| format!("{}:{}", p.authenticator, p.principal_id)),
            hint,
        }
    }

    /// The provider.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Whose token it is.
    pub fn holder(&self) -> TokenHolder {
        self.holder
    }

    /// Why it cannot be had.
    pub fn reason(&self) -> AuthReason {
        self.reason
    }

    /// The status object's `status`: `authorization_required` for the caller's token,
    /// `approver_authorization_required` for an approver's.
    pub fn status_name(&self) -> &'static str {
        match self.holder {
            TokenHolder::Caller => "authorization_required",
            TokenHolder::Approver => "approver_authorization_required",
        }
    }

    /// What the model should tell the user and do next.
    pub fn message(&self) -> String {
        let provider = &self.provider;
        let who = self.principal.as_deref().unwrap_or("the user");
        let mut text = match (self.holder, self.reason) {
            (TokenHolder::Caller, AuthReason::NotSignedIn) => format!(
                "`{provider}` needs a signed-in user, and this call has none: ask the user to sign in, then call again"
            ),
            (TokenHolder::Caller, AuthReason::Missing) => format!(
                "{who} has not connected `{provider}`: ask them to connect it, then call again"
            ),
            (TokenHolder::Caller, AuthReason::Expired) => format!(
                "the `{provider}` token of {who} expired: ask them to reconnect `{provider}`, then call again"
            ),
            (TokenHolder::Approver, AuthReason::NotSignedIn) => format!(
                "this call needs the `{provider}` token of the person who approves it, and it was not approved by a signed-in person: it must be approved by someone who connected `{provider}`"
            ),
            (TokenHolder::Approver, AuthReason::Missing) => format!(
                "the approver {who} has not connected `{provider}`: it must be approved by someone who connected `{provider}`"
            ),
            (TokenHolder::Approver, AuthReason::Expired) => format!(
                "the `{provider}` token of the approver {who} expired: they must reconnect `{provider}` and approve again"
            ),
        };
        if let Some(hint) = &self.hint {
            text.push_str(" (");
            text.push_str(hint);
            text.push(')');
        }
        text
    }

    /// The status object: `status`, `kind` (the provider), `methods` (`sign_in`, `connect` or
    /// `reconnect`) and the message.
    pub fn status(&self) -> Status {
        let method = match self.reason {
            AuthReason::NotSignedIn => "sign_in",
            AuthReason::Missing => "connect",
            AuthReason::Expired => "reconnect",
        };
        Status {
            status: self.status_name().to_owned(),
            kind: Some(self.provider.clone()),
            methods: vec![method.to_owned()],
            message: self.message(),
        }
    }
}

impl fmt::Display for AuthorizationRequired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl From<AuthorizationRequired> for ToolError {
    fn from(required: AuthorizationRequired) -> ToolError {
        let details = serde_json::to_value(required.status()).unwrap_or(Value::Null);
        ToolError::with_code(ErrorCode::AuthorizationRequired, required.message()).details(details)
    }
}

/// Why `ctx.token` returned no token.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenError {
    /// The user can fix it: sign in, connect or reconnect the provider.
    AuthorizationRequired(AuthorizationRequired),
    /// The host cannot hand out tokens now: no broker is installed, or the broker failed.
    Unavailable(ToolError),
}

impl TokenError {
    /// The status object of a token the user can provide; `None` when the host failed.
    pub fn status(&self) -> Option<Status> {
        match self {
            TokenError::AuthorizationRequired(required) => Some(required.status()),
            TokenError::Unavailable(_) => None,
        }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::AuthorizationRequired(required) => required.fmt(f),
            TokenError::Unavailable(error) => error.fmt(f),
        }
    }
}

impl From<TokenError> for ToolError {
    fn from(error: TokenError) -> ToolError {
        match error {
            TokenError::AuthorizationRequired(required) => required.into(),
            TokenError::Unavailable(error) => error,
        }
    }
}

/// The error of a host without a broker.
pub fn no_broker(provider: &str) -> ToolError {
    ToolError::with_code(
        ErrorCode::MissingState,
        format!(
            "a `{provider}` token was asked for, and this host has no credential broker: install one with `RuntimeBuilder::credentials`"
        ),
    )
}

/// `holder`'s token for `provider` from `broker`: the principal checked, the broker asked, the
/// expiry checked against `now_ms`. What the runtime's contexts and `require_auth` use.
pub async fn fetch(
    broker: Option<&dyn CredentialBroker>,
    provider: &str,
    principal: Option<&Principal>,
    holder: TokenHolder,
    now_ms: u64,
) -> Result<Token, TokenError> {
    let Some(broker) = broker else {
        return Err(TokenError::Unavailable(no_broker(provider)));
    };
    let required = |reason| {
        TokenError::AuthorizationRequired(AuthorizationRequired::new(
            provider,
            holder,
            reason,
            principal,
            broker.connect_hint(provider),
        ))
    };
    let Some(principal) = principal else {
        return Err(required(AuthReason::NotSignedIn));
    };
    // A broker is the host's code: one that panics fails this token, not the call's caller.
    let asked = std::panic::AssertUnwindSafe(broker.token(provider, principal))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(ToolError::new("the broker panicked")));
    match asked {
        Err(error) => Err(TokenError::Unavailable(ToolError::with_code(
            ErrorCode::Unavailable,
            format!(
                "the credential broker could not hand out a `{provider}` token: {}; try again later",
                error.message()
            ),
        ))),
        Ok(None) => Err(required(AuthReason::Missing)),
        Ok(Some(token)) if token.is_expired_at(now_ms) => Err(required(AuthReason::Expired)),
        Ok(Some(token)) => Ok(token),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct OneToken;
    impl CredentialBroker for OneToken {
        fn token<'a>(
            &'a self,
            provider: &'a str,
            principal: &'a Principal,
        ) -> BoxFuture<'a, Result<Option<Token>, ToolError>> {
            Box::pin(async move {
                match (provider, principal.principal_id.as_str()) {
                    ("github", "alice") => Ok(Some(Token::new("gho_alice"))),
                    ("github", "old") => Ok(Some(Token::new("gho_old").expiring_at_ms(10))),
                    ("vault", _) => Err(ToolError::new("vault sealed")),
                    ("broken", _) => panic!("the vault client crashed"),
                    _ => Ok(None),
                }
            })
        }
        fn connect_hint(&self, provider: &str) -> Option<String> {
            Some(format!(
                "connect at https://example.test/connect/{provider}"
            ))
        }
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        futures_executor::block_on(future)
    }

    #[test]
    fn each_reason_is_a_status_the_user_can_act_on() {
        let broker: &dyn CredentialBroker = &OneToken;
        let alice = Principal::user("sso", "alice");
        let token = run(fetch(
            Some(broker),
            "github",
            Some(&alice),
            TokenHolder::Caller,
            0,
        ));
        assert_eq!(token.unwrap().secret(), "gho_alice");

        let bob = Principal::user("sso", "bob");
        let missing = run(fetch(
            Some(broker),
            "github",
            Some(&bob),
            TokenHolder::Caller,
            0,
        ));
        let status = missing.unwrap_err().status().unwrap();
        assert_eq!(status.status, "authorization_required");
        assert_eq!(status.kind.as_deref(), Some("github"));
        assert_eq!(status.methods, ["connect"]);
        assert!(
            status
                .message
                .contains("sso:bob has not connected `github`")
        );
        assert!(
            status
                .message
                .contains("https://example.test/connect/github")
        );

        let old = Principal::user("sso", "old");
        let expired = run(fetch(
            Some(broker),
            "github",
            Some(&old),
            TokenHolder::Approver,
            10,
        ));
        let status = expired.unwrap_err().status().unwrap();
        assert_eq!(status.status, "approver_authorization_required");
        assert_eq!(status.methods, ["reconnect"]);

        let anonymous = run(fetch(Some(broker), "github", None, TokenHolder::Caller, 0));
        assert_eq!(
            anonymous.unwrap_err().status().unwrap().methods,
            ["sign_in"]
        );
    }

    #[test]
    fn a_failing_or_missing_broker_is_the_hosts_problem_not_the_users() {
        let alice = Principal::user("sso", "alice");
        let broker: &dyn CredentialBroker = &OneToken;
        let failed = run(fetch(
            Some(broker),
            "vault",
            Some(&alice),
            TokenHolder::Caller,
            0,
        ))
        .unwrap_err();
        assert!(failed.status().is_none());
        let error = ToolError::from(failed);
        assert_eq!(error.code(), ErrorCode::Unavailable);
        assert!(error.message().contains("vault sealed"));

        let panicked = run(fetch(
            Some(broker),
            "broken",
            Some(&alice),
            TokenHolder::Caller,
            0,
        ));
        let error = ToolError::from(panicked.unwrap_err());
        assert_eq!(error.code(), ErrorCode::Unavailable);
        assert!(error.message().contains("the broker panicked"), "{error:?}");

        let none = run(fetch(None, "github", Some(&alice), TokenHolder::Caller, 0)).unwrap_err();
        let error = ToolError::from(none);
        assert_eq!(error.code(), ErrorCode::MissingState);
        assert!(error.message().contains("RuntimeBuilder::credentials"));
    }

    #[test]
    fn an_authorization_error_carries_its_status_as_details() {
        let required = AuthorizationRequired::new(
            "github",
            TokenHolder::Caller,
            AuthReason::Missing,
            Some(&Principal::user("sso", "bob")),
            None,
        );
        let error = ToolError::from(required.clone());
        assert_eq!(error.code(), ErrorCode::AuthorizationRequired);
        assert_eq!(error.code().as_str(), "AUTHORIZATION_REQUIRED");
        assert_eq!(
            error.details_value().unwrap()["status"],
            "authorization_required"
        );
        assert_eq!(error.message(), required.to_string());
    }
}
