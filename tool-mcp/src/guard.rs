//! The HTTP guard in front of rmcp's service: the `Host` check, the bearer token, the raw JSON
//! checks, and the places under the session caps for requests that open a session.
//!
//! Refusals, in the order they are checked:
//!
//! | what | status |
//! |---|---|
//! | a `Host` that is not an allowed host, or whose port is not a number | `403` |
//! | an `Origin` that is neither the server's own (the request's `Host`) nor allowed | `403` |
//! | no valid bearer token (with a verifier) | `401`; `403` without a required scope (`oauth/bearer.rs`) |
//! | a body over 4 MiB | `413` |
//! | a `Toolwright-Session` header that is not 1–128 visible ASCII characters | `400` |
//! | a `tools/call` whose raw `arguments` the strict parser refuses | `200`, an `isError` result (as in process) |
//! | a new session when the server holds its maximum | `503`, `Retry-After` |
//! | a new session when the principal holds its maximum | `429`, `Retry-After` |

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::response::Response;

use crate::binding::{BindingKey, Bindings, MAX_SESSION_HEADER, SESSION_HEADER, SharedBinding};
use crate::limits::{ADMITTED, Limits, Owner, SessionOwners};
use crate::oauth::Bearer;
use crate::raw::inspect;

/// The largest request body accepted (as rmcp's own default).
pub(crate) const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the guard checks requests against.
pub(crate) struct Guard {
    /// The bearer token check, with a verifier.
    pub(crate) bearer: Option<Bearer>,
    /// Host names (or `host:port`) accepted in `Host`, loopback names included.
    pub(crate) hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) accepted besides the server's own.
    pub(crate) origins: Vec<String>,
    pub(crate) limits: Arc<Limits>,
    pub(crate) bindings: Arc<Bindings>,
    /// Who opened each rmcp session.
    pub(crate) owners: SessionOwners,
}

/// Runs the checks and hands the request on, with its principal and, for a stateless request,
/// its binding in the extensions.
pub(crate) async fn guard(
    guard: Arc<Guard>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !host_allowed(request.headers(), &guard.hosts) {
        return plain(
            http::StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed",
        );
    }
    if !origin_allowed(request.headers(), &guard.origins) {
        return plain(
            http::StatusCode::FORBIDDEN,
            "Forbidden: Origin header is not allowed",
        );
    }
    let principal = match &guard.bearer {
        None => None,
        Some(bearer) => match bearer.authenticate(request.headers()).await {
            Ok(principal) => Some(principal),
            Err(response) => return *response,
        },
    };
    if let Some(principal) = &principal {
        request.extensions_mut().insert(principal.clone());
    }
    // A session is its opener's: any request naming another principal's session (a POST, the
    // GET stream, a DELETE that would close it) is answered as rmcp answers an unknown one,
    // so a session id learned elsewhere neither works nor tells that it exists.
    if let Some(id) = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        && guard
            .owners
            .someone_elses(id, &Owner::of(principal.as_ref()))
    {
        return plain(http::StatusCode::NOT_FOUND, "Not Found: Session not found");
    }
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return plain(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload Too Large: request body exceeds {MAX_BODY} bytes"),
        );
    };
    let named_session = parts.headers.contains_key("mcp-session-id");
    let inspected = inspect(&bytes, named_session);
    if let Some(error) = inspected.refused {
        return Response::builder()
            .status(http::StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(error))
            .unwrap_or_default();
    }
    // In a session as rmcp will route it: a 2026-07-28 request is served statelessly whatever
    // `Mcp-Session-Id` it carries, so it takes a binding (and its place) like any other.
    let in_session = named_session
        && (inspected.method.as_deref() == Some("initialize")
            || legacy(inspected.meta.as_ref(), &parts.headers));
    let mut request = axum::extract::Request::from_parts(parts, Body::from(bytes));
    match inspected.method.as_deref() {
        // A 2025-11-25 client opens a session: its place is taken here and kept by the
        // session manager until rmcp closes the session.
        Some("initialize") if !in_session => {
            match guard.limits.admit(Owner::of(principal.as_ref())) {
                Ok(slot) => {
                    ADMITTED
                        .scope(Mutex::new(Some(slot)), next.run(request))
                        .await
                }
                Err(refusal) => refusal.into_response(),
            }
        }
        // A 2026-07-28 request: no session, so calls bind by principal and header.
        Some("tools/call" | "tools/list") if !in_session => {
            let conversation = match conversation(request.headers()) {
                Ok(conversation) => conversation,
                Err(response) => return *response,
            };
            let key = BindingKey::new(principal.as_ref(), conversation);
            match guard.bindings.acquire(key) {
                Ok(binding) => {
                    request.extensions_mut().insert(SharedBinding(binding));
                    next.run(request).await
                }
                Err(refusal) => refusal.into_response(),
            }
        }
        _ => next.run(request).await,
    }
}

