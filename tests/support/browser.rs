//! Headless Chromium for the browser tests, driven over WebDriver: [`Browser::start`] starts
//! `chromedriver` on a free loopback port, opens a session in a fresh profile and offers the few
//! steps a test of a web page takes (go to a URL, fill and submit a form, wait for text, cookies,
//! an extra request header, screenshots). `scripts/setup-clients` installs Debian's `chromium`
//! and `chromium-driver` (`scripts/test` runs it); a missing browser fails the test rather than
//! skipping it.
//!
//! A test includes this module with `#[path = "support/browser.rs"] mod browser;` (it does not
//! need the rest of `support`, so other binaries don't build it). Run it on a multi-threaded
//! runtime (`#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`) when the server under
//! test runs in the same process: then a blocking step never stalls the server.
//!
//! Every step is bounded: a WebDriver command fails after [`COMMAND_TIMEOUT`], a wait after
//! [`WAIT_TIMEOUT`] (or the timeout given to the `_within` variant), with a message that names
//! what was awaited, the page's URL and the start of its source. The helpers panic rather than
//! return errors, as test helpers here do; [`Browser::client`] gives the fantoccini client for
//! anything else. Dropping the [`Browser`], a panic's unwinding included, ends the session (which
//! makes chromedriver quit Chromium), then SIGKILLs chromedriver's process group (Chromium's
//! processes are in it too; its crash handlers, which put themselves in groups of their own,
//! exit with it) and reaps chromedriver, and removes the profile. Chromium's helper processes
//! that outlive their parent by a moment are reparented to the machine's init, which reaps them
//! within seconds. Only a SIGKILL of the test process itself leaves the driver and browser
//! running. Chromium's home (`HOME`, `XDG_CONFIG_HOME`, `XDG_CACHE_HOME`: its crash database,
//! NSS and dconf files) is in the same temporary directory, so nothing is left in the user's.
//!
//! Screenshots go to `target/console-screenshots/<name>.png` ([`screenshot_dir`]), where CI and a
//! person can look at them after the run.

#![allow(
    dead_code,
    reason = "each test binary that includes the module uses only part of it"
)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use process_wrap::std::{ChildWrapper, CommandWrap, ProcessGroup};
use serde_json::{Value, json};

/// Where Debian's `chromium` package puts the browser.
pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// Where Debian's `chromium-driver` package puts the WebDriver server.
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The longest a single WebDriver command (a navigation included) may take before the test fails.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a page may take to load, or a script to run, in chromedriver's own reckoning.
const PAGE_TIMEOUT: Duration = Duration::from_secs(45);
/// The longest the `wait_for` helpers wait by default. Generous: CI machines have 2 cores that
/// the rest of the suite keeps busy.
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest chromedriver may take to answer ready on `/status`, and the session to open.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the waits look again.
const POLL: Duration = Duration::from_millis(50);
/// Attempts at starting chromedriver: a free port can be taken between choosing and binding it.
const START_ATTEMPTS: usize = 3;

/// The flags Chromium runs with: headless, no sandbox (tests run as root in CI), and none of
/// the background traffic (updates, sync, QUIC probes) a test machine has no network for.
const CHROMIUM_ARGS: [&str; 10] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// Headless Chromium driven through its own chromedriver, in a fresh profile. See the module's
/// documentation; dropping it ends the browser and the driver.
#[derive(Debug)]
pub(crate) struct Browser {
    client: Client,
    /// The WebDriver session's id, for ending it from `Drop` without the async client.
    session: String,
    driver: Driver,
    /// The profile (`--user-data-dir`) and chromedriver's log; removed after both have ended.
    _dir: tempfile::TempDir,
}

/// The chromedriver process, the leader of its own process group.
struct Driver {
    child: Box<dyn ChildWrapper>,
    port: u16,
    log: PathBuf,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("pid", &self.child.id())
            .field("port", &self.port)
            .finish()
    }
}

