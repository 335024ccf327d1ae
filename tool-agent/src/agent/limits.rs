//! Budgets in the loop: the ledger, counted from the stored conversation (each model message
//! keeps its usage and model; each answered session-limit request its answer), and the checks
//! made before a model request and before a response's calls run.

use std::collections::HashMap;

use serde_json::json;
use toolwright_core::{ErrorCode, ModelUsage};
use toolwright_runtime::{Decision, InputRequest, RequestStatus};

use super::AgentError;
use crate::budget::{Budget, Limit, LimitAnswer, LimitReached, Limits, Scope};
use crate::conversation::Conversation;
use crate::message::{Message, Usage};

/// What was used, in one scope.
#[derive(Debug, Default)]
struct Spent {
    steps: u64,
    tool_calls: u64,
    usage: Usage,
    cost: f64,
}

impl Spent {
    fn add_delegated(&mut self, used: &ModelUsage) {
        // Saturating: a stored result's usage may say anything.
        self.steps = self.steps.saturating_add(used.requests);
        self.tool_calls = self.tool_calls.saturating_add(used.tool_calls);
        self.usage += Usage::from(used);
        self.cost += used.cost;
    }

    fn get(&self, limit: Limit) -> f64 {
        match limit {
            Limit::Steps => self.steps as f64,
            Limit::ToolCalls => self.tool_calls as f64,
            Limit::InputTokens => self.usage.input_tokens as f64,
            Limit::OutputTokens => self.usage.output_tokens as f64,
            Limit::Cost => self.cost,
        }
    }
}

/// What a turn and its session used, and the extensions approved for each limit.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    turn: Spent,
    session: Spent,
    extensions: HashMap<(Scope, Limit), u32>,
}

impl Ledger {
    /// The ledger of turn `turn_id` from `conversation`. Cost is counted only when `budget`
    /// limits it, and then every model that answered needs a price.
    pub(crate) fn of(
        conversation: &Conversation,
        turn_id: &str,
        budget: &Budget,
    ) -> Result<Ledger, AgentError> {
        let priced = budget.turn.cost.is_some() || budget.session.cost.is_some();
        Self::count(conversation, turn_id, budget, priced)
    }

