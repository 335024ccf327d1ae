//! The model loop of toolwright: a provider-neutral [`Model`] trait, the Chat Completions
//! adapter ([`ChatCompletions`], which also speaks to OpenAI-compatible servers), the OpenAI
//! Responses API adapter ([`Responses`]), the Anthropic Messages API adapter ([`Anthropic`],
//! prompt caching on by default), a deterministic [`ScriptedModel`] for tests (with the
//! `loopback` feature, a `LoopbackProvider` serves the same scripts over HTTP in each
//! provider's wire format), and the [`Agent`] that drives a runtime turn: it sends the
//! conversation, runs the model's tool calls as steps, renders their results back and repeats
//! until a final answer, a tool that ends the turn, or a park on input requests, within a
//! [`Budget`] and retrying what a provider fails for now ([`RetryPolicy`]). The conversation is
//! stored with the session, so a parked turn resumes in any process. A [`ModelDecider`] lets a
//! model judge `approval = auto(...)` calls against the tool's criteria, failing closed.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent;
mod anthropic;
mod backend;
mod budget;
mod conversation;
mod decider;
mod files;
mod http;
#[cfg(feature = "loopback")]
mod loopback;
mod message;
mod model;
mod openai;
mod responses;
mod retry;
mod scripted;
mod telemetry;

pub use agent::{Agent, AgentError, AgentEvent, AgentOutcome, AgentTurn, MAX_DEPTH, Subagent};
pub use anthropic::{ANTHROPIC_BASE_URL, Anthropic};
pub use backend::Backend;
pub use budget::{Budget, Limit, LimitAnswer, LimitReached, Limits, Price, Scope};
pub use decider::ModelDecider;
#[cfg(feature = "loopback")]
pub use loopback::{LoopbackProvider, Wire};
pub use message::{AssistantMessage, Message, ProviderItem, ToolUse, Usage};
pub use model::{
    FinishReason, Model, ModelError, Request, Response, ResponseStream, Settings, StreamEvent,
    ToolChoice, ToolDefinitions, complete,
};
pub use openai::{ChatCompletions, OPENAI_BASE_URL};
pub use responses::{ReasoningEffort, ReasoningSummary, Responses};
pub use retry::{RetryPolicy, Retrying};
pub use scripted::{Reply, ScriptedModel};
