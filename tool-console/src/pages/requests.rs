//! The inbox and the requests in it: each as a card with its answer form, shown in full only
//! to those who may answer it.

use maud::{Markup, html};
use toolwright_runtime::{RequestKind, RequestStatus};

use super::{
    Frame, badge, json_block, kind_label, layout, name_of, next_link, query_value, segment, time,
    who,
};
use crate::views::{Inbox, RequestView};

/// The inbox page.
pub(crate) fn inbox(frame: &Frame<'_>, inbox: &Inbox, mine: bool, next: Option<String>) -> Markup {
    let answerable = inbox.requests.iter().filter(|r| r.may_answer).count();
    layout(
        frame,
        "Inbox",
        html! {
            nav.pages {
                @if mine {
                    a href=(frame.link("/inbox")) { "Everything pending" } " · " strong { "Waiting on me" }
                } @else {
                    strong { "Everything pending" } " · " a href=(frame.link("/inbox?mine=1")) { "Waiting on me" }
                }
            }
            p.muted {
                (inbox.requests.len()) " pending request(s) on this page; "
                (answerable) " you may answer."
            }
            @if inbox.requests.is_empty() {
                p { @if mine { "Nothing on this page waits on you." } @else { "Nothing waits on anyone." } }
            }
            @for request in &inbox.requests {
                (request_card(frame, request))
            }
            (next_link(next))
        },
    )
}

/// One request's page.
pub(crate) fn request_page(frame: &Frame<'_>, request: &RequestView) -> Markup {
    layout(
        frame,
        &format!("Request {}", request.request_id),
        request_card(frame, request),
    )
}

/// A request: what it is, who asked, and (for those who may answer it) its input and form.
pub(crate) fn request_card(frame: &Frame<'_>, request: &RequestView) -> Markup {
    html! {
        article.card id={"request-" (request.request_id)} data-request=(request.request_id) {
            h3 {
                (kind_label(request.kind)) ": "
                code { (request.tool.as_deref().unwrap_or("—")) }
                " " (badge(&name_of(&request.status)))
            }
            p.muted {
                "Asked by " (request.requester.as_ref().map_or_else(|| "nobody in particular".to_owned(), who))
                " · turn "
                a href=(frame.link(&format!("/turns/{}", segment(&request.turn_id)))) { code { (request.turn_id) } }
                @if let Some(task) = &request.task_id {
                    " · task " a href=(frame.link(&format!("/tasks/{}", segment(task)))) { code { (task) } }
                }
                " · " a href=(frame.link(&format!("/requests/{}", segment(&request.request_id)))) { "request " code { (request.request_id) } }
                @if let (Some(deadline), true) = (request.deadline_ms, request.is_pending()) {
                    " · expires " (time(deadline))
                }
            }
            (settled(&request.status))
            @if request.shown {
                @if let Some(prompt) = &request.prompt {
                    p.prompt { strong { (prompt) } }
                }
                @if !request.reasons.is_empty() {
                    ul.reasons { @for reason in &request.reasons { li { (reason) } } }
                }
                @if let Some(input) = &request.input {
                    details open { summary { "Input (sensitive values redacted)" } (json_block(input)) }
                }
                @if let Some(change) = &request.definition_change {
                    details { summary { "Definition change" } (json_block(change)) }
                }
            } @else if request.is_pending() {
                p.muted.hidden-input { "Its input is shown to those who may answer it." }
            }
            @if request.may_answer {
                (answer_form(frame, request))
            } @else if let Some(refusal) = &request.refusal {
                p.muted.refusal { "You may not answer this: " (refusal) }
            }
        }
    }
}

/// Who settled a request and with what note.
fn settled(status: &RequestStatus) -> Markup {
    html! {
        @match status {
            RequestStatus::Settled { decision, responder, note } => {
                p.settled {
                    (name_of(decision)) " by " (responder.as_ref().map_or_else(|| "nobody in particular".to_owned(), who))
                    @if let Some(note) = note { " — note: " em { (note) } }
                }
            }
            RequestStatus::Revoked { outcome } => p.settled { "Revoked: " (name_of(outcome)) }
            _ => {}
        }
    }
}

/// The form answering `request`: approve or deny with a note, or a question's answers.
fn answer_form(frame: &Frame<'_>, request: &RequestView) -> Markup {
    let action = frame.link(&format!(
        "/requests/{}/respond",
        query_value(&request.request_id)
    ));
    html! {
        form.act method="post" action=(action) {
            (frame.csrf_field())
            @if request.kind == RequestKind::Question {
                @for (_, label) in &request.options {
                    button type="submit" name="option" value=(label) { (label) }
                }
                @if request.form.is_some() {
                    label { "Fields (JSON) " textarea name="fields" { "{}" } }
                    button type="submit" name="decision" value="fill" { "Submit form" }
                } @else if request.allow_freeform {
                    label { "Answer " input type="text" name="text"; }
                    button type="submit" name="decision" value="answer" { "Answer" }
                }
                button.deny type="submit" name="decision" value="deny" { "Decline" }
            } @else {
                textarea name="note" placeholder="Note for the model (optional)" aria-label="Note" {}
                button.approve type="submit" name="decision" value="approve" { "Approve" }
                button.deny type="submit" name="decision" value="deny" { "Deny" }
            }
        }
    }
}