impl Browser {
    /// Starts chromedriver and opens a session in headless Chromium. Panics, saying what to do,
    /// when either binary is missing (run `scripts/setup-clients`), chromedriver does not answer
    /// ready within a minute, or Chromium does not start.
    pub(crate) async fn start() -> Browser {
        for (binary, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: run `scripts/setup-clients`, which installs Debian's \
                 `{package}` (`scripts/test` runs it)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("toolwright-browser-")
            .tempdir()
            .expect("a temporary directory for the browser's profile (is the temp dir writable?)");
        let driver = Driver::start(dir.path()).await;
        let profile = dir.path().join("profile");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|arg| arg.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            // Below COMMAND_TIMEOUT, so that chromedriver's own error comes first.
            "timeouts": {
                "pageLoad": PAGE_TIMEOUT.as_millis() as u64,
                "script": PAGE_TIMEOUT.as_millis() as u64,
                "implicit": 0,
            },
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("the capabilities are an object")
        };
        let url = format!("http://127.0.0.1:{}", driver.port);
        let connect = async {
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(capabilities)
                .connect(&url)
                .await
        };
        let client = match tokio::time::timeout(STARTUP_TIMEOUT, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => panic!(
                "chromedriver could not start Chromium ({CHROMIUM}): {error}\n\
                 chromedriver's log ({}):\n{}",
                driver.log.display(),
                driver.log_tail()
            ),
            Err(_) => panic!(
                "Chromium did not start within {STARTUP_TIMEOUT:?} (is the machine overloaded?)\n\
                 chromedriver's log ({}):\n{}",
                driver.log.display(),
                driver.log_tail()
            ),
        };
        let session = client
            .session_id()
            .await
            .expect("the new session's id (kept by the client, no request)")
            .expect("a session was opened");
        Browser {
            client,
            session,
            driver,
            _dir: dir,
        }
    }

    /// The fantoccini client, for what the helpers don't cover.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Navigates to `url` and waits until it has loaded (the document's `load` event).
    pub(crate) async fn goto(&self, url: &str) {
        self.command(&format!("go to {url}"), self.client.goto(url))
            .await;
    }

    /// The URL the browser is at.
    pub(crate) async fn current_url(&self) -> String {
        self.command("read the current URL", self.client.current_url())
            .await
            .to_string()
    }

    /// The element `css` matches, now (no waiting: see [`Browser::wait_for`]).
    pub(crate) async fn find(&self, css: &str) -> Element {
        match self.try_command(self.client.find(Locator::Css(css))).await {
            Ok(element) => element,
            Err(error) => self.fail(&format!("find `{css}`: {error}")).await,
        }
    }

    /// Every element `css` matches now, in document order (none is no error).
    pub(crate) async fn find_all(&self, css: &str) -> Vec<Element> {
        self.command(
            &format!("find all `{css}`"),
            self.client.find_all(Locator::Css(css)),
        )
        .await
    }

