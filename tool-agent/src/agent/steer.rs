//! Steering a running turn: a new message from the user reaches the model in the loop's next
//! request, after the results of the step it interrupted.
//!
//! The runtime records each steered message in the store ([`Turn::steer`]) before
//! [`Agent::steer`] returns; the loop delivers them, as user messages appended to the stored
//! conversation, before each model request and before it ends the turn. Nothing but the loop
//! writes the conversation, so its positional appends never race a second writer; and the
//! count of messages delivered is read back from the conversation itself: within one turn the
//! loop stores a user message only as the turn's first message and as a delivered steered
//! message. A message recorded but not yet delivered when the process stops is delivered by
//! whichever process resumes the turn ([`Agent::resume`]).

use toolwright_runtime::{Steered, Turn};

use super::{Agent, AgentError};
use crate::conversation::Conversation;
use crate::message::Message;

impl Agent {
    /// Sends `text`, a new message from the user, into turn `turn_id` while it runs
    /// ([`Turn::steer`]): it reaches the model in the loop's next request, right after the
    /// results of the step it interrupted.
    ///
    /// While the loop runs a step in this process, the step's running plain calls and
    /// `workflow = execute` bodies are interrupted (their cancellation tokens fire and each
    /// ends with an [`ErrorCode::Interrupted`](toolwright_core::ErrorCode::Interrupted)
    /// result); `task` and `serve` bodies keep running; the turn goes on. While the loop waits
    /// for the model, the message follows its answer. A turn parked on approvals has them
    /// revoked and its approved calls run ([`Steered::Revoked`]; then [`Agent::resume`] it);
    /// a parked question is answered by the message ([`Steered::Answered`]).
    ///
    /// The message is stored before this returns: should the process stop before the loop
    /// delivers it, [`Agent::resume`] (in any process) delivers it. Refused with
    /// [`AgentError::Runtime`] when the turn has ended or is ending (its final answer was
    /// given: begin a new turn with the message), and when its step runs in another process.
    pub async fn steer(&self, turn_id: &str, text: &str) -> Result<Steered, AgentError> {
        let turn = self.runtime.turn(turn_id).await?;
        Ok(turn.steer(text).await?)
    }

    /// Appends the messages steered into `turn` that the conversation does not hold yet.
    pub(super) async fn deliver_steering(
        &self,
        turn: &Turn,
        conversation: &mut Conversation,
    ) -> Result<(), AgentError> {
        let mut steered = turn.steering().await?;
        let delivered = delivered(conversation, turn.id());
        if steered.len() <= delivered {
            return Ok(());
        }
        let fresh = steered.split_off(delivered);
        self.append_steered(turn, conversation, fresh).await
    }

    /// Appends `messages`, steered into `turn`, as the user's.
    pub(super) async fn append_steered(
        &self,
        turn: &Turn,
        conversation: &mut Conversation,
        messages: Vec<String>,
    ) -> Result<(), AgentError> {
        let messages = messages.into_iter().map(Message::user).collect();
        conversation
            .append(self.runtime.store(), turn.id(), messages)
            .await
    }
}

/// How many messages steered into turn `turn_id` the conversation holds: the turn's user
/// messages after its first message.
pub(super) fn delivered(conversation: &Conversation, turn_id: &str) -> usize {
    conversation
        .by_turn()
        .filter(|(turn, _)| *turn == turn_id)
        .skip(1)
        .filter(|(_, message)| matches!(message, Message::User { .. }))
        .count()
}
