//! A turn that reached a limit of its budget parks on a session-limit request: a step
//! without calls, answered like any parked step. Approving it resumes the turn; cancelling it
//! (or revoking it) stops the turn when the step closes (`input::resume`).

use serde_json::Value;

use crate::call::StepOptions;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::InputRequest;
use crate::store::Claim;

/// Parks active turn `turn_id` on a session-limit request (`prompt`, `details` for the
/// client), appending the conversation `options` carries in the same write.
pub(crate) async fn park_on_limit(
    engine: &Engine,
    turn_id: &str,
    prompt: String,
    details: Value,
    options: StepOptions,
) -> Result<InputRequest, RuntimeError> {
    let (mut turn, version) = engine.turn(turn_id).await?;
    let request = InputRequest::session_limit(&turn, prompt, details);
    if let Err(status) = turn.park_on_limit(request.clone()) {
        return Err(RuntimeError::TurnState {
            turn: turn_id.to_owned(),
            status,
            what: "only an active turn (no step running or parked) can park on a limit",
        });
    }
    // A lost race (another writer of the turn or of the conversation's next position) is the
    // caller's to resolve: it read the turn and the conversation before deciding to park.
    engine
        .store()
        .write_turn_appending(
            &turn,
            Some(version),
            Claim::None,
            super::scope::appended(&options.conversation),
        )
        .await?;
    engine.emit(Event::InputRequested {
        request: request.clone(),
    });
    engine.emit(Event::TurnWaiting {
        session_id: turn.session_id.clone(),
        turn_id: turn.id.clone(),
        on: "input".into(),
        requests: vec![request.request_id.clone()],
    });
    Ok(request)
}