    /// [`Ledger::of`], counting cost when `priced` (then every model that answered needs a
    /// price in `budget`).
    pub(crate) fn count(
        conversation: &Conversation,
        turn_id: &str,
        budget: &Budget,
        priced: bool,
    ) -> Result<Ledger, AgentError> {
        let mut ledger = Ledger::default();
        for (turn, message) in conversation.by_turn() {
            let here = turn == turn_id;
            match message {
                Message::Assistant(answer) => {
                    let usage = answer.usage.unwrap_or_default();
                    // A response without usage (a provider that reports none) costs nothing
                    // that can be counted.
                    let cost = if priced && answer.usage.is_some() {
                        let model = answer.model.as_deref().unwrap_or_default();
                        let price = budget.price_of(model).ok_or_else(|| {
                            AgentError::Budget(format!(
                                "the budget limits cost, but no price is configured for model \
                                 `{model}`: add `Budget::price(\"{model}\", ..)`"
                            ))
                        })?;
                        price.cost(&usage)
                    } else {
                        0.0
                    };
                    let calls = answer.tool_calls.len() as u64;
                    for spent in [Some(&mut ledger.session), here.then_some(&mut ledger.turn)]
                        .into_iter()
                        .flatten()
                    {
                        spent.steps = spent.steps.saturating_add(1);
                        spent.tool_calls = spent.tool_calls.saturating_add(calls);
                        spent.usage += usage;
                        spent.cost += cost;
                    }
                }
                // What a call's own model asks used (a scratch session, a subagent) counts
                // as the turn's: requests as rounds, the calls they made, tokens and cost.
                Message::ToolResult {
                    usage: Some(used), ..
                } => {
                    for spent in [Some(&mut ledger.session), here.then_some(&mut ledger.turn)]
                        .into_iter()
                        .flatten()
                    {
                        spent.add_delegated(used);
                    }
                }
                // Calls that never ran (stopped at a limit, their turn cancelled) used nothing.
                Message::ToolResult {
                    error: Some(ErrorCode::Cancelled),
                    ..
                } => {
                    for spent in [Some(&mut ledger.session), here.then_some(&mut ledger.turn)]
                        .into_iter()
                        .flatten()
                    {
                        spent.tool_calls = spent.tool_calls.saturating_sub(1);
                    }
                }
                Message::Context {
                    limit: Some(answer),
                    ..
                } if answer.extended => {
                    for &(scope, limit) in &answer.limits {
                        if scope == Scope::Session || here {
                            *ledger.extensions.entry((scope, limit)).or_default() += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(ledger)
    }

    /// What the turn used, as a call's model usage: what a subagent's turn adds to its
    /// parent's.
    pub(crate) fn turn_usage(&self) -> ModelUsage {
        let spent = &self.turn;
        spent.usage.spent(spent.steps, spent.tool_calls, spent.cost)
    }

    /// What is left of `budget` for the turn: per limit, the least left of the turn's and
    /// the session's (extensions included), never below zero. What a subagent the turn
    /// starts may use at most.
    pub(crate) fn remaining(&self, budget: &Budget) -> Limits {
        let left = |limit: Limit| -> Option<f64> {
            [Scope::Turn, Scope::Session]
                .into_iter()
                .filter_map(|scope| {
                    let base = budget.limits(scope).get(limit)?;
                    let extend_by = if base > 0.0 { base } else { 1.0 };
                    let extensions = self.extensions.get(&(scope, limit)).copied().unwrap_or(0);
                    let spent = match scope {
                        Scope::Turn => &self.turn,
                        Scope::Session => &self.session,
                    };
                    Some((base + extend_by * f64::from(extensions) - spent.get(limit)).max(0.0))
                })
                .reduce(f64::min)
        };
        let count = |limit| left(limit).map(|n| n as u64);
        Limits {
            steps: count(Limit::Steps),
            tool_calls: count(Limit::ToolCalls),
            input_tokens: count(Limit::InputTokens),
            output_tokens: count(Limit::OutputTokens),
            cost: left(Limit::Cost),
        }
    }

    /// The limits reached before the next model request: rounds, tokens and cost used up.
    pub(crate) fn before_request(&self, budget: &Budget) -> Vec<LimitReached> {
        let limits = [
            Limit::Steps,
            Limit::InputTokens,
            Limit::OutputTokens,
            Limit::Cost,
        ];
        self.reached(budget, &limits, 0, |used, max| used >= max)
    }

    /// The limits `calls` more tool calls would go past.
    pub(crate) fn before_calls(&self, budget: &Budget, calls: usize) -> Vec<LimitReached> {
        self.reached(budget, &[Limit::ToolCalls], calls as u64, |used, max| {
            used > max
        })
    }

    fn reached(
        &self,
        budget: &Budget,
        limits: &[Limit],
        calls: u64,
        over: impl Fn(f64, f64) -> bool,
    ) -> Vec<LimitReached> {
        let mut reached = Vec::new();
        for scope in [Scope::Turn, Scope::Session] {
            let spent = match scope {
                Scope::Turn => &self.turn,
                Scope::Session => &self.session,
            };
            for &limit in limits {
                let Some(base) = budget.limits(scope).get(limit) else {
                    continue;
                };
                // Each approval adds the configured amount again (one unit for a limit of 0).
                let extend_by = if base > 0.0 { base } else { 1.0 };
                let extensions = self.extensions.get(&(scope, limit)).copied().unwrap_or(0);
                let max = base + extend_by * f64::from(extensions);
                let mut used = spent.get(limit);
                if limit == Limit::ToolCalls {
                    used += calls as f64;
                }
                if over(used, max) {
                    reached.push(LimitReached {
                        scope,
                        limit,
                        used,
                        max,
                        extend_by,
                    });
                }
            }
        }
        reached
    }
}

/// What the person is asked, and what their client shows.
pub(crate) fn request_of(reached: &[LimitReached]) -> (String, serde_json::Value) {
    let what: Vec<String> = reached.iter().map(LimitReached::describe).collect();
    let prompt = format!(
        "The agent {}. Approve to extend the limit, or cancel to stop the turn.",
        what.join("; ")
    );
    (prompt, json!({ "limits": reached }))
}

/// How `request`, a session-limit request of the turn's last step, was answered, as the
/// context message that tells the model and keeps the answer in the ledger.
pub(crate) fn answer_message(request: &InputRequest) -> Message {
    let reached: Vec<LimitReached> = request
        .input
        .as_ref()
        .and_then(|input| input.get("limits"))
        .and_then(|limits| serde_json::from_value(limits.clone()).ok())
        .unwrap_or_default();
    let extended = matches!(
        request.status,
        RequestStatus::Settled {
            decision: Decision::Approved,
            ..
        }
    );
    let what: Vec<String> = reached.iter().map(LimitReached::describe).collect();
    let text = if extended {
        format!(
            "The person extended the budget: {} and may go on.",
            what.join("; ")
        )
    } else {
        format!(
            "The turn stopped: {} and the person did not extend it.",
            what.join("; ")
        )
    };
    Message::Context {
        text,
        limit: Some(LimitAnswer {
            request_id: request.request_id.clone(),
            limits: reached.iter().map(|r| (r.scope, r.limit)).collect(),
            extended,
        }),
    }
}

/// Whether the conversation already holds the answer to request `request_id`.
pub(crate) fn answered(conversation: &Conversation, request_id: &str) -> bool {
    conversation.messages().iter().rev().any(|message| {
        matches!(
            message,
            Message::Context { limit: Some(answer), .. } if answer.request_id == request_id
        )
    })
}

/// The tool whose invalid input the model has retried more times than `retries_of` allows,
/// counted in turn `turn_id`: its name, the invalid calls in a row and the last validation
/// message.
pub(crate) fn input_retries_exhausted(
    conversation: &Conversation,
    turn_id: &str,
    retries_of: impl Fn(&str) -> u32,
) -> Option<(String, u32, String)> {
    // Per tool: invalid rounds in a row, the round last counted, the last message. Parallel
    // invalid calls of one tool in one response are one attempt.
    let mut in_a_row: HashMap<&str, (u32, usize, String)> = HashMap::new();
    let mut round = 0;
    for (turn, message) in conversation.by_turn() {
        if turn != turn_id {
            continue;
        }
        match message {
            Message::Assistant(_) => round += 1,
            Message::ToolResult {
                name,
                output,
                error,
                ..
            } => {
                if *error == Some(ErrorCode::InvalidInput) {
                    let entry = in_a_row.entry(name).or_default();
                    if entry.1 != round || entry.0 == 0 {
                        entry.0 += 1;
                        entry.1 = round;
                    }
                    entry.2 = output.to_text();
                } else {
                    in_a_row.remove(name.as_str());
                }
            }
            _ => {}
        }
    }
    in_a_row
        .into_iter()
        .filter(|(name, (count, _, _))| *count > retries_of(name))
        .map(|(name, (count, _, last))| (name.to_owned(), count, last))
        .min_by(|a, b| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use toolwright_core::ModelOutput;

    use super::*;

    /// A call's result whose model asks used `used` (as a stored row may say).
    fn delegated(call_id: &str, used: ModelUsage) -> Message {
        Message::ToolResult {
            call_id: call_id.into(),
            name: "research".into(),
            output: ModelOutput::text("done"),
            is_error: false,
            error: None,
            usage: Some(used),
        }
    }

    #[test]
    fn delegated_usage_past_what_a_count_holds_saturates() {
        let huge = ModelUsage {
            requests: u64::MAX,
            tool_calls: u64::MAX,
            input_tokens: u64::MAX,
            ..ModelUsage::default()
        };
        let mut conversation = Conversation::empty("s1");
        conversation.appended("t1", vec![delegated("c1", huge), delegated("c2", huge)]);
        let ledger = Ledger::of(&conversation, "t1", &Budget::new()).unwrap();
        let used = ledger.turn_usage();
        assert_eq!(used.requests, u64::MAX);
        assert_eq!(used.tool_calls, u64::MAX);
        assert_eq!(used.input_tokens, u64::MAX);
    }
}
