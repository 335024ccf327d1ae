//! Whether a person may answer a request, asked without answering: the checks [`super::settle`]
//! holds a person's answer to, against the request as the store holds it now, and nothing
//! recorded. A console shows a request's input only to those who may answer it.

use std::sync::Arc;

use toolwright_core::ResponseVerdict;

use super::settle::pending_request;
use crate::call::InputResponse;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::exec::context::session_info;
use crate::record::{InputRequest, TaskStatus};
use crate::transition::answer::{Settler, response_verdict};

/// What [`Runtime::respond`](crate::Runtime::respond) would say of `response` (its decision
/// and principal) before looking at the answer itself: [`ResponseVerdict::Allowed`] when the
/// request is pending, a person may answer it (not a hook's wait), and the tool's response
/// policy (or, without one, only the requester) and, for an approval, the token
/// `require_auth` names allow this principal; else why not. A request that is no longer
/// pending is refused saying so; an id no turn or task holds is
/// [`RuntimeError::UnknownRequest`].
pub(crate) async fn may_respond(
    engine: &Arc<Engine>,
    response: &InputResponse,
) -> Result<ResponseVerdict, RuntimeError> {
    let Some(Asked {
        request,
        info,
        tool,
    }) = asked(engine, &response.request_id).await?
    else {
        return Ok(ResponseVerdict::rejected(format!(
            "request `{}` is no longer pending: it was answered, cancelled or revoked",
            response.request_id
        )));
    };
    if let Some(reason) = Settler::Person.refusal(&request) {
        return Ok(ResponseVerdict::rejected(reason));
    }
    let registry = engine.registry();
    let tool = tool.as_deref().and_then(|name| registry.get(name));
    let token = engine.token_check(tool, &request, response).await;
    Ok(response_verdict(tool, &info, &request, response, &token))
}

/// A pending request, with what its response policy is given.
struct Asked {
    request: InputRequest,
    info: toolwright_core::SessionInfo,
    /// The tool whose policies hold (a task's tool for its body's questions).
    tool: Option<String>,
}

/// Request `request_id` where it is pending: in a waiting turn's parked step, or among a
/// waiting task's questions; `None` when it is no longer pending.
async fn asked(engine: &Engine, request_id: &str) -> Result<Option<Asked>, RuntimeError> {
    let store = engine.store();
    if let Some(turn_id) = store.turn_of_request(request_id).await? {
        let (turn, _) = engine.turn(&turn_id).await?;
        let Some(request) = pending_request(&turn, request_id) else {
            return Ok(None);
        };
        let (session, _) = engine.session(&turn.session_id).await?;
        let info = session_info(&session, &turn.id, turn.current.as_ref(), turn.caller);
        let tool = request.tool.clone();
        return Ok(Some(Asked {
            request,
            info,
            tool,
        }));
    }
    let Some(task_id) = store.task_of_request(request_id).await? else {
        return Err(RuntimeError::UnknownRequest(request_id.to_owned()));
    };
    let Some((task, _)) = store.task(&task_id).await? else {
        return Ok(None);
    };
    let request = task
        .requests
        .iter()
        .find(|r| r.request_id == request_id && r.is_pending());
    let Some(request) = request.filter(|_| task.status == TaskStatus::Waiting) else {
        return Ok(None);
    };
    let (session, _) = engine.session(&task.session_id).await?;
    let info = session_info(&session, &task.turn_id, task.current.as_ref(), task.caller);
    Ok(Some(Asked {
        request: request.clone(),
        info,
        tool: Some(task.tool.clone()),
    }))
}