    /// Clicks the element `css` matches (WebDriver scrolls it into view first).
    pub(crate) async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.command(&format!("click `{css}`"), element.click())
            .await;
    }

    /// Replaces the value of the form field `css` matches with `value`, typed as keys (so the
    /// page's input events fire).
    pub(crate) async fn fill(&self, css: &str, value: &str) {
        let element = self.find(css).await;
        self.command(&format!("clear `{css}`"), element.clear())
            .await;
        self.command(&format!("type into `{css}`"), element.send_keys(value))
            .await;
    }

    /// Submits the form `css` matches as a person would: clicks its first submit button, or,
    /// when it has none, calls `requestSubmit()` (which runs validation and `submit` handlers).
    /// It does not wait for the next page: wait for what it shows ([`Browser::wait_for_text`]).
    pub(crate) async fn submit(&self, css: &str) {
        let form = self.find(css).await;
        let buttons = self
            .command(
                &format!("find the submit button of `{css}`"),
                form.find_all(Locator::Css(
                    "button[type=submit], input[type=submit], button:not([type])",
                )),
            )
            .await;
        match buttons.first() {
            Some(button) => {
                self.command(
                    &format!("click the submit button of `{css}`"),
                    button.click(),
                )
                .await
            }
            None => {
                let form = serde_json::to_value(&form).expect("an element serializes");
                self.execute("arguments[0].requestSubmit()", vec![form])
                    .await;
            }
        }
    }

    /// The rendered text of the element `css` matches now (as a person sees it: hidden parts
    /// are left out).
    pub(crate) async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        self.command(&format!("read the text of `{css}`"), element.text())
            .await
    }

    /// The value of the form field `css` matches now.
    pub(crate) async fn value(&self, css: &str) -> String {
        let element = self.find(css).await;
        self.command(&format!("read the value of `{css}`"), element.prop("value"))
            .await
            .unwrap_or_default()
    }

    /// The page's source as the DOM has it now (scripts' changes included).
    pub(crate) async fn source(&self) -> String {
        self.command("read the page source", self.client.source())
            .await
    }

    /// Runs `script` in the page as a function body (`return` gives the result; the `args` are
    /// `arguments[0]`, ... and may be elements) and gives what it returned.
    pub(crate) async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.command(
            &format!("run the script `{script}`"),
            self.client.execute(script, args),
        )
        .await
    }

    /// Waits until an element matches `css`, for at most [`WAIT_TIMEOUT`].
    pub(crate) async fn wait_for(&self, css: &str) -> Element {
        self.wait_for_within(css, WAIT_TIMEOUT).await
    }

    /// Waits until an element matches `css`, for at most `timeout`.
    pub(crate) async fn wait_for_within(&self, css: &str, timeout: Duration) -> Element {
        let what = format!("an element matching `{css}`");
        self.poll(&what, timeout, || async {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => Ok(Some(element)),
                Err(error) if is_not_found(&error) => Ok(None),
                Err(error) => Err(error),
            }
        })
        .await
    }

    /// Waits until the text of the element `css` matches contains `needle`, for at most
    /// [`WAIT_TIMEOUT`], and gives that text. The element may appear, or be replaced (a page
    /// load), meanwhile.
    pub(crate) async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        self.wait_for_text_within(css, needle, WAIT_TIMEOUT).await
    }

    /// Waits until the text of the element `css` matches contains `needle`, for at most
    /// `timeout`, and gives that text.
    pub(crate) async fn wait_for_text_within(
        &self,
        css: &str,
        needle: &str,
        timeout: Duration,
    ) -> String {
        let what = format!("`{css}` with text containing {needle:?}");
        self.poll(&what, timeout, || async {
            let element = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element,
                Err(error) if is_not_found(&error) => return Ok(None),
                Err(error) => return Err(error),
            };
            match element.text().await {
                Ok(text) if text.contains(needle) => Ok(Some(text)),
                Ok(_) => Ok(None),
                // Replaced by a page load between the find and the read.
                Err(error) if is_not_found(&error) => Ok(None),
                Err(error) => Err(error),
            }
        })
        .await
    }

    /// Waits until the browser's URL contains `needle`, for at most [`WAIT_TIMEOUT`], and gives
    /// the URL.
    pub(crate) async fn wait_for_url(&self, needle: &str) -> String {
        let what = format!("a URL containing {needle:?}");
        self.poll(&what, WAIT_TIMEOUT, || async {
            let url = self.client.current_url().await?.to_string();
            Ok(url.contains(needle).then_some(url))
        })
        .await
    }

    /// Sets cookie `name` to `value` (path `/`, `SameSite=Lax`) for the host of the page the
    /// browser is at: WebDriver only sets cookies for the current document's domain, so
    /// [`Browser::goto`] a page of the server first. The next requests to it carry the cookie.
    /// `value` is sent as is: no `;`, `,`, spaces or quotes.
    pub(crate) async fn set_cookie(&self, name: &str, value: &str) {
        // fantoccini sends an unset domain as `null`, which chromedriver refuses, and an unset
        // SameSite as `None`, which Chromium drops from a cookie that is not `Secure`.
        let url = self
            .command("read the current URL", self.client.current_url())
            .await;
        let Some(host) = url.host_str() else {
            panic!(
                "set cookie `{name}`: the browser is at {url}, which has no host; go to a page \
                 of the cookie's server first"
            )
        };
        // (`SameSite` is not re-exported: a parsed cookie carries it.)
        let mut cookie = fantoccini::cookies::Cookie::parse("name=value; SameSite=Lax")
            .expect("a valid cookie string");
        cookie.set_name(name.to_owned());
        cookie.set_value(value.to_owned());
        cookie.set_path("/");
        cookie.set_domain(host.to_owned());
        self.command(
            &format!("set cookie `{name}` (go to a page of its server first)"),
            self.client.add_cookie(cookie),
        )
        .await;
    }

    /// The value of cookie `name` for the current page's origin, if the browser holds one
    /// (`HttpOnly` cookies included: WebDriver sees them, scripts don't).
    pub(crate) async fn cookie(&self, name: &str) -> Option<String> {
        let cookies = self
            .command("read the cookies", self.client.get_all_cookies())
            .await;
        cookies
            .into_iter()
            .find(|cookie| cookie.name() == name)
            .map(|cookie| cookie.value().to_owned())
    }

    /// Sends `headers` with every later request of the current tab (navigations, subresources
    /// and scripts' fetches alike), replacing those set before; an empty list stops sending them.
    /// WebDriver has no such command: this goes through chromedriver's Chrome DevTools Protocol
    /// passthrough (`Network.setExtraHTTPHeaders`).
    pub(crate) async fn set_headers(&self, headers: &[(&str, &str)]) {
        let headers: serde_json::Map<String, Value> = headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), Value::from(*value)))
            .collect();
        self.cdp("Network.enable", json!({})).await;
        self.cdp("Network.setExtraHTTPHeaders", json!({ "headers": headers }))
            .await;
    }

    /// Runs Chrome DevTools Protocol command `cmd` with `params` in the current page through
    /// chromedriver and gives its result.
    pub(crate) async fn cdp(&self, cmd: &str, params: Value) -> Value {
        let path = format!("/session/{}/goog/cdp/execute", self.session);
        let body = json!({ "cmd": cmd, "params": params }).to_string();
        let port = self.driver.port;
        let request = tokio::task::spawn_blocking(move || {
            driver_request(port, "POST", &path, &body, COMMAND_TIMEOUT)
        });
        let (status, text) = match request.await.expect("the request's thread ran to its end") {
            Ok(answer) => answer,
            Err(error) => panic!(
                "the DevTools command {cmd} failed or had no answer within \
                 {COMMAND_TIMEOUT:?}: {error}"
            ),
        };
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        assert!(
            status == 200,
            "the DevTools command {cmd} failed (HTTP {status}): {answer}"
        );
        answer.get("value").cloned().unwrap_or(Value::Null)
    }

    /// Writes a PNG of the viewport to `target/console-screenshots/<name>.png` (see
    /// [`screenshot_dir`]) and gives its path. `name` is a file name without extension: letters,
    /// digits, `-`, `_` and `.`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        assert!(
            !name.is_empty()
                && !name.starts_with('.')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
            "screenshot name {name:?}: use letters, digits, `-`, `_` and `.` (it names a file)"
        );
        let png = self
            .command(&format!("take screenshot {name}"), self.client.screenshot())
            .await;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|error| panic!("create {}: {error}", dir.display()));
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png)
            .unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
        path
    }

    /// Awaits WebDriver command `future`, bounded by [`COMMAND_TIMEOUT`]; panics naming `what`
    /// (and where the page is) when it fails or times out.
    async fn command<T>(&self, what: &str, future: impl Future<Output = Result<T, CmdError>>) -> T {
        match self.try_command(future).await {
            Ok(value) => value,
            Err(error) => self.fail(&format!("{what}: {error}")).await,
        }
    }

    /// Awaits WebDriver command `future`, bounded by [`COMMAND_TIMEOUT`] (a time-out panics).
    async fn try_command<T>(
        &self,
        future: impl Future<Output = Result<T, CmdError>>,
    ) -> Result<T, CmdError> {
        match tokio::time::timeout(COMMAND_TIMEOUT, future).await {
            Ok(result) => result,
            Err(_) => panic!(
                "a WebDriver command had no answer within {COMMAND_TIMEOUT:?}: is the page's \
                 server blocked (a blocking call on a single-threaded test runtime?) or the \
                 machine overloaded? chromedriver's log ({}):\n{}",
                self.driver.log.display(),
                self.driver.log_tail()
            ),
        }
    }

    /// Polls `check` every [`POLL`] until it gives a value, for at most `timeout`; panics with
    /// `what` and where the page is on time-out, and at once on an error `check` passes on (it
    /// turns "not there (yet)" into `None`).
    async fn poll<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, CmdError>>,
    {
        let start = Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            match tokio::time::timeout(left.max(POLL), check()).await {
                Ok(Ok(Some(value))) => return value,
                Ok(Ok(None)) | Err(_) => {}
                Ok(Err(error)) => {
                    self.fail(&format!("waiting for {what}: {error}")).await;
                }
            }
            if start.elapsed() >= timeout {
                self.fail(&format!("waited {timeout:?} for {what} in vain"))
                    .await;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Panics with `message`, the page's URL and the start of its source (each read bounded).
    async fn fail(&self, message: &str) -> ! {
        let bounded = Duration::from_secs(10);
        let url = match tokio::time::timeout(bounded, self.client.current_url()).await {
            Ok(Ok(url)) => url.to_string(),
            Ok(Err(error)) => format!("(unreadable: {error})"),
            Err(_) => "(no answer)".to_owned(),
        };
        let source = match tokio::time::timeout(bounded, self.client.source()).await {
            Ok(Ok(source)) => {
                let mut end = source.len().min(2000);
                while !source.is_char_boundary(end) {
                    end -= 1;
                }
                source[..end].to_owned()
            }
            Ok(Err(error)) => format!("(unreadable: {error})"),
            Err(_) => "(no answer)".to_owned(),
        };
        panic!("browser: {message}\nat {url}; the page's source begins:\n{source}")
    }
}

impl Drop for Browser {
    /// Ends the session (chromedriver then quits Chromium and reaps it) with a blocking request,
    /// which works during a panic and outside any runtime; the driver's drop then kills what is
    /// left of its process group.
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = driver_request(
            self.driver.port,
            "DELETE",
            &path,
            "",
            Duration::from_secs(15),
        );
    }
}

