//! Bearer tokens over HTTP and the server as an OAuth 2.1 protected resource: the
//! [`TokenVerifier`] a host installs, what it reports ([`VerifiedToken`], [`TokenError`]), the
//! declaration of the protected resource ([`ProtectedResource`]) and a verifier for standard
//! authorization servers ([`IntrospectionVerifier`], RFC 7662).
//!
//! `resource.rs` turns the declaration into what the server publishes (the RFC 9728 metadata
//! document and its routes), `bearer.rs` checks a request's token and answers refusals with
//! the challenges of RFC 6750 and RFC 9728.

use futures_util::future::BoxFuture;
use serde_json::Value;
use toolwright_core::Principal;

mod bearer;
mod introspection;
mod resource;

pub(crate) use bearer::Bearer;
pub use introspection::IntrospectionVerifier;
pub(crate) use resource::Resource;

/// Checks a request's bearer token and says who it belongs to.
///
/// Implement [`verify`](TokenVerifier::verify) alone when the server is not an OAuth protected
/// resource: return the principal, or `Err` with a reason to refuse the request (the client gets
/// `401`). A server declared a [`ProtectedResource`] accepts only tokens issued for it (RFC 8707,
/// as the MCP authorization spec requires) and checks their scopes: implement
/// [`verify_token`](TokenVerifier::verify_token) too, reporting the token's audiences and scopes
/// (from its claims, or from the authorization server). [`IntrospectionVerifier`] does both with
/// any authorization server that offers token introspection.
///
/// ```
/// use futures_util::future::BoxFuture;
/// use toolwright_core::Principal;
/// use toolwright_mcp::{TokenError, TokenVerifier, VerifiedToken};
///
/// /// Tokens the host's own session store issued for this server.
/// struct Sessions;
///
/// impl TokenVerifier for Sessions {
///     fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
///         Box::pin(async move {
///             let checked = self.verify_token(token).await.map_err(|e| e.to_string())?;
///             Ok(checked.principal().clone())
///         })
///     }
///
///     fn verify_token<'a>(
///         &'a self,
///         token: &'a str,
///     ) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
///         Box::pin(async move {
///             match token {
///                 "alice-token" => Ok(VerifiedToken::new(Principal::user("sso", "alice"))
///                     .audience("https://mcp.example.com/mcp")
///                     .scopes(["tools"])),
///                 _ => Err(TokenError::invalid("unknown token; sign in again")),
///             }
///         })
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `TokenVerifier`",
    note = "implement `toolwright_mcp::TokenVerifier` for it (`verify`, and `verify_token` for a protected resource), or use `toolwright_mcp::IntrospectionVerifier`"
)]
pub trait TokenVerifier: Send + Sync + 'static {
    /// The principal `token` authenticates.
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>>;

    /// Everything the server checks about `token`: its principal, the audiences it was issued
    /// for and the scopes it grants. The server calls this, not [`verify`](TokenVerifier::verify).
    ///
    /// The default reports [`verify`](TokenVerifier::verify)'s principal with no audience and no
    /// scope, which is all a server that is not a [`ProtectedResource`] needs; a protected
    /// resource refuses such tokens, since it cannot tell whom they were issued for.
    fn verify_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        Box::pin(async move {
            self.verify(token)
                .await
                .map(VerifiedToken::new)
                .map_err(TokenError::Invalid)
        })
    }
}

/// What a [`TokenVerifier`] found a token to be: whose it is, which resources it was issued for
/// (its audiences, the JWT `aud` claim or the introspection response's `aud`), and which
/// scopes it grants.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedToken {
    principal: Principal,
    audiences: Vec<String>,
    scopes: Vec<String>,
}

impl VerifiedToken {
    /// A token of `principal`, with no audience and no scope yet.
    pub fn new(principal: Principal) -> Self {
        VerifiedToken {
            principal,
            audiences: Vec::new(),
            scopes: Vec::new(),
        }
    }

    /// Adds a resource the token was issued for (an absolute URI as the client requested it with
    /// RFC 8707's `resource`, or another identifier the authorization server uses).
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// Adds scopes the token grants (each one scope, not a space-separated list).
    #[must_use]
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Whose token it is: the caller of the request's calls.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The resources it was issued for.
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    /// The scopes it grants.
    pub fn scopes_granted(&self) -> &[String] {
        &self.scopes
    }
}

impl From<Principal> for VerifiedToken {
    fn from(principal: Principal) -> Self {
        VerifiedToken::new(principal)
    }
}

/// Why a [`TokenVerifier`] did not accept a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is not valid: unknown, expired, revoked, malformed. The client gets `401` with
    /// `error="invalid_token"` and this reason, and should get a new token.
    #[error("{0}")]
    Invalid(String),
    /// The token could not be checked now (the authorization server did not answer, or answered
    /// with an error). The client gets `503` with `Retry-After`, not a `401` that would send it
    /// to authorize again; the reason goes to the server's log (`tracing`), not to the client.
    #[error("{0}")]
    Unavailable(String),
}

impl TokenError {
    /// [`TokenError::Invalid`] with `reason`.
    pub fn invalid(reason: impl Into<String>) -> Self {
        TokenError::Invalid(reason.into())
    }

