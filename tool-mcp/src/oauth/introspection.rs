//! [`IntrospectionVerifier`]: tokens checked by the authorization server that issued them, with
//! OAuth 2.0 Token Introspection (RFC 7662).

use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use toolwright_core::{Principal, PrincipalType};

use super::resource::http_url;
use super::{TokenError, TokenVerifier, VerifiedToken};

/// The most bytes of an introspection response read.
const MAX_RESPONSE: usize = 64 * 1024;

/// Maps an introspection response to the caller.
type PrincipalFn = dyn Fn(&Map<String, Value>) -> Result<Principal, String> + Send + Sync;

/// A [`TokenVerifier`] that asks the authorization server about each token (RFC 7662): the
/// token is valid when the server answers `"active": true` and its `exp` has not passed; its
/// audiences are the response's `aud` (a string or a list) and its scopes the response's
/// `scope`. Most authorization servers offer introspection (Keycloak, Ory Hydra, Okta,
/// Auth0 for opaque tokens, Authlete, …); some include `aud` only when configured to, and a
/// [`ProtectedResource`](crate::ProtectedResource) refuses tokens without an audience.
///
/// The caller is by default the token's subject: [`Principal::user`]`("oauth", sub)` with the
/// response's `iss` as the issuer, or a service principal named by `client_id` for a token
/// without a subject (client credentials); `client_id`, `scope` and `username`, when present,
/// become attributes. [`principal_from`](IntrospectionVerifier::principal_from) changes that.
///
/// The resource server authenticates to the introspection endpoint with
/// [`client_credentials`](IntrospectionVerifier::client_credentials) (HTTP Basic, RFC 6749
/// section 2.3.1) or [`bearer`](IntrospectionVerifier::bearer). Every request the MCP server
/// checks asks the authorization server once; an answer that is not `200` (or no answer in
/// 10 s) is [`TokenError::Unavailable`], so clients are told to retry rather than to
/// authorize again. An `https` endpoint needs this crate's `tls` feature.
///
/// ```
/// use toolwright_mcp::IntrospectionVerifier;
///
/// let verifier = IntrospectionVerifier::new("https://auth.example.com/oauth2/introspect")
///     .client_credentials("mcp-server", "its secret");
/// ```
#[derive(Clone)]
pub struct IntrospectionVerifier {
    endpoint: String,
    credentials: Option<Credentials>,
    principal: Option<Arc<PrincipalFn>>,
    timeout: std::time::Duration,
    /// Built at the first check and shared by clones (its connections are pooled).
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
}

/// How the resource server authenticates to the introspection endpoint.
#[derive(Clone)]
enum Credentials {
    /// HTTP Basic with the client id and secret, each form-encoded.
    Basic(String, String),
    Bearer(String),
}

impl std::fmt::Debug for IntrospectionVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionVerifier")
            .field("endpoint", &self.endpoint)
            .field("authenticated", &self.credentials.is_some())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl IntrospectionVerifier {
    /// Asks the introspection endpoint at `endpoint` (the authorization server's metadata names
    /// it `introspection_endpoint`).
    pub fn new(endpoint: impl Into<String>) -> Self {
        IntrospectionVerifier {
            endpoint: endpoint.into(),
            credentials: None,
            principal: None,
            timeout: std::time::Duration::from_secs(10),
            client: Arc::default(),
        }
    }

    /// Authenticates to the endpoint as the client `client_id` with `client_secret` (HTTP
    /// Basic, both form-encoded as RFC 6749 section 2.3.1 says).
    #[must_use]
    pub fn client_credentials(
        mut self,
        client_id: impl AsRef<str>,
        client_secret: impl AsRef<str>,
    ) -> Self {
        let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        self.credentials = Some(Credentials::Basic(
            encode(client_id.as_ref()),
            encode(client_secret.as_ref()),
        ));
        self
    }

    /// Authenticates to the endpoint with a bearer token of the resource server's own.
    #[must_use]
    pub fn bearer(mut self, token: impl AsRef<str>) -> Self {
        self.credentials = Some(Credentials::Bearer(token.as_ref().to_owned()));
        self
    }

    /// How long to wait for the endpoint (default 10 s).
    #[must_use]
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Who the caller is, from the introspection response of an active token (the whole JSON
    /// object, `sub`, `iss`, `client_id` and any claims the server adds). `Err` refuses the
    /// token with that reason.
    #[must_use]
    pub fn principal_from(
        mut self,
        principal: impl Fn(&Map<String, Value>) -> Result<Principal, String> + Send + Sync + 'static,
    ) -> Self {
        self.principal = Some(Arc::new(principal));
        self
    }

    async fn introspect(&self, token: &str) -> Result<Map<String, Value>, TokenError> {
        let unavailable = |what: String| {
            TokenError::unavailable(format!("token introspection at {}: {what}", self.endpoint))
        };
        http_url(&self.endpoint).map_err(|e| unavailable(format!("the endpoint {e}")))?;
        let client = self
            .client
            .get_or_init(crate::client::http_client)
            .as_ref()
            .map_err(|e| unavailable(e.clone()))?;
        let body: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let request = client
            .post(&self.endpoint)
            .timeout(self.timeout)
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        let request = match &self.credentials {
            Some(Credentials::Basic(id, secret)) => request.basic_auth(id, Some(secret)),
            Some(Credentials::Bearer(token)) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| unavailable(crate::client::chain(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(unavailable(format!(
                "the authorization server answered {status}{}",
                if status == reqwest::StatusCode::UNAUTHORIZED {
                    " (check the resource server's credentials)"
                } else {
                    ""
                }
            )));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| unavailable(crate::client::chain(&e)))?;
        if bytes.len() > MAX_RESPONSE {
            return Err(unavailable(format!(
                "the response is over {MAX_RESPONSE} bytes"
            )));
        }
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(claims)) => Ok(claims),
            _ => Err(unavailable("the response is not a JSON object".into())),
        }
    }
}

impl TokenVerifier for IntrospectionVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
        Box::pin(async move {
            self.verify_token(token)
                .await
                .map(|verified| verified.principal)
                .map_err(|e| e.to_string())
        })
    }

    fn verify_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        Box::pin(async move {
            let claims = self.introspect(token).await?;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            verified(&claims, now, self.principal.as_deref())
        })
    }
}

