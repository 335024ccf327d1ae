//! Attachments on their way to the model: recorded results and the stored conversation name a
//! file a tool returned by its attachment id; each request carries the file itself, read back
//! from the runtime once per run of the loop (the same bytes every round, so a provider's
//! prompt cache holds).

use std::collections::HashMap;

use toolwright_core::{ContentPart, ModelOutput};
use toolwright_runtime::Turn;

use crate::message::Message;

/// The files resolved so far in one run of the loop, by attachment id.
#[derive(Default)]
pub(crate) struct Files {
    resolved: HashMap<String, ContentPart>,
}

impl Files {
    /// `messages` as the model gets them: each attachment in a tool's result replaced by the
    /// file part it stands for (or by a text part saying why it cannot be read).
    pub(crate) async fn outgoing(&mut self, turn: &Turn, messages: &[Message]) -> Vec<Message> {
        let mut out = Vec::with_capacity(messages.len());
        for message in messages {
            let mut message = message.clone();
            if let Message::ToolResult { output, .. } = &mut message
                && let ModelOutput::Content(parts) = output
            {
                for part in parts.iter_mut() {
                    if matches!(part, ContentPart::Attachment { .. }) {
                        *part = self.resolve(turn, part).await;
                    }
                }
            }
            out.push(message);
        }
        out
    }

    /// The file part the attachment `reference` stands for.
    async fn resolve(&mut self, turn: &Turn, reference: &ContentPart) -> ContentPart {
        let ContentPart::Attachment { id, .. } = reference else {
            return reference.clone();
        };
        if let Some(part) = self.resolved.get(id) {
            return part.clone();
        }
        let output = ModelOutput::Content(vec![reference.clone()]);
        let resolved = match turn.resolve_attachments(&output).await {
            ModelOutput::Content(mut parts) if parts.len() == 1 => parts.remove(0),
            _ => reference.clone(),
        };
        // Only a file read back is kept: a failure is tried again next round.
        if matches!(resolved, ContentPart::File { .. }) {
            self.resolved.insert(id.clone(), resolved.clone());
        }
        resolved
    }
}
