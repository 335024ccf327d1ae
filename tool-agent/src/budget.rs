//! Budgets: what a turn and a session may use (model rounds, tool calls, tokens, cost), and
//! the prices cost is counted at. The [`Agent`](crate::Agent) checks them before each model
//! request and before running a response's calls; reaching one parks the turn on a
//! session-limit request that the host approves (the limit is extended) or cancels (the turn
//! stops).

use serde::{Deserialize, Serialize};

use crate::message::Usage;

/// What a turn and a session may use. Nothing is limited by default.
///
/// ```
/// use toolwright_agent::{Budget, Limits, Price};
///
/// let budget = Budget::new()
///     .turn(Limits::new().steps(25).tool_calls(60))
///     .session(Limits::new().cost(5.0))
///     // US dollars per million tokens (any currency: the cost limit is in the same unit).
///     .price("gpt-4.1", Price::per_million(2.0, 8.0).cached_input(0.5));
/// # let _ = budget;
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    pub(crate) turn: Limits,
    pub(crate) session: Limits,
    prices: Vec<(String, Price)>,
}

impl Budget {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// `self` limiting each turn to `limits`.
    pub fn turn(mut self, limits: Limits) -> Self {
        self.turn = limits;
        self
    }

    /// `self` limiting each session, over all its turns, to `limits`.
    pub fn session(mut self, limits: Limits) -> Self {
        self.session = limits;
        self
    }

    /// `self` counting the cost of model `model` at `price`. A response's model matches the
    /// longest configured name it starts with, so `"gpt-4.1"` also prices
    /// `"gpt-4.1-2025-04-14"`. There is no built-in price table: with a cost limit, every
    /// model that answers needs a price.
    pub fn price(mut self, model: impl Into<String>, price: Price) -> Self {
        let model = model.into();
        self.prices.retain(|(name, _)| *name != model);
        self.prices.push((model, price));
        self
    }

    /// The price of `model`: an exact name, else the longest configured prefix.
    pub fn price_of(&self, model: &str) -> Option<&Price> {
        self.prices
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }

    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.turn != Limits::default() || self.session != Limits::default()
    }

    /// The budget of a subagent's session started by a turn of this budget: the subagent's
    /// own limits (`own`, else none), each turn's capped by `left` (what the parent turn has
    /// left), and the prices of both (its own first).
    pub(crate) fn for_child(&self, own: Option<&Budget>, left: &Limits) -> Budget {
        let own = own.cloned().unwrap_or_default();
        let mut prices = own.prices.clone();
        for (model, price) in &self.prices {
            if !prices.iter().any(|(name, _)| name == model) {
                prices.push((model.clone(), *price));
            }
        }
        Budget {
            turn: own.turn.capped(left),
            session: own.session,
            prices,
        }
    }

    /// Whether some model has a price.
    pub(crate) fn has_prices(&self) -> bool {
        !self.prices.is_empty()
    }

    pub(crate) fn limits(&self, scope: Scope) -> &Limits {
        match scope {
            Scope::Turn => &self.turn,
            Scope::Session => &self.session,
        }
    }
}

/// The limits of one scope (a turn or a session); `None` is unlimited.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// Model rounds: requests to the model (each answer, with or without tool calls).
    pub steps: Option<u64>,
    /// Tool calls the model made.
    pub tool_calls: Option<u64>,
    /// Prompt tokens, over all requests (cached ones included).
    pub input_tokens: Option<u64>,
    /// Generated tokens, over all requests.
    pub output_tokens: Option<u64>,
    /// Cost, in the unit of the configured [`Price`]s.
    pub cost: Option<f64>,
}

impl Limits {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// `self` allowing `steps` model rounds.
    pub fn steps(mut self, steps: u64) -> Self {
        self.steps = Some(steps);
        self
    }

    /// `self` allowing `calls` tool calls.
    pub fn tool_calls(mut self, calls: u64) -> Self {
        self.tool_calls = Some(calls);
        self
    }

    /// `self` allowing `tokens` prompt tokens.
    pub fn input_tokens(mut self, tokens: u64) -> Self {
        self.input_tokens = Some(tokens);
        self
    }

    /// `self` allowing `tokens` generated tokens.
    pub fn output_tokens(mut self, tokens: u64) -> Self {
        self.output_tokens = Some(tokens);
        self
    }

    /// `self` allowing a cost of `cost`.
    pub fn cost(mut self, cost: f64) -> Self {
        self.cost = Some(cost);
        self
    }

    /// The stricter of `self` and `other`, limit by limit.
    pub(crate) fn capped(&self, other: &Limits) -> Limits {
        fn min<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Limits {
            steps: min(self.steps, other.steps),
            tool_calls: min(self.tool_calls, other.tool_calls),
            input_tokens: min(self.input_tokens, other.input_tokens),
            output_tokens: min(self.output_tokens, other.output_tokens),
            cost: min(self.cost, other.cost),
        }
    }