/// Whether rmcp serves the request with the sessions of the revisions before 2026-07-28 (its
/// lifecycle rule, which it keeps private): unless `_meta` carries the 2026-07-28 request
/// context, or the protocol version it names (else the `MCP-Protocol-Version` header, else
/// 2025-03-26) has no `initialize`.
fn legacy(meta: Option<&rmcp::model::RequestMetaObject>, headers: &http::HeaderMap) -> bool {
    use rmcp::model::ProtocolVersion;
    let discover = meta.is_some_and(|meta| {
        meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
    });
    let version = meta.and_then(|meta| meta.protocol_version()).or_else(|| {
        let header = headers.get("mcp-protocol-version")?.to_str().ok()?;
        serde_json::from_value(serde_json::Value::String(header.to_owned())).ok()
    });
    !discover && version.is_none_or(|version| version.has_initialize())
}

fn plain(status: http::StatusCode, message: &str) -> Response {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(message.to_owned()))
        .unwrap_or_default()
}

/// The `Toolwright-Session` header: absent, or 1 to 128 visible ASCII characters.
fn conversation(headers: &http::HeaderMap) -> Result<Option<String>, Box<Response>> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let valid = value.len() <= MAX_SESSION_HEADER
        && !value.is_empty()
        && value.as_bytes().iter().all(|b| b.is_ascii_graphic());
    if !valid {
        return Err(Box::new(plain(
            http::StatusCode::BAD_REQUEST,
            &format!(
                "the `Toolwright-Session` header must be 1 to {MAX_SESSION_HEADER} visible ASCII \
                 characters (letters, digits, punctuation; no spaces)"
            ),
        )));
    }
    Ok(value.to_str().ok().map(str::to_owned))
}

/// Whether the request's `Host` is allowed: `host` or `host:port` with a port of digits only,
/// where `host` (case-insensitive, IPv6 in brackets) is one of `allowed`, or `allowed` names
/// `host:port` exactly. Anything else, including `127.0.0.1:80.evil.com`, is refused.
pub(crate) fn host_allowed(headers: &http::HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = headers.get(http::header::HOST) else {
        // HTTP/1.1 requires it; rmcp answers a request without one (`400`).
        return true;
    };
    let Some((name, port)) = host.to_str().ok().and_then(split_host) else {
        return false;
    };
    allowed.iter().any(|entry| match split_host(entry) {
        Some((allowed_name, None)) => allowed_name.eq_ignore_ascii_case(name),
        Some((allowed_name, Some(allowed_port))) => {
            allowed_name.eq_ignore_ascii_case(name) && port == Some(allowed_port)
        }
        None => false,
    })
}

