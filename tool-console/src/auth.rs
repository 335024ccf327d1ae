//! Who is asking: sign-in sessions (a verified bearer token traded for a session cookie), the
//! per-session CSRF token, and the [`Operator`] extractor every route takes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::request::Parts;
use http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;
use toolwright_core::Principal;
use toolwright_mcp::VerifiedToken;

use crate::Shared;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "toolwright_console";

/// The most sign-ins kept at once; past it the oldest is dropped.
const MAX_SESSIONS: usize = 10_000;

/// A signed-in person.
#[derive(Clone)]
struct SignedIn {
    principal: Principal,
    csrf: String,
    expires: Instant,
    notice: Option<String>,
}

/// The sign-ins of this console, in memory: a restart signs everyone out.
pub(crate) struct Sessions {
    ttl: Duration,
    map: Mutex<HashMap<String, SignedIn>>,
}

/// 32 random bytes, base64url: a session id or a CSRF token.
fn secret() -> String {
    let mut bytes = [0_u8; 32];
    // The OS's generator does not fail on the systems tokio runs on; were it to, the fallback
    // still differs per call but is guessable, so refuse to go on.
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Sessions {
    pub(crate) fn new(ttl: Duration) -> Sessions {
        Sessions {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// How long a sign-in lasts.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SignedIn>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Signs `principal` in: the new session's id.
    pub(crate) fn sign_in(&self, principal: Principal) -> String {
        let id = secret();
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(id, _)| id.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            SignedIn {
                principal,
                csrf: secret(),
                expires: now + self.ttl,
                notice: None,
            },
        );
        id
    }

    fn get(&self, id: &str) -> Option<SignedIn> {
        let mut map = self.lock();
        match map.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                map.remove(id);
                None
            }
            None => None,
        }
    }

    pub(crate) fn sign_out(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Keeps `notice` for the session's next page.
    pub(crate) fn notify(&self, id: &str, notice: String) {
        if let Some(s) = self.lock().get_mut(id) {
            s.notice = Some(notice);
        }
    }

    /// The notice kept for the session's next page, taken.
    pub(crate) fn take_notice(&self, id: &str) -> Option<String> {
        self.lock().get_mut(id).and_then(|s| s.notice.take())
    }
}

/// The person behind a request: signed in with the session cookie, or sending a bearer token
/// the verifier accepts.
pub(crate) struct Operator {
    pub(crate) principal: Principal,
    /// The session's CSRF token; `None` for a bearer token (no ambient credential to abuse).
    pub(crate) csrf: Option<String>,
    /// The session id; `None` for a bearer token.
    pub(crate) session: Option<String>,
}

impl Operator {
    /// Whether `token`, sent with a form, is this session's CSRF token (always for a bearer
    /// token's requests).
    pub(crate) fn csrf_ok(&self, token: Option<&str>) -> bool {
        match (&self.csrf, token) {
            (None, _) => true,
            (Some(expected), Some(sent)) => expected.as_bytes().ct_eq(sent.as_bytes()).into(),
            (Some(_), None) => false,
        }
    }
}

/// The value of cookie `name` in `headers`.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The bearer token of the `Authorization` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether the request's `Origin`, when it sent one, is the console's own host: browsers send
/// it with every cross-site `POST`, so a form posted from another site is refused even before
/// its CSRF token is looked at.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let origin_host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .trim_end_matches('/');
    origin_host.eq_ignore_ascii_case(host)
}

/// The `Set-Cookie` value of session `id` (or, with `None`, the one that clears it).
pub(crate) fn session_cookie(shared: &Shared, id: Option<&str>, ttl: Duration) -> String {
    let path = if shared.base.is_empty() {
        "/"
    } else {
        &shared.base
    };
    let secure = if shared.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            ttl.as_secs()
        ),
        None => format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// Which verified tokens the console admits: issued for one of `audiences` (any, when none is
/// set) and granting every one of `scopes`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Admission {
    pub(crate) audiences: Vec<String>,
    pub(crate) scopes: Vec<String>,
}