/// What an introspection response says about its token, `now` seconds after the Unix epoch.
fn verified(
    claims: &Map<String, Value>,
    now: u64,
    principal: Option<&PrincipalFn>,
) -> Result<VerifiedToken, TokenError> {
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenError::invalid(
            "the authorization server says the token is not active (expired, revoked or \
             unknown); authorize again",
        ));
    }
    if claims
        .get("exp")
        .and_then(Value::as_u64)
        .is_some_and(|exp| exp <= now)
    {
        return Err(TokenError::invalid(
            "the token has expired; refresh it or authorize again",
        ));
    }
    let principal = match principal {
        Some(principal) => principal(claims).map_err(TokenError::Invalid)?,
        None => default_principal(claims)?,
    };
    let audiences = match claims.get("aud") {
        Some(Value::String(audience)) => vec![audience.clone()],
        Some(Value::Array(audiences)) => audiences
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let scopes = claims
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .split(' ')
        .filter(|scope| !scope.is_empty());
    Ok(VerifiedToken {
        principal,
        audiences,
        scopes: scopes.map(str::to_owned).collect(),
    })
}

/// The subject as a user, or the client as a service; `iss` as the issuer.
fn default_principal(claims: &Map<String, Value>) -> Result<Principal, TokenError> {
    let text = |key: &str| {
        claims
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let mut principal = match (text("sub"), text("client_id")) {
        (Some(subject), _) => Principal::user("oauth", subject),
        (None, Some(client)) => {
            let mut service = Principal::user("oauth", client);
            service.principal_type = PrincipalType::Service;
            service
        }
        (None, None) => {
            return Err(TokenError::invalid(
                "the authorization server names neither the token's subject (`sub`) nor its \
                 client (`client_id`), so the server cannot tell who calls",
            ));
        }
    };
    principal.issuer = text("iss").map(str::to_owned);
    for key in ["client_id", "scope", "username"] {
        if let Some(value) = text(key) {
            principal
                .attributes
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }
    Ok(principal)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(response: Value) -> Result<VerifiedToken, TokenError> {
        let Value::Object(claims) = response else {
            unreachable!()
        };
        verified(&claims, 1_000, None)
    }

    #[test]
    fn an_active_token_reports_its_subject_audiences_and_scopes() {
        let token = check(json!({
            "active": true, "sub": "alice", "iss": "https://auth.example", "client_id": "app",
            "aud": ["https://mcp.example.com/mcp", "other"], "scope": "tools  read", "exp": 1_001,
        }))
        .unwrap();
        let principal = token.principal();
        assert_eq!(
            (principal.principal_id.as_str(), principal.principal_type),
            ("alice", PrincipalType::User)
        );
        assert_eq!(principal.issuer.as_deref(), Some("https://auth.example"));
        assert_eq!(principal.attribute_str("client_id"), Some("app"));
        assert_eq!(token.audiences(), ["https://mcp.example.com/mcp", "other"]);
        assert_eq!(token.scopes_granted(), ["tools", "read"]);

        let single = check(json!({ "active": true, "client_id": "cron", "aud": "x" })).unwrap();
        assert_eq!(single.principal().principal_type, PrincipalType::Service);
        assert_eq!(single.audiences(), ["x"]);
        assert!(single.scopes_granted().is_empty());
    }

    #[test]
    fn inactive_expired_or_anonymous_tokens_are_invalid() {
        for (response, says) in [
            (json!({ "active": false }), "not active"),
            (json!({ "sub": "alice" }), "not active"),
            (json!({ "active": "true", "sub": "alice" }), "not active"),
            (
                json!({ "active": true, "sub": "alice", "exp": 1_000 }),
                "expired",
            ),
            (json!({ "active": true }), "neither"),
        ] {
            let Err(TokenError::Invalid(reason)) = check(response.clone()) else {
                panic!("{response} passed")
            };
            assert!(reason.contains(says), "{response}: {reason}");
        }
    }

    #[test]
    fn the_host_can_name_the_caller() {
        let Value::Object(claims) = json!({ "active": true, "sub": "a", "tenant": "acme" }) else {
            unreachable!()
        };
        let tenant = |claims: &Map<String, Value>| match claims.get("tenant") {
            Some(Value::String(t)) => {
                Ok(Principal::user("acme-sso", "a").with_attribute("tenant", t.clone()))
            }
            _ => Err("no tenant".to_owned()),
        };
        let token = verified(&claims, 0, Some(&tenant)).unwrap();
        assert_eq!(token.principal().attribute_str("tenant"), Some("acme"));
    }
}
