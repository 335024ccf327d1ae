//! What one step works with, read once at its start: the turn, its session, the approvals the
//! session remembers, the tools as they are now and which of them are switched off, and the
//! notices for the model about tools that came or went.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolwright_core::{Audience, ModelBackend, Registry, SessionInfo, Tool};

use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::exec::context::session_info;
use crate::record::{SessionRecord, StepInput, TurnRecord};
use crate::store::Appended;

/// What one step works with.
pub(crate) struct StepScope {
    /// The tools as they were when the step began.
    pub(crate) registry: Registry,
    pub(crate) session: SessionRecord,
    pub(crate) turn: TurnRecord,
    /// The approval keys the session remembers for the turn's requester, the principal its
    /// calls run for (what `once` consults; another person's grants are not among them).
    pub(crate) approved: BTreeSet<String>,
    pub(crate) audience: Audience,
    /// Tools whose `enabled` predicate is false in this step, or that a `prepare` fn hid.
    pub(crate) disabled: HashSet<usize>,
    /// Notices for the model about tools that came or went since its last list.
    pub(crate) notices: Vec<String>,
    /// Fires when the turn is cancelled; handed to asynchronous policies.
    pub(crate) cancel: TokenSignal,
    /// The model the host supplied for this step's calls (see [`crate::StepOptions`]).
    pub(crate) model: Option<Arc<dyn ModelBackend>>,
    /// The conversation's messages the step's first write appends (see
    /// [`crate::StepOptions::conversation`]); taken by that write.
    pub(crate) conversation: Option<(u64, Vec<serde_json::Value>)>,
    /// How many messages steered into the turn the host delivered to its model (see
    /// [`StepOptions::steering`](crate::StepOptions::steering)).
    pub(crate) delivered: Option<usize>,
    /// Where the model input that made the step's calls is (see
    /// [`crate::StepOptions::messages`]); recorded with the step.
    pub(crate) input: Option<StepInput>,
    /// The version the step's last write gave `turn`, once the step is over and `turn` is
    /// what the store holds at it (what the runtime keeps for the next step); `None` when the
    /// step's write lost (to a cancel) or has not happened.
    pub(crate) stored: Option<u64>,
}

/// `conversation` (a [`StepScope`]'s) as a store write appends it.
pub(crate) fn appended(conversation: &Option<(u64, Vec<serde_json::Value>)>) -> Appended<'_> {
    match conversation {
        Some((first, messages)) => Appended {
            first: *first,
            messages,
        },
        None => Appended::default(),
    }
}

/// The turn's cancellation token as the signal policies receive.
pub(crate) struct TokenSignal(pub(crate) CancellationToken);

impl toolwright_core::CancelSignal for TokenSignal {
    fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    fn cancelled(&self) -> futures_util::future::BoxFuture<'_, ()> {
        Box::pin(self.0.cancelled())
    }
}

impl StepScope {
    /// The scope of a step of `turn` in `session`: the approvals (only when some policy reads
    /// them), the tools now and the conditional tools' state, announced to the model once.
    pub(crate) async fn load(
        engine: &Engine,
        turn: TurnRecord,
        session: SessionRecord,
        token: &CancellationToken,
    ) -> Result<StepScope, RuntimeError> {
        let approved = engine.approvals(&session.id, turn.current.as_ref()).await?;
        let audience = Audience::of(turn.caller);
        let registry = engine.registry();
        let disabled = super::listing::step_tools(engine, &registry, &session, &turn).hidden;
        let notices = announce(engine, &registry, &session, &turn, &disabled).await?;
        Ok(StepScope {
            registry,
            session,
            turn,
            approved,
            audience,
            disabled,
            notices,
            cancel: TokenSignal(token.clone()),
            model: None,
            conversation: None,
            input: None,
            delivered: None,
            stored: None,
        })
    }

    /// The messages the step's first write appends, for that write.
    pub(crate) fn appended(&self) -> Appended<'_> {
        appended(&self.conversation)
    }

    pub(crate) fn info(&self) -> SessionInfo {
        session_info(
            &self.session,
            &self.turn.id,
            self.turn.current.as_ref(),
            self.turn.caller,
        )
    }
}

/// Tells the model once when the set of conditional, prepared, remote or run-time defined
/// tools it sees changed.
async fn announce(
    engine: &Engine,
    registry: &Registry,
    session: &SessionRecord,
    turn: &TurnRecord,
    disabled: &HashSet<usize>,
) -> Result<Vec<String>, RuntimeError> {
    let audience = Audience::of(turn.caller);
    // With the runtime's `prepare_tools`, any tool may come or go.
    let prepared_all = engine.hooks().prepare.is_some();
    // Borrowed names: the usual step finds the list unchanged and copies nothing.
    let now: Vec<&str> = registry
        .tools()
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            (t.enabled().is_some()
                || t.remote_tool().is_some()
                || t.dynamic_tool().is_some()
                || t.prepare().is_some()
                || prepared_all)
                && !disabled.contains(i)
                && t.listed_for(audience)
        })
        .map(|(_, t)| t.name())
        .collect();
    // Per audience: a user's list and a model's list differ, and alternating between them
    // must not read as tools coming and going.
    let key = audience_key(audience);
    let before = session.announced.get(key);
    if before.is_some_and(|before| before.iter().eq(now.iter().copied())) {
        return Ok(Vec::new());
    }
    let before = before.cloned();
    let now: Vec<String> = now.into_iter().map(str::to_owned).collect();
    engine
        .update_session(&session.id, |stored| {
            stored.announced.insert(key.to_owned(), now.clone());
        })
        .await?;
    let Some(before) = before else {
        // The first list the model sees already holds these tools.
        return Ok(Vec::new());
    };
    let added: Vec<String> = now
        .iter()
        .filter(|n| !before.contains(n))
        .cloned()
        .collect();
    let removed: Vec<String> = before
        .iter()
        .filter(|n| !now.contains(n))
        .cloned()
        .collect();
    engine.emit(Event::ToolsChanged {
        session_id: session.id.clone(),
        turn_id: turn.id.clone(),
        added: added.clone(),
        removed: removed.clone(),
    });
    Ok(added
        .iter()
        .map(|n| format!("New tool available: {n}"))
        .chain(removed.iter().map(|n| removed_notice(registry, n)))
        .collect())
}

/// The key of `audience`'s list in [`SessionRecord::announced`].
fn audience_key(audience: Audience) -> &'static str {
    match audience {
        Audience::Model => "model",
        Audience::Subagent => "subagent",
        Audience::User => "user",
    }
}

/// The notice for tool `name`, gone from the list.
fn removed_notice(registry: &Registry, name: &str) -> String {
    if registry.get(name).is_some_and(Tool::is_withheld) {
        format!(
            "Tool withheld: {name} (its server changed its definition; calling it asks the user to approve the change)"
        )
    } else {
        format!("Tool no longer available: {name}")
    }
}