impl Admission {
    /// The principal of `verified` when the console admits it, else why not.
    pub(crate) fn admit(&self, verified: &VerifiedToken) -> Result<Principal, String> {
        if !self.audiences.is_empty()
            && !verified
                .audiences()
                .iter()
                .any(|aud| self.audiences.contains(aud))
        {
            return Err(format!(
                "the token was not issued for this console (its audiences: {}; the console \
                 accepts {}); ask your identity provider for a token for the console",
                list(verified.audiences()),
                list(&self.audiences)
            ));
        }
        let missing: Vec<&str> = self
            .scopes
            .iter()
            .filter(|scope| !verified.scopes_granted().contains(scope))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the token lacks the scope `{}` the console requires; ask for a token with the \
                 scopes `{}`",
                missing.join(" "),
                self.scopes.join(" ")
            ));
        }
        Ok(verified.principal().clone())
    }
}

/// `items` quoted and joined, or `none`.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromRequestParts<Arc<Shared>> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        shared: &Arc<Shared>,
    ) -> Result<Operator, Response> {
        if let Some(token) = bearer(&parts.headers) {
            let admitted = match shared.verifier.verify_token(token).await {
                Ok(verified) => shared.admission.admit(&verified),
                Err(error) => Err(format!(
                    "{error}; send a token the console's verifier accepts"
                )),
            };
            return match admitted {
                Ok(principal) => Ok(Operator {
                    principal,
                    csrf: None,
                    session: None,
                }),
                Err(why) => Err((
                    StatusCode::UNAUTHORIZED,
                    format!("the bearer token was refused: {why}"),
                )
                    .into_response()),
            };
        }
        if let Some(id) = cookie(&parts.headers, COOKIE)
            && let Some(signed) = shared.sessions.get(id)
        {
            return Ok(Operator {
                principal: signed.principal,
                csrf: Some(signed.csrf),
                session: Some(id.to_owned()),
            });
        }
        if parts.method == http::Method::GET {
            let next = parts
                .uri
                .path_and_query()
                .map_or_else(|| shared.link("/"), |p| p.as_str().to_owned());
            let login = format!(
                "{}?next={}",
                shared.link("/login"),
                form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
            );
            return Err(Redirect::to(&login).into_response());
        }
        Err((
            StatusCode::UNAUTHORIZED,
            "sign in first (the console's /login page), or send Authorization: Bearer <token>",
        )
            .into_response())
    }
}

/// `next` when it is a path inside the console (no open redirect to another site), else the
/// console's home. Control characters and spaces are refused: browsers drop tabs and newlines
/// from a URL, so `/\t/evil.example` would lead to `//evil.example`.
pub(crate) fn safe_next(shared: &Shared, next: Option<&str>) -> String {
    match next {
        Some(next)
            if next.starts_with('/')
                && !next.starts_with("//")
                && !next.contains('\\')
                && !next.chars().any(|c| c.is_control() || c.is_whitespace())
                && (shared.base.is_empty()
                    || next.starts_with(&format!("{}/", shared.base))
                    || next == shared.base) =>
        {
            next.to_owned()
        }
        _ => shared.link("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=1; toolwright_console=xyz; b=2".parse().unwrap(),
        );
        assert_eq!(cookie(&headers, COOKIE), Some("xyz"));
        assert_eq!(cookie(&headers, "c"), None);
    }

    #[test]
    fn a_cross_site_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:8766".parse().unwrap());
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, "http://127.0.0.1:8766".parse().unwrap());
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_origin(&headers));
    }

    #[test]
    fn csrf_tokens_must_match() {
        let operator = Operator {
            principal: Principal::user("t", "u"),
            csrf: Some("abc".into()),
            session: Some("s".into()),
        };
        assert!(operator.csrf_ok(Some("abc")));
        assert!(!operator.csrf_ok(Some("abd")));
        assert!(!operator.csrf_ok(None));
    }

    #[test]
    fn sessions_expire_and_sign_out() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let id = sessions.sign_in(Principal::user("t", "u"));
        assert!(sessions.get(&id).is_some());
        sessions.notify(&id, "done".into());
        assert_eq!(sessions.take_notice(&id).as_deref(), Some("done"));
        assert_eq!(sessions.take_notice(&id), None);
        sessions.sign_out(&id);
        assert!(sessions.get(&id).is_none());
        let expired = Sessions::new(Duration::ZERO);
        let id = expired.sign_in(Principal::user("t", "u"));
        assert!(expired.get(&id).is_none());
    }
}