impl Driver {
    /// Starts chromedriver on a free loopback port and waits until `/status` says it is ready;
    /// its output goes to `chromedriver.log` in `dir`.
    async fn start(dir: &Path) -> Driver {
        let log = dir.join("chromedriver.log");
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let output = std::fs::File::create(&log)
                .unwrap_or_else(|error| panic!("create {}: {error}", log.display()));
            let stderr = output
                .try_clone()
                .unwrap_or_else(|error| panic!("share {}: {error}", log.display()));
            let mut command = Command::new(CHROMEDRIVER);
            command
                .arg(format!("--port={port}"))
                // Chromium keeps its crash database under the XDG config dir and its NSS
                // database under `~/.pki`, whatever the profile: all of it goes in `dir`.
                .env("HOME", dir.join("home"))
                .env("XDG_CONFIG_HOME", dir.join("home/.config"))
                .env("XDG_CACHE_HOME", dir.join("home/.cache"))
                .stdin(Stdio::null())
                .stdout(output)
                .stderr(stderr);
            let child = CommandWrap::from(command)
                .wrap(ProcessGroup::leader())
                .spawn()
                .unwrap_or_else(|error| {
                    panic!("start {CHROMEDRIVER}: {error} (run `scripts/setup-clients`)")
                });
            let mut driver = Driver {
                child,
                port,
                log: log.clone(),
            };
            match driver.wait_ready().await {
                Ok(()) => return driver,
                Err(failure) => {
                    failures.push(format!("on port {port}: {failure}\n{}", driver.log_tail()));
                    // Dropping it kills it; the next attempt takes another port.
                }
            }
        }
        panic!(
            "chromedriver ({CHROMEDRIVER}) did not become ready in {START_ATTEMPTS} attempts; \
             if it is missing or broken, run `scripts/setup-clients`:\n{}",
            failures.join("\n")
        )
    }

    /// Polls `GET /status` until it answers `"ready": true`, for at most [`STARTUP_TIMEOUT`].
    async fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let port = self.port;
        let mut last = String::from("no answer yet");
        while start.elapsed() < STARTUP_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("chromedriver exited ({status})"));
            }
            let request = tokio::task::spawn_blocking(move || {
                driver_request(port, "GET", "/status", "", Duration::from_secs(5))
            });
            match request.await.expect("the request's thread ran to its end") {
                Ok((_, body)) => {
                    let ready = serde_json::from_str::<Value>(&body)
                        .ok()
                        .and_then(|status| status.pointer("/value/ready")?.as_bool());
                    if ready == Some(true) {
                        return Ok(());
                    }
                    last = format!("not ready: {body}");
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    last = "a /status request had no answer within 5s".to_owned();
                }
                Err(error) => last = error.to_string(),
            }
            tokio::time::sleep(POLL).await;
        }
        Err(format!(
            "not ready on /status within {STARTUP_TIMEOUT:?}; last: {last}"
        ))
    }

    /// The last lines of chromedriver's output, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Driver {
    /// SIGKILLs chromedriver's process group (Chromium's processes too, if any are left) and
    /// reaps chromedriver.
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait();
    }
}

