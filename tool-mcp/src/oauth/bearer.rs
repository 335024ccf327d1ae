//! A request's bearer token checked: verified, then, for a protected resource, its audience and
//! scopes. Refusals carry the challenge RFC 6750 (section 3) and RFC 9728 (section 5.1) define.
//!
//! | what | status | `WWW-Authenticate: Bearer …` |
//! |---|---|---|
//! | no bearer token | `401` | `resource_metadata`, `scope` (no `error`: nothing was presented) |
//! | a token the verifier refused, or issued for another resource | `401` | the same, `error="invalid_token"` |
//! | a token without a required scope | `403` | the same, `error="insufficient_scope"` |
//! | the verifier could not check the token now | `503`, `Retry-After` (the reason is logged) | none |
//!
//! (`resource_metadata` and `scope` appear for a protected resource, `scope` when it requires
//! scopes.)

use std::fmt::Write as _;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use toolwright_core::Principal;

use super::{Resource, TokenError, TokenVerifier};

/// What `Retry-After` says when the verifier could not check a token, in seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// How the server checks requests' bearer tokens.
pub(crate) struct Bearer {
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) resource: Option<Arc<Resource>>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    Missing,
    Invalid(String),
    InsufficientScope(String),
    Unavailable(String),
}

impl Bearer {
    /// The principal of the request's bearer token, or the refusal to send.
    pub(crate) async fn authenticate(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<Principal, Box<Response>> {
        self.check(headers)
            .await
            .map_err(|refusal| Box::new(self.refuse(refusal)))
    }

    async fn check(&self, headers: &http::HeaderMap) -> Result<Principal, Refusal> {
        let token = bearer_token(headers).ok_or(Refusal::Missing)?;
        let verified = match self.verifier.verify_token(token).await {
            Ok(verified) => verified,
            Err(TokenError::Invalid(reason)) => {
                return Err(Refusal::Invalid(format!("the token was refused: {reason}")));
            }
            Err(TokenError::Unavailable(reason)) => {
                // The reason stays in the server's log: it may name internal endpoints.
                tracing::warn!("a bearer token could not be checked: {reason}");
                return Err(Refusal::Unavailable(format!(
                    "the token could not be checked now; retry in {RETRY_AFTER_SECS} s"
                )));
            }
        };
        let Some(resource) = &self.resource else {
            return Ok(verified.principal);
        };
        if !verified.audiences.iter().any(|aud| resource.accepts(aud)) {
            return Err(Refusal::Invalid(wrong_audience(
                resource,
                &verified.audiences,
            )));
        }
        let missing: Vec<&str> = resource
            .required_scopes
            .iter()
            .filter(|scope| !verified.scopes.contains(scope))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(format!(
                "the token lacks the scope `{}` this server requires; authorize again asking \
                 for the scopes `{}`",
                missing.join(" "),
                resource.required_scopes.join(" ")
            )));
        }
        Ok(verified.principal)
    }

    fn refuse(&self, refusal: Refusal) -> Response {
        let (status, error, reason) = match refusal {
            Refusal::Missing => (
                http::StatusCode::UNAUTHORIZED,
                None,
                "an `Authorization: Bearer <token>` header is required".to_owned(),
            ),
            Refusal::Invalid(reason) => (
                http::StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                reason,
            ),
            Refusal::InsufficientScope(reason) => (
                http::StatusCode::FORBIDDEN,
                Some("insufficient_scope"),
                reason,
            ),
            Refusal::Unavailable(reason) => {
                return Response::builder()
                    .status(http::StatusCode::SERVICE_UNAVAILABLE)
                    .header(http::header::RETRY_AFTER, RETRY_AFTER_SECS)
                    .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(Body::from(reason))
                    .unwrap_or_default();
            }
        };
        let mut reason = reason;
        if self.resource.is_some() && status == http::StatusCode::UNAUTHORIZED {
            reason.push_str(
                "; the `WWW-Authenticate` header's `resource_metadata` names the protected \
                 resource metadata, which names the authorization server to get a token from",
            );
        }
        Response::builder()
            .status(status)
            .header(
                http::header::WWW_AUTHENTICATE,
                challenge(self.resource.as_deref(), error, &reason),
            )
            .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Body::from(reason))
            .unwrap_or_default()
    }
}

