//! What the console's HTTP tests share: a client that follows no redirect, signing in through
//! the form, and pages fetched and forms posted with the session cookie. Every page fetched is
//! checked for the headers the console promises (never cached, never framed).

#![allow(dead_code)] // reason: each test binary uses its own part of this module

use std::net::SocketAddr;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};

/// A client that shows redirects instead of following them.
pub(crate) fn client() -> reqwest::Client {
    // Loopback HTTP only; reqwest still wants a TLS provider when `tls` is on.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs in at the console on `addr` with `token`: the session cookie and the page's CSRF
/// token. The cookie must be `HttpOnly` and `SameSite=Strict`.
pub(crate) async fn sign_in(addr: SocketAddr, token: &str) -> (String, String) {
    let response = client()
        .post(format!("http://{addr}/login"))
        .form(&[("token", token), ("next", "/inbox")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/inbox");
    let set_cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let page = get(addr, &cookie, "/inbox").await;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("every signed-in page carries the CSRF token in its forms")
        .to_owned();
    (cookie, csrf)
}

/// The page at `path`, which must answer 200 with the console's headers.
pub(crate) async fn get(addr: SocketAddr, cookie: &str, path: &str) -> String {
    let response = client()
        .get(format!("http://{addr}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    let headers = response.headers();
    assert_eq!(headers["cache-control"], "no-store", "GET {path}");
    assert_eq!(headers["x-frame-options"], "DENY", "GET {path}");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(
        policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'"),
        "GET {path}: {policy}"
    );
    response.text().await.unwrap()
}

/// Posts `form` to `path` with the session cookie (and `origin`, when given).
pub(crate) async fn post(
    addr: SocketAddr,
    cookie: &str,
    path: &str,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> reqwest::Response {
    let mut headers = HeaderMap::new();
    headers.insert("cookie", HeaderValue::from_str(cookie).unwrap());
    if let Some(origin) = origin {
        headers.insert("origin", HeaderValue::from_str(origin).unwrap());
    }
    client()
        .post(format!("http://{addr}{path}"))
        .headers(headers)
        .form(form)
        .send()
        .await
        .unwrap()
}