/// Where screenshots go: `console-screenshots` in the target directory. Cargo tells integration
/// tests their scratch directory, `CARGO_TARGET_TMPDIR` (`<target dir>/tmp`, wherever
/// `CARGO_TARGET_DIR` puts the target dir); its parent is the target dir. Without it (a build
/// outside cargo) the workspace's `target/`.
pub(crate) fn screenshot_dir() -> PathBuf {
    let target = match option_env!("CARGO_TARGET_TMPDIR") {
        Some(tmp) => Path::new(tmp)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(tmp)),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
    };
    target.join("console-screenshots")
}

/// Whether `error` says the element is not (or no longer) there.
fn is_not_found(error: &CmdError) -> bool {
    error.is_no_such_element() || error.is_stale_element_reference()
}

/// A port nobody listens on now, on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port on 127.0.0.1 (is the loopback interface up?)")
}

/// A plain HTTP/1.1 request to chromedriver on `port` with a JSON `body`, blocking, bounded by
/// `timeout` for the connection and each read and write: the status code and the body. For
/// `Drop`, where nothing async runs, and for `spawn_blocking` elsewhere. (chromedriver answers
/// with a `Content-Length`, never a chunked body.)
fn driver_request(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    // The head, then as many bytes as its Content-Length says (chromedriver keeps the
    // connection open whatever the request asks).
    let mut answer = Vec::new();
    let mut buffer = [0; 8192];
    let (head, mut body) = loop {
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            return Err(std::io::Error::other("chromedriver closed the connection"));
        }
        answer.extend_from_slice(&buffer[..read]);
        if let Some(end) = answer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).into_owned();
            break (head, answer[end + 4..].to_vec());
        }
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {head:?}")))?;
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok());
    match length {
        Some(length) => {
            while body.len() < length {
                let read = stream.read(&mut buffer)?;
                if read == 0 {
                    break;
                }
                body.extend_from_slice(&buffer[..read]);
            }
        }
        None => {
            let _ = stream.read_to_end(&mut body)?;
        }
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    Ok((status, body))
}