    /// The limit on `limit`, as a number.
    pub(crate) fn get(&self, limit: Limit) -> Option<f64> {
        match limit {
            Limit::Steps => self.steps.map(|n| n as f64),
            Limit::ToolCalls => self.tool_calls.map(|n| n as f64),
            Limit::InputTokens => self.input_tokens.map(|n| n as f64),
            Limit::OutputTokens => self.output_tokens.map(|n| n as f64),
            Limit::Cost => self.cost,
        }
    }
}

/// What a model's tokens cost, per million tokens, in the unit the cost limits use.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Per million prompt tokens not read from or written to the cache.
    pub input: f64,
    /// Per million prompt tokens read from the provider's cache.
    pub cached_input: f64,
    /// Per million prompt tokens written to the provider's cache.
    pub cache_write: f64,
    /// Per million generated tokens.
    pub output: f64,
}

impl Price {
    /// `input` and `output` per million tokens; cache reads and writes at the input price
    /// until set.
    pub fn per_million(input: f64, output: f64) -> Self {
        Price {
            input,
            cached_input: input,
            cache_write: input,
            output,
        }
    }

    /// `self` with cache reads at `price` per million tokens.
    pub fn cached_input(mut self, price: f64) -> Self {
        self.cached_input = price;
        self
    }

    /// `self` with cache writes at `price` per million tokens.
    pub fn cache_write(mut self, price: f64) -> Self {
        self.cache_write = price;
        self
    }

    /// What `usage` costs.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens;
        let written = usage.cache_write_input_tokens;
        let plain = usage
            .input_tokens
            .saturating_sub(cached.saturating_add(written));
        (plain as f64 * self.input
            + cached as f64 * self.cached_input
            + written as f64 * self.cache_write
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// Where a limit applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One turn.
    Turn,
    /// A session, over all its turns.
    Session,
}

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Model rounds.
    Steps,
    /// Tool calls.
    ToolCalls,
    /// Prompt tokens.
    InputTokens,
    /// Generated tokens.
    OutputTokens,
    /// Cost.
    Cost,
}

impl Limit {
    /// Every limit, in the order they are checked.
    pub const ALL: [Limit; 5] = [
        Limit::Steps,
        Limit::ToolCalls,
        Limit::InputTokens,
        Limit::OutputTokens,
        Limit::Cost,
    ];

    fn describe(self, amount: f64) -> String {
        match self {
            Limit::Steps => format!("{amount} model rounds"),
            Limit::ToolCalls => format!("{amount} tool calls"),
            Limit::InputTokens => format!("{amount} input tokens"),
            Limit::OutputTokens => format!("{amount} output tokens"),
            Limit::Cost => format!("a cost of {amount:.4}"),
        }
    }
}

/// A limit a turn reached: what the session-limit request shows (its `input`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitReached {
    /// A turn's or the session's.
    pub scope: Scope,
    /// What it counts.
    pub limit: Limit,
    /// What was used (with the calls about to run, for tool calls).
    pub used: f64,
    /// The limit now (the configured one, extended by earlier approvals).
    pub max: f64,
    /// How much an approval adds: the configured limit.
    pub extend_by: f64,
}

impl LimitReached {
    /// The sentence a person reads.
    pub fn describe(&self) -> String {
        let whose = match self.scope {
            Scope::Turn => "this turn",
            Scope::Session => "this session",
        };
        format!(
            "{whose} reached its limit of {} ({} used)",
            self.limit.describe(self.max),
            self.limit.describe(self.used)
        )
    }
}

/// How a session-limit request was answered, kept with the conversation (on the context
/// message that tells the model): the ledger counts approved extensions from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitAnswer {
    /// The request.
    pub request_id: String,
    /// The limits it was about.
    pub limits: Vec<(Scope, Limit)>,
    /// Whether the host extended them (else the turn stopped).
    pub extended: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_priced_by_its_longest_configured_prefix() {
        let budget = Budget::new()
            .price("gpt-4.1", Price::per_million(2.0, 8.0))
            .price("gpt-4.1-mini", Price::per_million(0.4, 1.6));
        assert_eq!(budget.price_of("gpt-4.1-2025-04-14").unwrap().input, 2.0);
        assert_eq!(
            budget.price_of("gpt-4.1-mini-2025-04-14").unwrap().input,
            0.4
        );
        assert!(budget.price_of("claude-sonnet-4-5").is_none());
    }

    #[test]
    fn cost_counts_cache_reads_and_writes_at_their_prices() {
        let price = Price::per_million(3.0, 15.0)
            .cached_input(0.3)
            .cache_write(3.75);
        let usage = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 500_000,
            cache_write_input_tokens: 100_000,
            output_tokens: 100_000,
        };
        let cost = price.cost(&usage);
        let expected = 0.4 * 3.0 + 0.5 * 0.3 + 0.1 * 3.75 + 0.1 * 15.0;
        assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
    }

    #[test]
    fn a_reached_limit_reads_as_a_sentence() {
        let reached = LimitReached {
            scope: Scope::Turn,
            limit: Limit::Steps,
            used: 3.0,
            max: 3.0,
            extend_by: 3.0,
        };
        assert_eq!(
            reached.describe(),
            "this turn reached its limit of 3 model rounds (3 model rounds used)"
        );
    }
}