/// Why a token issued for `audiences` is not for `resource`.
fn wrong_audience(resource: &Resource, audiences: &[String]) -> String {
    let named = if audiences.is_empty() {
        "names no audience, so it may have been issued for any resource".to_owned()
    } else {
        format!(
            "was issued for `{}`, not for this server",
            audiences.join("`, `")
        )
    };
    if audiences.is_empty() {
        tracing::warn!(
            "a bearer token was refused: the token verifier reported no audience for it; a \
             protected resource needs `TokenVerifier::verify_token` to report the token's \
             audiences (an introspection response's or a JWT's `aud`)"
        );
    }
    format!(
        "the token {named}; get a token for this server by sending `resource` as `{}` (RFC \
         8707) to the authorization server",
        resource.uri
    )
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The `WWW-Authenticate` value: `Bearer` and its parameters. `resource_metadata`, `scope` and
/// `error` come before the free text of `error_description`, so that clients that find a
/// parameter by searching for `name=` find them first.
fn challenge(resource: Option<&Resource>, error: Option<&str>, description: &str) -> String {
    let mut params = Vec::new();
    if let Some(resource) = resource {
        params.push(format!("resource_metadata=\"{}\"", resource.metadata_url));
        if !resource.required_scopes.is_empty() {
            params.push(format!("scope=\"{}\"", resource.required_scopes.join(" ")));
        }
    }
    if let Some(error) = error {
        params.push(format!("error=\"{error}\""));
        params.push(format!("error_description=\"{}\"", quotable(description)));
    }
    let mut header = String::from("Bearer");
    for (i, param) in params.iter().enumerate() {
        let _ = write!(header, "{}{param}", if i == 0 { " " } else { ", " });
    }
    header
}

/// `text` in the characters RFC 6750 allows in `error_description` (visible ASCII and space,
/// without `"` and `\`); `=` becomes `:` so that no parameter can be read out of it.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            '=' => ':',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use futures_util::future::BoxFuture;

    use super::*;
    use crate::{ProtectedResource, VerifiedToken};

    struct Fixed;

    impl TokenVerifier for Fixed {
        fn verify<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Principal, String>> {
            unreachable!("the server calls verify_token")
        }

        fn verify_token<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
            let alice = VerifiedToken::new(Principal::user("oauth", "alice"));
            Box::pin(async move {
                match token {
                    "good" => Ok(alice
                        .audience("http://127.0.0.1:8765/mcp")
                        .scopes(["tools"])),
                    "narrow" => Ok(alice.audience("http://127.0.0.1:8765/mcp")),
                    "elsewhere" => Ok(alice.audience("https://other.example/mcp")),
                    "nobody's" => Ok(alice),
                    "down" => Err(TokenError::unavailable("the authorization server is down")),
                    _ => Err(TokenError::invalid("unknown token")),
                }
            })
        }
    }

    fn bearer(required: &[&str]) -> Bearer {
        let declared = ProtectedResource::new("http://127.0.0.1:9000")
            .required_scopes(required.iter().copied());
        let resource = Resource::resolve(declared, "127.0.0.1:8765".parse().unwrap()).unwrap();
        Bearer {
            verifier: Arc::new(Fixed),
            resource: Some(Arc::new(resource)),
        }
    }

    async fn check(bearer: &Bearer, authorization: Option<&str>) -> Result<Principal, Refusal> {
        let mut headers = http::HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        }
        bearer.check(&headers).await
    }

    #[tokio::test]
    async fn a_token_for_this_resource_with_its_scopes_passes() {
        let bearer = bearer(&["tools"]);
        for header in ["Bearer good", "bearer good", "BEARER  good "] {
            let principal = check(&bearer, Some(header)).await.unwrap();
            assert_eq!(principal.principal_id, "alice");
        }
    }

    #[tokio::test]
    async fn each_refusal_says_what_failed() {
        let bearer = bearer(&["tools"]);
        assert_eq!(check(&bearer, None).await, Err(Refusal::Missing));
        assert_eq!(
            check(&bearer, Some("Basic good")).await,
            Err(Refusal::Missing)
        );
        assert_eq!(check(&bearer, Some("Bearer ")).await, Err(Refusal::Missing));
        let Err(Refusal::Invalid(unknown)) = check(&bearer, Some("Bearer forged")).await else {
            panic!("a forged token passed")
        };
        assert!(unknown.contains("unknown token"), "{unknown}");
        let Err(Refusal::Invalid(other)) = check(&bearer, Some("Bearer elsewhere")).await else {
            panic!("a token for another resource passed")
        };
        assert!(
            other.contains("issued for `https://other.example/mcp`")
                && other.contains("`http://127.0.0.1:8765/mcp`"),
            "{other}"
        );
        let Err(Refusal::Invalid(none)) = check(&bearer, Some("Bearer nobody's")).await else {
            panic!("a token without an audience passed")
        };
        assert!(none.contains("names no audience"), "{none}");
        let Err(Refusal::InsufficientScope(scope)) = check(&bearer, Some("Bearer narrow")).await
        else {
            panic!("a token without the scope passed")
        };
        assert!(scope.contains("lacks the scope `tools`"), "{scope}");
        assert!(matches!(
            check(&bearer, Some("Bearer down")).await,
            Err(Refusal::Unavailable(_))
        ));
    }

    #[test]
    fn challenges_name_the_metadata_scope_and_error() {
        let bearer = bearer(&["tools", "read"]);
        let header = |refusal| {
            let response = bearer.refuse(refusal);
            let value = &response.headers()[http::header::WWW_AUTHENTICATE];
            (
                response.status().as_u16(),
                value.to_str().unwrap().to_owned(),
            )
        };
        let metadata =
            "resource_metadata=\"http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(
            header(Refusal::Missing),
            (401, format!("Bearer {metadata}, scope=\"tools read\""))
        );
        let (status, invalid) = header(Refusal::Invalid("no \"such\" token = bad\u{e9}".into()));
        assert_eq!(status, 401);
        assert!(
            invalid.starts_with(&format!(
                "Bearer {metadata}, scope=\"tools read\", error=\"invalid_token\", \
                 error_description=\"no 'such' token : bad?; the `WWW-Authenticate`"
            )),
            "{invalid}"
        );
        let (status, scope) = header(Refusal::InsufficientScope("x".into()));
        assert_eq!(status, 403);
        assert!(scope.contains("error=\"insufficient_scope\""), "{scope}");
        let unavailable = bearer.refuse(Refusal::Unavailable("down".into()));
        assert_eq!(unavailable.status(), 503);
        assert_eq!(unavailable.headers()[http::header::RETRY_AFTER], "5");
    }

    #[test]
    fn without_a_protected_resource_the_challenge_is_plain() {
        let bearer = Bearer {
            verifier: Arc::new(Fixed),
            resource: None,
        };
        let missing = bearer.refuse(Refusal::Missing);
        assert_eq!(missing.headers()[http::header::WWW_AUTHENTICATE], "Bearer");
        let invalid = bearer.refuse(Refusal::Invalid("unknown token".into()));
        assert_eq!(
            invalid.headers()[http::header::WWW_AUTHENTICATE],
            "Bearer error=\"invalid_token\", error_description=\"unknown token\""
        );
    }
}
