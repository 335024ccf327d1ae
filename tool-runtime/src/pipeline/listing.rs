//! Which tools a step offers, and how: the conditional tools whose predicate is false
//! (`enabled`), and what `prepare` fns decide (a tool's own, then the runtime's over every
//! tool): hide a tool, or describe it anew for this step. Evaluated at each step, for the
//! step's calls and for the model's list ([`crate::Turn::tool_list`]); only tools with a
//! `prepare` fn (all of them when the runtime has one) pay for it.

use std::borrow::Cow;
use std::collections::HashSet;

use toolwright_core::{Audience, EnabledContext, Preparation, PrepareContext, Registry};

use crate::engine::Engine;
use crate::exec::context::session_info;
use crate::record::{SessionRecord, TurnRecord};

/// A tool's `prepare` fn or the runtime's, as the loop over both runs them.
type Prepare<'a> = dyn Fn(&PrepareContext<'_>) -> Preparation + 'a;

/// The tools of one step, as `enabled` and `prepare` left them.
pub(crate) struct StepTools {
    /// Tools the step does not offer: their `enabled` is false, or a `prepare` fn hid them.
    pub(crate) hidden: HashSet<usize>,
    /// Tools offered with another description this step, by index.
    pub(crate) described: Vec<(usize, String)>,
}

impl StepTools {
    /// Whether some tool is conditional or prepared: only then can a step's list differ from
    /// the cached one, and the set of tools change.
    pub(crate) fn may_differ(engine: &Engine, registry: &Registry) -> bool {
        engine.hooks().prepare.is_some()
            || registry
                .tools()
                .iter()
                .any(|t| t.enabled().is_some() || t.prepare().is_some())
    }
}

/// The tools of a step of `turn` in `session` now.
pub(crate) fn step_tools(
    engine: &Engine,
    registry: &Registry,
    session: &SessionRecord,
    turn: &TurnRecord,
) -> StepTools {
    let mut hidden = disabled_tools(registry, session, turn);
    let mut described = Vec::new();
    let runtime = engine.hooks().prepare.as_deref();
    if runtime.is_none() && !registry.tools().iter().any(|t| t.prepare().is_some()) {
        return StepTools { hidden, described };
    }
    let audience = Audience::of(turn.caller);
    let info = session_info(session, &turn.id, turn.current.as_ref(), turn.caller);
    for (index, tool) in registry.tools().iter().enumerate() {
        let own = tool.prepare();
        if (own.is_none() && runtime.is_none())
            || hidden.contains(&index)
            || !tool.visible_to(audience)
        {
            continue;
        }
        let mut description = Cow::Borrowed(tool.description());
        let mut hide = false;
        let runtime_step = runtime.map(|r| move |cx: &PrepareContext<'_>| r.prepare(cx));
        let steps: [Option<&Prepare<'_>>; 2] = [
            own.as_ref().map(|f| f as &Prepare<'_>),
            runtime_step.as_ref().map(|f| f as &Prepare<'_>),
        ];
        for prepare in steps.into_iter().flatten() {
            let cx = PrepareContext::new(
                &info,
                &session.state,
                turn.caller,
                tool.name(),
                &description,
            );
            // A `prepare` fn that panics hides its tool: fail closed.
            let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(&cx)))
                .unwrap_or(Preparation::Hide);
            match decided {
                Preparation::Keep => {}
                Preparation::Hide => {
                    hide = true;
                    break;
                }
                Preparation::Describe(text) => description = Cow::Owned(text),
            }
        }
        if hide {
            hidden.insert(index);
        } else if let Cow::Owned(text) = description {
            described.push((index, text));
        }
    }
    StepTools { hidden, described }
}

/// Tools outside `session`'s subset ([`SessionRecord::tools`]), and tools whose `enabled`
/// predicate is false for it now.
pub(crate) fn disabled_tools(
    registry: &Registry,
    session: &SessionRecord,
    turn: &TurnRecord,
) -> HashSet<usize> {
    let info = session_info(session, &turn.id, turn.current.as_ref(), turn.caller);
    let cx = EnabledContext::new(&info, &session.state);
    registry
        .tools()
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            if !session.allows(t.name()) {
                return true;
            }
            // A predicate that panics hides its tool: fail closed.
            t.enabled().is_some_and(|enabled| {
                !std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| enabled(&cx)))
                    .unwrap_or(false)
            })
        })
        .map(|(i, _)| i)
        .collect()
}