    /// [`TokenError::Unavailable`] with `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        TokenError::Unavailable(reason.into())
    }
}

/// Declares the HTTP server an OAuth 2.1 protected resource (the MCP authorization spec,
/// RFC 9728), for [`McpHttp::protected_resource`](crate::McpHttp::protected_resource).
///
/// The server then:
///
/// - accepts the resource's host in `Host` (as if given to
///   [`McpHttp::allow_host`](crate::McpHttp::allow_host));
/// - publishes its protected resource metadata (RFC 9728) as JSON at
///   `/.well-known/oauth-protected-resource` and, for a resource with a path, at the
///   path-suffixed form clients try first (`/.well-known/oauth-protected-resource/mcp` for
///   `…/mcp`), without authentication;
/// - answers every request without a valid token with `401` and
///   `WWW-Authenticate: Bearer resource_metadata="…"` (plus `scope="…"` when scopes are required,
///   and `error="invalid_token"` when a token was presented and refused), which is how MCP
///   clients find the authorization server;
/// - accepts only tokens issued for this resource: one of the [`VerifiedToken::audiences`] must
///   be the resource URI (compared without a fragment and a trailing `/`, scheme and host
///   case-insensitively) or an [`accept_audience`](ProtectedResource::accept_audience) value;
/// - answers a valid token that lacks a [`required_scopes`](ProtectedResource::required_scopes)
///   scope with `403` and `error="insufficient_scope"`, so clients ask for it.
///
/// ```no_run
/// # async fn demo(server: toolwright_mcp::McpServer) -> Result<(), toolwright_mcp::McpError> {
/// use toolwright_mcp::{IntrospectionVerifier, McpHttp, ProtectedResource};
///
/// let handle = McpHttp::new(server)
///     .bind("0.0.0.0:8443".parse().unwrap())
///     .protected_resource(
///         ProtectedResource::new("https://auth.example.com")
///             .resource("https://mcp.example.com/mcp")
///             .required_scopes(["mcp:tools"])
///             .resource_name("Example tools"),
///     )
///     .verifier(
///         IntrospectionVerifier::new("https://auth.example.com/oauth2/introspect")
///             .client_credentials("mcp-server", "its secret"),
///     )
///     .start()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ProtectedResource {
    resource: Option<String>,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
    audiences: Vec<String>,
    fields: serde_json::Map<String, Value>,
}

impl ProtectedResource {
    /// A resource whose tokens `authorization_server` issues (its issuer identifier, the URL
    /// clients find its RFC 8414 metadata under).
    pub fn new(authorization_server: impl Into<String>) -> Self {
        ProtectedResource {
            resource: None,
            authorization_servers: vec![authorization_server.into()],
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            audiences: Vec::new(),
            fields: serde_json::Map::new(),
        }
    }

    /// The resource's canonical URI: the URL clients use for the MCP endpoint (e.g.
    /// `https://mcp.example.com/mcp`), which they send as RFC 8707's `resource` and tokens carry
    /// as their audience. `http` or `https`, without a query or fragment. By default the URL the
    /// server listens at, `http://{addr}/mcp`, which suits a server on loopback; behind a proxy
    /// or on a public name, set it.
    #[must_use]
    pub fn resource(mut self, uri: impl Into<String>) -> Self {
        self.resource = Some(uri.into());
        self
    }

    /// Another authorization server whose tokens the resource accepts (the metadata lists them
    /// in order; clients pick one).
    #[must_use]
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// Scopes the resource understands, published as `scopes_supported`: clients without a
    /// `scope` challenge request these.
    #[must_use]
    pub fn scopes_supported(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes_supported
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Scopes every token must grant (also published in `scopes_supported`, and in the
    /// `scope` of every challenge). A valid token without one of them gets `403` with
    /// `error="insufficient_scope"`.
    #[must_use]
    pub fn required_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.required_scopes
            .extend(scopes.into_iter().map(Into::into));
        self
    }

    /// Also accepts tokens whose audience is `audience`, for authorization servers that name a
    /// resource by an identifier of their own (an API identifier, a client id) rather than by
    /// the `resource` the client requested.
    #[must_use]
    pub fn accept_audience(mut self, audience: impl Into<String>) -> Self {
        self.audiences.push(audience.into());
        self
    }

    /// The resource's name for people (RFC 9728 `resource_name`).
    #[must_use]
    pub fn resource_name(self, name: impl Into<String>) -> Self {
        self.field("resource_name", Value::String(name.into()))
    }

    /// A page for developers using the resource (RFC 9728 `resource_documentation`).
    #[must_use]
    pub fn resource_documentation(self, url: impl Into<String>) -> Self {
        self.field("resource_documentation", Value::String(url.into()))
    }

    /// Another field of the metadata document (RFC 9728 section 2: `jwks_uri`,
    /// `resource_policy_uri`, `dpop_signing_alg_values_supported`, …). The fields the server
    /// derives itself (`resource`, `authorization_servers`, `scopes_supported`,
    /// `bearer_methods_supported`) cannot be set this way: starting the server says so.
    #[must_use]
    pub fn field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.fields.insert(name.into(), value);
        self
    }
}
