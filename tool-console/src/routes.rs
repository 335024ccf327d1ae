//! The console's routes: pages (HTML, or JSON for `Accept: application/json`), the sign-in
//! exchange, and the forms that act (each checked for its CSRF token and origin).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use maud::Markup;
use serde::{Deserialize, Serialize};
use toolwright_core::Audience;
use toolwright_runtime::{RuntimeError, TaskFilter, TurnFilter};

use crate::actions::{self, ActionReport, Answer};
use crate::auth::{self, Operator};
use crate::pages::{self, Frame};
use crate::{Shared, views};

type SharedState = State<Arc<Shared>>;

/// The console's router over `shared`.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let at = |path: &str| format!("{}{path}", shared.base);
    let home = if shared.base.is_empty() {
        "/".to_owned()
    } else {
        shared.base.clone()
    };
    let mut router = Router::new()
        .route(&home, get(root))
        .route(&at("/login"), get(login_page).post(login))
        .route(&at("/logout"), post(logout))
        .route(&at("/inbox"), get(inbox))
        .route(&at("/requests/{id}"), get(request))
        .route(&at("/requests/{id}/respond"), post(respond))
        .route(&at("/sessions"), get(sessions))
        .route(&at("/sessions/{id}"), get(session))
        .route(&at("/turns"), get(turns))
        .route(&at("/turns/{id}"), get(turn))
        .route(&at("/turns/{id}/cancel"), post(cancel_turn))
        .route(&at("/tasks"), get(tasks))
        .route(&at("/tasks/{id}"), get(task))
        .route(&at("/tasks/{id}/cancel"), post(cancel_task))
        .route(&at("/journals/{*run_id}"), get(journal))
        .route(&at("/tools"), get(tools))
        .route(&at("/tools/{name}"), get(tool))
        .route(&at("/connections"), get(connections))
        .route(&at("/connections/approve"), post(approve_definition));
    if !shared.base.is_empty() {
        router = router.route(&at("/"), get(root));
    }
    router.with_state(shared)
}

/// Whether the client asked for JSON.
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"))
}

/// The frame of `operator`'s page, with the notice its last action left.
fn frame<'a>(shared: &'a Shared, operator: &'a Operator) -> Frame<'a> {
    Frame {
        base: &shared.base,
        principal: Some(&operator.principal),
        csrf: operator.csrf.as_deref().unwrap_or(""),
        notice: operator
            .session
            .as_deref()
            .and_then(|id| shared.sessions.take_notice(id)),
    }
}

