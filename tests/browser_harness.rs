//! The browser harness (`tests/support/browser.rs`) against a small page server on
//! `127.0.0.1`: headless Chromium fills and submits a form, the server's answer and the cookie it
//! set come back, a cookie and a header the test sets reach the server, and a screenshot is
//! written. `scripts/setup-clients` installs Chromium and chromedriver (`scripts/test` runs it).

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::response::{AppendHeaders, Html, IntoResponse};
use axum::routing::get;

#[path = "support/browser.rs"]
mod browser;

use browser::Browser;

/// The form page.
async fn form_page() -> Html<&'static str> {
    Html(
        r#"<!doctype html>
<html><head><title>Greeter</title></head>
<body>
  <h1>Greeter</h1>
  <form id="greet" method="post" action="/greet">
    <label>Name <input name="name" id="name" value="placeholder"></label>
    <button type="submit">Greet</button>
  </form>
</body></html>"#,
    )
}

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The form's target: greets the name and sets an `HttpOnly` session cookie derived from it.
async fn greet(body: String) -> impl IntoResponse {
    let name = form_urlencoded::parse(body.as_bytes())
        .find(|(key, _)| key == "name")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    let token = format!("token-{}", name.to_lowercase());
    (
        AppendHeaders([(
            header::SET_COOKIE,
            format!("tw_session={token}; Path=/; HttpOnly; SameSite=Lax"),
        )]),
        Html(format!(
            "<!doctype html><html><body><p id=\"result\">Hello, {}!</p>\
             <a id=\"echo\" href=\"/echo\">echo</a></body></html>",
            escape(&name)
        )),
    )
}

/// Shows the request's `Cookie` and `X-Console-Test` headers as the server got them.
async fn echo(headers: HeaderMap) -> Html<String> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    Html(format!(
        "<!doctype html><html><body><pre id=\"cookie\">{}</pre>\
         <pre id=\"header\">{}</pre></body></html>",
        escape(&get("cookie")),
        escape(&get("x-console-test"))
    ))
}

/// Serves the pages on a free port of `127.0.0.1`; the base URL.
async fn serve() -> String {
    let app = Router::new()
        .route("/", get(form_page))
        .route("/greet", axum::routing::post(greet))
        .route("/echo", get(echo));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port on 127.0.0.1 for the page server");
    let address = listener.local_addr().expect("the listener's address");
    tokio::spawn(async move {
        axum::serve(listener, app)
            .await
            .expect("the page server runs");
    });
    format!("http://{address}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_submitted_in_chromium_round_trips_its_cookie_and_is_screenshotted() {
    let base = serve().await;
    let started = Instant::now();
    let browser = Browser::start().await;
    let ready = started.elapsed();

    browser.goto(&format!("{base}/")).await;
    assert_eq!(browser.text("h1").await, "Greeter");
    browser.fill("#name", "Ada <Lovelace>").await;
    assert_eq!(browser.value("#name").await, "Ada <Lovelace>");
    browser.submit("form#greet").await;
    let greeting = browser.wait_for_text("#result", "Hello").await;
    assert_eq!(greeting, "Hello, Ada <Lovelace>!");
    assert!(browser.current_url().await.ends_with("/greet"));

    // The server's HttpOnly cookie is in the browser, and goes back to the server.
    let token = "token-ada <lovelace>";
    assert_eq!(browser.cookie("tw_session").await.as_deref(), Some(token));
    browser.click("#echo").await;
    let cookies = browser.wait_for_text("#cookie", "tw_session=").await;
    assert!(
        cookies.contains(&format!("tw_session={token}")),
        "{cookies}"
    );

    // A cookie and a header the test sets reach the server too.
    browser.set_cookie("tw_extra", "from-the-test").await;
    browser.set_headers(&[("X-Console-Test", "harness")]).await;
    browser.goto(&format!("{base}/echo")).await;
    assert!(
        browser
            .text("#cookie")
            .await
            .contains("tw_extra=from-the-test")
    );
    assert_eq!(browser.text("#header").await, "harness");
    assert!(browser.source().await.contains("id=\"header\""));
    assert_eq!(browser.cookie("missing").await, None);

    browser.goto(&format!("{base}/")).await;
    browser.wait_for("form#greet").await;
    browser.fill("#name", "Screenshot").await;
    browser.submit("form#greet").await;
    browser.wait_for_text("#result", "Hello, Screenshot!").await;
    let path = browser.screenshot("browser_harness").await;
    let png = std::fs::read(&path).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    assert!(
        path.ends_with("console-screenshots/browser_harness.png"),
        "{}",
        path.display()
    );
    drop(browser);
    eprintln!(
        "browser ready in {ready:?}; whole test {:?}; screenshot {} ({} bytes)",
        started.elapsed(),
        path.display(),
        png.len()
    );
}

#[tokio::test]
#[should_panic(expected = "waited 300ms for `#never` with text containing \"x\" in vain")]
async fn a_wait_in_vain_fails_naming_what_it_waited_for_and_where() {
    let base = serve().await;
    let browser = Browser::start().await;
    browser.goto(&format!("{base}/")).await;
    // On the default single-threaded runtime: the helpers never block it. The panic drops the
    // browser, which ends Chromium and chromedriver.
    browser
        .wait_for_text_within("#never", "x", Duration::from_millis(300))
        .await;
}