/// Whether the request's `Origin` is allowed. A request without one (a client that is not a
/// browser) passes. A browser's request passes when its origin is the server's own, `http` or
/// `https` with the request's `Host` as authority (which [`host_allowed`] has checked), or one of
/// `allowed` (case-insensitive, a trailing `/` ignored); anything else, `null` included, is
/// refused: a web page elsewhere must not reach tools on this machine (the transport's DNS
/// rebinding rule).
pub(crate) fn origin_allowed(headers: &http::HeaderMap, allowed: &[String]) -> bool {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin.to_str().ok().map(|o| o.trim_end_matches('/')) else {
        return false;
    };
    if allowed
        .iter()
        .any(|entry| entry.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let lower = origin.to_ascii_lowercase();
    let Some(authority) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return false;
    };
    let host = headers
        .get(http::header::HOST)
        .and_then(|host| host.to_str().ok());
    split_host(authority).is_some() && host.is_some_and(|host| host.eq_ignore_ascii_case(authority))
}

/// `host[:port]` split strictly: a bracketed IPv6 literal or a name of letters, digits, `-`, `.`
/// and `_`, then optionally `:` and 1 to 5 digits naming a port up to 65535.
fn split_host(authority: &str) -> Option<(&str, Option<u16>)> {
    let (name, rest) = if let Some(inner) = authority.strip_prefix('[') {
        let end = inner.find(']')?;
        let name = &inner[..end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return None;
        }
        (name, &inner[end + 1..])
    } else {
        let end = authority.find(':').unwrap_or(authority.len());
        let name = &authority[..end];
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !name_ok {
            // An unbracketed IPv6 literal in the allow list (`::1`) is a name of its own.
            if authority.contains("::")
                && authority.chars().all(|c| c.is_ascii_hexdigit() || c == ':')
            {
                return Some((authority, None));
            }
            return None;
        }
        (name, &authority[end..])
    };
    if rest.is_empty() {
        return Some((name, None));
    }
    let digits = rest.strip_prefix(':')?;
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, Some(digits.parse().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(host: &str) -> bool {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, host.parse().unwrap());
        let hosts = ["localhost", "127.0.0.1", "::1", "mcp.example:8443"].map(str::to_owned);
        host_allowed(&headers, &hosts)
    }

    fn origin(origin: Option<&str>, host: &str) -> bool {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::HOST, host.parse().unwrap());
        if let Some(origin) = origin {
            headers.insert(http::header::ORIGIN, origin.parse().unwrap());
        }
        origin_allowed(&headers, &["https://App.example/".to_owned()])
    }

    #[test]
    fn the_servers_own_origin_an_allowed_one_or_none_passes() {
        assert!(origin(None, "127.0.0.1:8765"), "not a browser");
        assert!(origin(Some("http://127.0.0.1:8765"), "127.0.0.1:8765"));
        assert!(origin(Some("HTTP://LOCALHOST:8765"), "localhost:8765"));
        assert!(origin(Some("https://[::1]:8765"), "[::1]:8765"));
        assert!(origin(Some("https://app.example"), "127.0.0.1:8765"));
    }

    #[test]
    fn other_origins_are_refused() {
        for other in [
            "https://evil.example",
            "http://127.0.0.1:3000",
            "http://localhost:8765",
            "null",
            "file://",
            "http://127.0.0.1:8765.evil.example",
            "https://app.example.evil",
            "ftp://127.0.0.1:8765",
        ] {
            assert!(!origin(Some(other), "127.0.0.1:8765"), "{other}");
        }
    }

    #[test]
    fn loopback_hosts_with_numeric_ports_pass() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:8765",
            "LOCALHOST:1",
            "[::1]:65535",
            "[::1]",
            "mcp.example:8443",
        ] {
            assert!(allowed(host), "{host}");
        }
    }

    #[test]
    fn other_hosts_and_ports_that_are_not_numbers_are_refused() {
        for host in [
            "127.0.0.1:8765.evil.com",
            "127.0.0.1:80x",
            "127.0.0.1:",
            "127.0.0.1:65536",
            "127.0.0.1:123456",
            "127.0.0.1:+80",
            "127.0.0.1.evil.com",
            "evil.com",
            "localhost@evil.com",
            "[::1].evil.com",
            "[::1]:80:80",
            "mcp.example",
            "mcp.example:443",
            "",
        ] {
            assert!(!allowed(host), "{host}");
        }
    }
}