/// A page: `view` as JSON when asked for, else `html` of it. Pages are never cached: they
/// show state that changes under them and what one person may see.
fn page<V: Serialize>(headers: &HeaderMap, view: &V, html: impl FnOnce(&V) -> Markup) -> Response {
    let mut response = if wants_json(headers) {
        Json(view).into_response()
    } else {
        Html(html(view).into_string()).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    response
}

/// A failed page: 404 for what does not exist, 400 for a bad request, 500 otherwise.
fn failed(
    shared: &Shared,
    operator: &Operator,
    headers: &HeaderMap,
    error: &RuntimeError,
) -> Response {
    let status = match error {
        RuntimeError::UnknownTurn(_)
        | RuntimeError::UnknownRequest(_)
        | RuntimeError::UnknownTask(_)
        | RuntimeError::UnknownSession(_) => StatusCode::NOT_FOUND,
        RuntimeError::Store(toolwright_runtime::StoreError::Invalid(_)) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let message = error.to_string();
    let mut response = page(headers, &serde_json::json!({ "error": message }), |_| {
        pages::failure(&frame(shared, operator), &message)
    });
    *response.status_mut() = status;
    response
}

/// `Ok(view)` as a page, or the failure's page.
fn render<V: Serialize>(
    shared: &Shared,
    operator: &Operator,
    headers: &HeaderMap,
    view: Result<V, RuntimeError>,
    html: impl FnOnce(&Frame<'_>, &V) -> Markup,
) -> Response {
    match view {
        Ok(view) => {
            let frame = frame(shared, operator);
            page(headers, &view, |v| html(&frame, v))
        }
        Err(error) => failed(shared, operator, headers, &error),
    }
}

async fn root(State(shared): SharedState) -> Redirect {
    Redirect::to(&shared.link("/inbox"))
}

#[derive(Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

async fn login_page(State(shared): SharedState, Query(q): Query<LoginQuery>) -> Html<String> {
    let next = auth::safe_next(&shared, q.next.as_deref());
    Html(pages::login(&shared.base, &next, None).into_string())
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

async fn login(
    State(shared): SharedState,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = auth::safe_next(&shared, form.next.as_deref());
    if !auth::same_origin(&headers) {
        return (StatusCode::FORBIDDEN, "sign-in from another site refused").into_response();
    }
    let admitted = match shared.verifier.verify_token(form.token.trim()).await {
        Ok(verified) => shared.admission.admit(&verified),
        Err(error) => Err(error.to_string()),
    };
    match admitted {
        Ok(principal) => {
            let id = shared.sessions.sign_in(principal);
            let cookie = auth::session_cookie(&shared, Some(&id), shared.sessions.ttl());
            let mut response = Redirect::to(&next).into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(why) => {
            let message = format!(
                "That token was refused: {why}. Ask your identity provider for a valid one."
            );
            (
                StatusCode::UNAUTHORIZED,
                Html(pages::login(&shared.base, &next, Some(&message)).into_string()),
            )
                .into_response()
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: Option<String>,
}

/// `None` when the form may act; else the refusal.
fn refuse(operator: &Operator, headers: &HeaderMap, csrf: Option<&str>) -> Option<Response> {
    if !auth::same_origin(headers) {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "a form posted from another site was refused",
            )
                .into_response(),
        );
    }
    if !operator.csrf_ok(csrf) {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "the form's CSRF token is missing or stale: reload the page and try again",
            )
                .into_response(),
        );
    }
    None
}

async fn logout(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(refusal) = refuse(&operator, &headers, form.csrf.as_deref()) {
        return refusal;
    }
    if let Some(id) = &operator.session {
        shared.sessions.sign_out(id);
    }
    let mut response = Redirect::to(&shared.link("/login")).into_response();
    let cookie = auth::session_cookie(&shared, None, std::time::Duration::ZERO);
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// After an action: JSON of its report for a script, else back to `to` with the report as the
/// next page's notice.
fn acted(
    shared: &Shared,
    operator: &Operator,
    headers: &HeaderMap,
    report: Result<ActionReport, RuntimeError>,
    to: String,
) -> Response {
    match report {
        Ok(report) => {
            if wants_json(headers) || operator.session.is_none() {
                let status = if report.accepted {
                    StatusCode::OK
                } else {
                    StatusCode::CONFLICT
                };
                return (status, Json(report)).into_response();
            }
            if let Some(id) = &operator.session {
                shared.sessions.notify(id, report.message);
            }
            Redirect::to(&to).into_response()
        }
        Err(error) => failed(shared, operator, headers, &error),
    }
}

#[derive(Deserialize)]
struct InboxQuery {
    turns_after: Option<String>,
    tasks_after: Option<String>,
    mine: Option<String>,
}

async fn inbox(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Query(q): Query<InboxQuery>,
) -> Response {
    let size = shared.page_size;
    let view = views::inbox(
        &shared.runtime,
        Some(&operator.principal),
        views::page(q.turns_after.as_deref(), size),
        views::page(q.tasks_after.as_deref(), size),
    )
    .await;
    // "Waiting on me": the requests of the same pages that this principal may answer.
    let mine = flag(q.mine.as_deref());
    let view = view.map(|mut inbox| {
        if mine {
            inbox.requests.retain(|r| r.may_answer);
        }
        inbox
    });
    render(&shared, &operator, &headers, view, |frame, inbox| {
        let next = (inbox.next_turns.is_some() || inbox.next_tasks.is_some()).then(|| {
            let mut query = Vec::new();
            if mine {
                query.push("mine=1".to_owned());
            }
            if let Some(c) = &inbox.next_turns {
                query.push(format!("turns_after={}", pages::query_value(c.as_str())));
            }
            if let Some(c) = &inbox.next_tasks {
                query.push(format!("tasks_after={}", pages::query_value(c.as_str())));
            }
            frame.link(&format!("/inbox?{}", query.join("&")))
        });
        pages::inbox(frame, inbox, mine, next)
    })
}

async fn request(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let view = match views::find_request(&shared.runtime, &id).await {
        Ok(request) => {
            Ok(views::request_view(&shared.runtime, Some(&operator.principal), &request).await)
        }
        Err(error) => Err(error),
    };
    render(&shared, &operator, &headers, view, pages::request_page)
}

#[derive(Deserialize)]
struct RespondForm {
    csrf: Option<String>,
    decision: Option<String>,
    note: Option<String>,
    text: Option<String>,
    option: Option<String>,
    fields: Option<String>,
}

/// The answer a respond form carries.
fn answer_of(form: &RespondForm) -> Result<Answer, String> {
    if let Some(option) = form.option.as_deref().filter(|o| !o.is_empty()) {
        return Ok(Answer::Choose(option.to_owned()));
    }
    match form.decision.as_deref() {
        Some("approve") => Ok(Answer::Approve),
        Some("deny") => Ok(Answer::Deny),
        Some("answer") => Ok(Answer::Text(form.text.clone().unwrap_or_default())),
        Some("fill") => serde_json::from_str(form.fields.as_deref().unwrap_or("{}"))
            .map(Answer::Fill)
            .map_err(|e| format!("the form's fields are not JSON: {e}")),
        Some(other) => Err(format!(
            "unknown decision `{other}`: use approve, deny, answer or fill"
        )),
        None => Err("the form names no decision: use approve, deny, answer or fill".into()),
    }
}

async fn respond(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<RespondForm>,
) -> Response {
    if let Some(refusal) = refuse(&operator, &headers, form.csrf.as_deref()) {
        return refusal;
    }
    let answer = match answer_of(&form) {
        Ok(answer) => answer,
        Err(message) => return (StatusCode::BAD_REQUEST, message).into_response(),
    };
    let report = actions::respond(
        &shared.runtime,
        &operator.principal,
        &id,
        answer,
        form.note.clone(),
    )
    .await;
    // Accepted: on to what the answer moved (a task's page for its question, else the turn's);
    // refused or dropped: back to the inbox, which says why.
    let to = match &report {
        Ok(ActionReport {
            task_id: Some(task),
            accepted: true,
            ..
        }) => shared.link(&format!("/tasks/{}", pages::segment(task))),
        Ok(ActionReport {
            turn_id: Some(turn),
            accepted: true,
            ..
        }) => shared.link(&format!("/turns/{}", pages::segment(turn))),
        _ => shared.link("/inbox"),
    };
    acted(&shared, &operator, &headers, report, to)
}

#[derive(Deserialize)]
struct PageQuery {
    after: Option<String>,
    status: Option<String>,
    open: Option<String>,
    turns_after: Option<String>,
    tasks_after: Option<String>,
}

fn next_href(
    shared: &Shared,
    path: &str,
    extra: &str,
    cursor: Option<&toolwright_runtime::Cursor>,
) -> Option<String> {
    cursor.map(|c| {
        shared.link(&format!(
            "{path}?{extra}after={}",
            pages::query_value(c.as_str())
        ))
    })
}

async fn sessions(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let view = views::sessions(
        &shared.runtime,
        views::page(q.after.as_deref(), shared.page_size),
    )
    .await;
    render(&shared, &operator, &headers, view, |frame, page| {
        pages::sessions(
            frame,
            page,
            next_href(&shared, "/sessions", "", page.next.as_ref()),
        )
    })
}

async fn session(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Response {
    let size = shared.page_size;
    let view = views::session(
        &shared.runtime,
        &id,
        views::page(q.turns_after.as_deref(), size),
        views::page(q.tasks_after.as_deref(), size),
    )
    .await;
    render(&shared, &operator, &headers, view, |frame, view| {
        let next = view.turns.next.as_ref().map(|c| {
            frame.link(&format!(
                "/sessions/{}?turns_after={}",
                pages::segment(&view.id),
                pages::query_value(c.as_str())
            ))
        });
        pages::session(frame, view, next)
    })
}

/// Whether a query flag (`?open=1`, `?mine=1`) is set: present, not empty and not `0`.
fn flag(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

async fn turns(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let status = q.status.as_deref().filter(|s| !s.is_empty());
    let mut filter = TurnFilter::default();
    if let Some(name) = status {
        match views::turn_status(name) {
            Ok(s) => filter = filter.status(s),
            Err(message) => return (StatusCode::BAD_REQUEST, message).into_response(),
        }
    }
    let view = views::turns(
        &shared.runtime,
        filter,
        views::page(q.after.as_deref(), shared.page_size),
    )
    .await;
    let extra = status.map(|s| format!("status={s}&")).unwrap_or_default();
    render(&shared, &operator, &headers, view, |frame, page| {
        pages::turns(
            frame,
            page,
            status,
            next_href(&shared, "/turns", &extra, page.next.as_ref()),
        )
    })
}

#[derive(Serialize)]
struct TurnPage<'a> {
    #[serde(flatten)]
    turn: &'a views::TurnView,
    events: &'a [crate::RecentEvent],
}

#[derive(Deserialize)]
struct TurnQuery {
    steps_after: Option<String>,
}

async fn turn(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<TurnQuery>,
) -> Response {
    let steps = views::page(q.steps_after.as_deref(), shared.page_size);
    match views::turn(&shared.runtime, Some(&operator.principal), &id, steps).await {
        Ok(view) => {
            // Events repeat the calls' inputs and what answered them.
            let events = if view.withheld {
                Vec::new()
            } else {
                shared.recent.of(&id)
            };
            let frame = frame(&shared, &operator);
            let next = view.steps_next.as_ref().map(|c| {
                shared.link(&format!(
                    "/turns/{}?steps_after={}",
                    pages::segment(&id),
                    pages::query_value(c.as_str())
                ))
            });
            page(
                &headers,
                &TurnPage {
                    turn: &view,
                    events: &events,
                },
                |_| pages::turn(&frame, &view, &events, next),
            )
        }
        Err(error) => failed(&shared, &operator, &headers, &error),
    }
}

async fn cancel_turn(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(refusal) = refuse(&operator, &headers, form.csrf.as_deref()) {
        return refusal;
    }
    let report = actions::cancel_turn(&shared.runtime, &id).await;
    acted(
        &shared,
        &operator,
        &headers,
        report,
        shared.link(&format!("/turns/{}", pages::segment(&id))),
    )
}

async fn tasks(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let open = flag(q.open.as_deref());
    let filter = if open {
        TaskFilter::default().open()
    } else {
        TaskFilter::default()
    };
    let view = views::tasks(
        &shared.runtime,
        filter,
        views::page(q.after.as_deref(), shared.page_size),
    )
    .await;
    let extra = if open { "open=1&" } else { "" };
    render(&shared, &operator, &headers, view, |frame, page| {
        pages::tasks(
            frame,
            page,
            open,
            next_href(&shared, "/tasks", extra, page.next.as_ref()),
        )
    })
}

async fn task(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let view = views::task(&shared.runtime, Some(&operator.principal), &id).await;
    render(&shared, &operator, &headers, view, pages::task)
}

async fn cancel_task(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(refusal) = refuse(&operator, &headers, form.csrf.as_deref()) {
        return refusal;
    }
    let report = actions::cancel_task(&shared.runtime, &id).await;
    acted(
        &shared,
        &operator,
        &headers,
        report,
        shared.link(&format!("/tasks/{}", pages::segment(&id))),
    )
}

async fn journal(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(run_id): Path<String>,
) -> Response {
    let view = views::journal(&shared.runtime, Some(&operator.principal), &run_id).await;
    render(&shared, &operator, &headers, view, pages::journal)
}

#[derive(Deserialize)]
struct ToolsQuery {
    audience: Option<String>,
    locale: Option<String>,
}

fn audience(name: Option<&str>) -> (Audience, &'static str) {
    match name {
        Some("subagent") => (Audience::Subagent, "subagent"),
        Some("user") => (Audience::User, "user"),
        _ => (Audience::Model, "model"),
    }
}

async fn tools(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Query(q): Query<ToolsQuery>,
) -> Response {
    let (audience, name) = audience(q.audience.as_deref());
    let locale = q.locale.filter(|l| !l.is_empty());
    let catalog = views::catalog(&shared.runtime, audience, locale.as_deref());
    let locale = locale.unwrap_or_else(|| shared.runtime.registry().default_locale().to_owned());
    if wants_json(&headers) {
        return (
            [(header::CONTENT_TYPE, "application/json")],
            catalog.json().to_owned(),
        )
            .into_response();
    }
    let frame = frame(&shared, &operator);
    page(&headers, &(), |_| {
        pages::tools(&frame, &catalog, name, &locale)
    })
}

async fn tool(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<ToolsQuery>,
) -> Response {
    let (audience, _) = audience(q.audience.as_deref());
    let catalog = views::catalog(
        &shared.runtime,
        audience,
        q.locale.as_deref().filter(|l| !l.is_empty()),
    );
    match catalog.get(&name) {
        Some(entry) => {
            let frame = frame(&shared, &operator);
            page(&headers, entry, |entry| pages::tool(&frame, entry))
        }
        None => {
            let message =
                format!("no tool `{name}` in this audience's catalog; the Tools page lists them");
            let frame = frame(&shared, &operator);
            let mut response = page(&headers, &serde_json::json!({ "error": message }), |_| {
                pages::failure(&frame, &message)
            });
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}

async fn connections(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
) -> Response {
    let view = views::connections(&shared.runtime).await;
    render(&shared, &operator, &headers, view, |frame, views| {
        pages::connections(frame, views)
    })
}

#[derive(Deserialize)]
struct ApproveForm {
    csrf: Option<String>,
    tool: String,
}

async fn approve_definition(
    State(shared): SharedState,
    operator: Operator,
    headers: HeaderMap,
    Form(form): Form<ApproveForm>,
) -> Response {
    if let Some(refusal) = refuse(&operator, &headers, form.csrf.as_deref()) {
        return refusal;
    }
    let report =
        actions::approve_definition(&shared.runtime, &operator.principal, &form.tool).await;
    acted(
        &shared,
        &operator,
        &headers,
        report,
        shared.link("/connections"),
    )
}
