//! The webhook route: outside systems deliver to the hooks workflow bodies wait on, over HTTP
//! (what it answers: [`webhook_router`]).

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use toolwright_runtime::{HookRefused, Runtime, RuntimeError};

/// The largest payload the route takes unless told otherwise ([`webhook_router_with_limit`]).
pub const WEBHOOK_BODY_LIMIT: usize = 1024 * 1024;

/// The webhook route of `runtime`, to mount where [`RuntimeBuilder::webhook_url`] points.
///
/// `POST <mount>/<token>` with a JSON body delivers the body to the hook with that token
/// ([`Runtime::deliver_hook`]): the token in the URL is the only secret, so serve it over
/// HTTPS and keep it out of access logs. Answers:
///
/// | status | when |
/// |---|---|
/// | `202 Accepted` | the delivery is recorded; the waiting run wakes in the background |
/// | `400 Bad Request` | the body is not JSON |
/// | `404 Not Found` | no hook has the token |
/// | `409 Conflict` | the hook took a delivery already (a hook takes one) |
/// | `410 Gone` | the run that made the hook has ended |
/// | `413 Payload Too Large` | the body is over the route's limit (1 MiB unless set) |
/// | `422 Unprocessable Entity` | the payload does not fit the hook's schema (the problems are in the answer) |
/// | `500 Internal Server Error` | the store failed; send again |
///
/// Every answer is a JSON object: `{"status": "delivered", "hook": <name>}` or
/// `{"error": <what is wrong and what to do>}`.
///
/// Mounted:
///
/// ```no_run
/// # async fn demo(runtime: toolwright_runtime::Runtime) -> std::io::Result<()> {
/// // The runtime was built with `.webhook_url("https://api.example.com/hooks")`.
/// let app = axum::Router::new().nest("/hooks", toolwright_mcp::webhook_router(runtime));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
///
/// [`RuntimeBuilder::webhook_url`]: toolwright_runtime::RuntimeBuilder::webhook_url
pub fn webhook_router(runtime: Runtime) -> axum::Router {
    webhook_router_with_limit(runtime, WEBHOOK_BODY_LIMIT)
}

/// [`webhook_router`] taking bodies of at most `limit` bytes.
pub fn webhook_router_with_limit(runtime: Runtime, limit: usize) -> axum::Router {
    axum::Router::new()
        .route("/{token}", post(deliver))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(runtime)
}

async fn deliver(
    State(runtime): State<Runtime>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(payload) => payload,
        Err(error) => {
            return answer(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON ({error}); send the payload as a JSON document"),
            );
        }
    };
    match runtime.deliver_hook(&token, payload).await {
        Ok(delivery) => json_answer(
            StatusCode::ACCEPTED,
            &json!({ "status": "delivered", "hook": delivery.name }),
        ),
        Err(RuntimeError::Hook(refused)) => answer(status_of(&refused), refused.to_string()),
        Err(error) => {
            tracing::warn!("a webhook delivery failed: {error}");
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the delivery could not be recorded ({error}); send it again"),
            )
        }
    }
}

/// The HTTP status of a refused delivery.
fn status_of(refused: &HookRefused) -> StatusCode {
    match refused {
        HookRefused::Unknown => StatusCode::NOT_FOUND,
        HookRefused::Delivered { .. } => StatusCode::CONFLICT,
        HookRefused::Closed { .. } => StatusCode::GONE,
        HookRefused::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn answer(status: StatusCode, error: String) -> Response {
    json_answer(status, &json!({ "error": error }))
}

fn json_answer(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
