//! The console's HTML: a layout and one fn per page, from the [`views`](crate::views). maud
//! escapes every value; the pages need no script.

mod requests;
mod work;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Serialize;
use toolwright_core::Principal;

pub(crate) use requests::{inbox, request_card, request_page};
pub(crate) use work::{
    connections, journal, session, sessions, task, tasks, tool, tools, turn, turns,
};

/// What every page shows around its body.
pub(crate) struct Frame<'a> {
    /// The console's mount point (`""` or `/console`).
    pub(crate) base: &'a str,
    /// Who is signed in (`None` on the sign-in page).
    pub(crate) principal: Option<&'a Principal>,
    /// The session's CSRF token, for the sign-out form and the page's forms.
    pub(crate) csrf: &'a str,
    /// A notice left by the last action.
    pub(crate) notice: Option<String>,
}

impl Frame<'_> {
    pub(crate) fn link(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The hidden CSRF field every form carries.
    pub(crate) fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name="csrf" value=(self.csrf); }
    }
}

const STYLE: &str = r#"
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232b;background:#f6f7f9}
header{background:#1d232b;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center;flex-wrap:wrap}
header a{color:#d9e3ff;text-decoration:none}header a:hover{text-decoration:underline}
header .who{margin-left:auto;color:#aab}header form{display:inline}
header button{background:none;border:1px solid #667;color:#dde;border-radius:4px;cursor:pointer}
main{max-width:1100px;margin:1.2em auto;padding:0 1.2em}
h1{font-size:1.45em;margin:.2em 0 .6em}h2{font-size:1.15em;margin:1.4em 0 .5em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef1f5;font-weight:600}
pre{background:#fff;border:1px solid #e3e6ea;padding:.6em;overflow:auto;max-height:22em;font-size:13px}
code{font-size:13px}
.notice{background:#e8f4ea;border:1px solid #9cc9a5;padding:.6em .9em;border-radius:4px}
.error{background:#fbeaea;border:1px solid #e0a1a1;padding:.6em .9em;border-radius:4px}
.muted{color:#6b7480}
.badge{display:inline-block;padding:0 .5em;border-radius:9px;background:#e3e8ef;font-size:12px}
.badge.waiting,.badge.pending{background:#fff1c2}.badge.completed,.badge.finished,.badge.up{background:#d7f0dc}
.badge.cancelled,.badge.error,.badge.down,.badge.refused{background:#f6d5d5}
.card{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:.8em 1em;margin:.8em 0}
.card h3{margin:0 0 .3em;font-size:1.05em}
form.act{display:flex;flex-wrap:wrap;gap:.5em;align-items:flex-end;margin-top:.6em}
form.act textarea{flex:1 1 20em;min-height:2.4em}
button{font:inherit;padding:.3em .9em;border-radius:4px;border:1px solid #8894a5;background:#fff;cursor:pointer}
button.approve{background:#1f7a3a;color:#fff;border-color:#1f7a3a}
button.deny{background:#a12b2b;color:#fff;border-color:#a12b2b}
.timeline{border-left:3px solid #c9d2de;margin-left:.4em;padding-left:1em}
.timeline .entry{margin:.5em 0}
nav.pages{margin:1em 0}
"#;

/// A whole page: `title`, the frame and `body`.
pub(crate) fn layout(frame: &Frame<'_>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · toolwright console" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { a href=(frame.link("/inbox")) { "toolwright console" } }
                    @if frame.principal.is_some() {
                        a href=(frame.link("/inbox")) { "Inbox" }
                        a href=(frame.link("/sessions")) { "Sessions" }
                        a href=(frame.link("/turns")) { "Turns" }
                        a href=(frame.link("/tasks")) { "Tasks" }
                        a href=(frame.link("/tools")) { "Tools" }
                        a href=(frame.link("/connections")) { "Connections" }
                    }
                    @if let Some(principal) = frame.principal {
                        span.who {
                            "Signed in as " strong { (who(principal)) } " "
                            form method="post" action=(frame.link("/logout")) {
                                (frame.csrf_field())
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main {
                    @if let Some(notice) = &frame.notice {
                        p.notice role="status" { (notice) }
                    }
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A principal as people read it: `user alice (demo)`.
pub(crate) fn who(principal: &Principal) -> String {
    let kind = serde_json::to_value(principal.principal_type)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    format!(
        "{kind} {} ({})",
        principal.principal_id, principal.authenticator
    )
}

/// `who`, or a dash.
pub(crate) fn who_or_dash(principal: Option<&Principal>) -> String {
    principal.map_or_else(|| "—".to_owned(), who)
}

/// A value's JSON, pretty, in a `<pre>`.
pub(crate) fn json_block(value: &impl Serialize) -> Markup {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|e| e.to_string());
    html! { pre { code { (text) } } }
}

/// A serde enum's name (`waiting`, `tool_approval`), for badges and tables.
pub(crate) fn name_of(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        // An internally tagged enum: its tag.
        Ok(serde_json::Value::Object(fields)) => ["type", "status", "state", "kind", "decision"]
            .iter()
            .find_map(|tag| fields.get(*tag).and_then(|v| v.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "?".into()),
        _ => "?".into(),
    }
}

/// Unix milliseconds as people read them (`Fri, 04 Dec 2026 00:03:13 GMT`). A time after the
/// year 9999, which an HTTP date cannot say (a deadline a tool set from a model's
/// `timeout`, a corrupted row), is said as such.
pub(crate) fn time(ms: u64) -> String {
    /// 10000-01-01T00:00:00Z in Unix milliseconds: the first instant an HTTP date cannot say.
    const YEAR_10000_MS: u64 = 253_402_300_800_000;
    if ms >= YEAR_10000_MS {
        return "after the year 9999".to_owned();
    }
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    httpdate::fmt_http_date(at)
}

/// A request's kind as a heading says it.
pub(crate) fn kind_label(kind: toolwright_runtime::RequestKind) -> &'static str {
    use toolwright_runtime::RequestKind;
    match kind {
        RequestKind::ToolApproval => "Approval",
        RequestKind::Question => "Question",
        RequestKind::SessionLimit => "Session limit",
        RequestKind::Hook => "Hook",
    }
}

/// A status badge.
pub(crate) fn badge(name: &str) -> Markup {
    html! { span class={"badge " (name)} { (name) } }
}

/// A "next page" link, when there is one.
pub(crate) fn next_link(href: Option<String>) -> Markup {
    html! {
        @if let Some(href) = href {
            nav.pages { a href=(href) rel="next" { "Next page →" } }
        }
    }
}

/// `value` for a query string.
pub(crate) fn query_value(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// `value` as a path segment.
pub(crate) fn segment(value: &str) -> String {
    query_value(value).replace('+', "%20")
}

/// The sign-in page.
pub(crate) fn login(base: &str, next: &str, error: Option<&str>) -> Markup {
    let frame = Frame {
        base,
        principal: None,
        csrf: "",
        notice: None,
    };
    layout(
        &frame,
        "Sign in",
        html! {
            @if let Some(error) = error {
                p.error role="alert" { (error) }
            }
            p { "Sign in with a token your identity provider issued (the console checks it with the host's token verifier)." }
            form.act method="post" action=(frame.link("/login")) {
                input type="hidden" name="next" value=(next);
                label { "Token " input type="password" name="token" autocomplete="off" required autofocus; }
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// A page saying what went wrong.
pub(crate) fn failure(frame: &Frame<'_>, message: &str) -> Markup {
    layout(
        frame,
        "Not found or failed",
        html! { p.error role="alert" { (message) } },
    )
}

#[cfg(test)]
mod tests {
    use super::time;

    #[test]
    fn every_time_has_words_even_past_the_year_9999() {
        assert_eq!(time(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(time(253_402_300_799_999), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(time(253_402_300_800_000), "after the year 9999");
        assert_eq!(time(u64::MAX), "after the year 9999");
    }
}
