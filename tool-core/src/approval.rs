//! Approval policies: whether a call must wait for a person, what the approver sees, and who may
//! answer.

use std::future::Future;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::session::{Principal, SessionInfo};

/// What a request policy decides for one call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", content = "reason", rename_all = "kebab-case")]
pub enum ApprovalDecision {
    /// Stop and wait for a person.
    UserApproval,
    /// No approval needed: run.
    NotApplicable,
    /// Approved automatically, without asking.
    Approved,
    /// Refused. With a reason, the model sees it.
    Denied(Option<String>),
}

impl ApprovalDecision {
    /// A denial whose `reason` the model sees.
    pub fn denied(reason: impl Into<String>) -> Self {
        ApprovalDecision::Denied(Some(reason.into()))
    }

    /// How strict this decision is: `denied` > `user-approval` > `approved` > `not-applicable`.
    pub fn strictness(&self) -> u8 {
        match self {
            ApprovalDecision::NotApplicable => 0,
            ApprovalDecision::Approved => 1,
            ApprovalDecision::UserApproval => 2,
            ApprovalDecision::Denied(_) => 3,
        }
    }

    /// The stricter of `self` and `other`; `denied` never becomes allowed.
    pub fn strictest(self, other: ApprovalDecision) -> ApprovalDecision {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }
}

/// The request policy of a tool.
#[derive(Clone, Copy, Debug)]
pub enum RequestPolicy {
    /// Never ask (also the default when `approval` is absent).
    Never,
    /// Ask the first time per session and requester (per tool, or per `approval_key`), then run:
    /// one person's grant never covers another person's call.
    Once,
    /// Ask every time.
    Always,
    /// Ask a decider the host installs (typically a small model) with what [`AutoSpec`] tells
    /// it; anything but a timely "clear" means asking a person.
    Auto(AutoSpec),
    /// A named policy fn of the user (adapted by the macro).
    Custom(PolicyFn),
}

impl RequestPolicy {
    /// The policy's name as written in the attribute (`"custom"` for a fn).
    pub fn name(&self) -> &'static str {
        match self {
            RequestPolicy::Never => "never",
            RequestPolicy::Once => "once",
            RequestPolicy::Always => "always",
            RequestPolicy::Auto(_) => "auto",
            RequestPolicy::Custom(_) => "custom",
        }
    }
}

/// What `approval = auto(...)` tells the decider, besides the tool name and input: the
/// tool's instructions, its criteria and which model judges. Every part is optional; the
/// decider uses its own defaults for what is missing.
///
/// ```
/// use toolwright_core::approval::{AutoCriteria, AutoSpec, RequestPolicy};
/// const REFUND: RequestPolicy = RequestPolicy::Auto(AutoSpec {
///     instructions: Some("Decide whether this refund needs a finance review."),
///     criteria: AutoCriteria {
///         clear: Some("Refunds under 50 EUR of a charge from the last 30 days."),
///         caution: Some("Anything else."),
///     },
///     model: Some("small"),
/// });
/// assert_eq!(REFUND.name(), "auto");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoSpec {
    /// What the decider is to judge (`auto(instructions = "...")`).
    pub instructions: Option<&'static str>,
    /// When a call may run without a person and when it needs one.
    pub criteria: AutoCriteria,
    /// The name of the model that judges, as the host registered it with its decider
    /// (`auto(model = "...")`); `None`: the decider's default.
    pub model: Option<&'static str>,
}

impl AutoSpec {
    /// No instructions, no criteria, the decider's default model (`approval = auto`).
    pub const fn new() -> Self {
        AutoSpec {
            instructions: None,
            criteria: AutoCriteria::new(),
            model: None,
        }
    }
}

/// The criteria of `auto(criteria(clear = "...", caution = "..."))`: when the decider answers
/// "clear" (run without asking) and when "caution" (ask a person).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoCriteria {
    /// When a call may run without a person.
    pub clear: Option<&'static str>,
    /// When a call needs a person.
    pub caution: Option<&'static str>,
}

impl AutoCriteria {
    /// Neither criterion.
    pub const fn new() -> Self {
        AutoCriteria {
            clear: None,
            caution: None,
        }
    }
}

/// What keys the memory of `once`.
#[derive(Clone, Copy, Debug)]
pub enum ApprovalKey {
    /// The tool's model-facing name (the default).
    ToolName,
    /// A digest of the canonical validated input: a grant covers exactly those arguments.
    Input,
    /// A fn of the input (adapted by the macro).
    Custom(KeyFn),
}

/// A tool's approval settings: request policy, prompt, response policy and memory key.
#[derive(Clone, Copy, Debug)]
pub struct ApprovalSpec {
    /// Whether a call must wait for a person.
    pub request: RequestPolicy,
    /// What the approver sees; default "Approve `label`?".
    pub prompt: Option<PromptFn>,
    /// Who may answer; default the turn's caller.
    pub response: Option<ResponseFn>,
    /// What keys the memory of `once`.
    pub key: ApprovalKey,
    /// The provider whose token an approver must hold (`approval(require_auth = "github")`):
    /// an approval from anyone else is rejected and the request stays pending. Checked with the
    /// runtime's credential broker when the answer arrives; with no `response` policy, a
    /// cancel is allowed to the call's requester and to anyone holding the token.
    pub require_auth: Option<&'static str>,
}

impl ApprovalSpec {
    /// `request` with every other setting at its default: the default prompt, the default
    /// response policy (the turn's caller answers), memory keyed by the tool name, no token
    /// required.
    pub const fn new(request: RequestPolicy) -> ApprovalSpec {
        ApprovalSpec {
            request,
            prompt: None,
            response: None,
            key: ApprovalKey::ToolName,
            require_auth: None,
        }
    }
}

/// Erased custom request policy (generated adapter around the user's fn).
pub type PolicyFn = for<'a> fn(&'a ApprovalCall<'a>) -> BoxFuture<'a, ApprovalDecision>;
/// Erased prompt renderer.
pub type PromptFn = fn(&ApprovalCall<'_>) -> Result<String, crate::ToolError>;
/// Erased response policy.
pub type ResponseFn = fn(&ResponseCall<'_>) -> ResponseVerdict;
/// Erased approval key fn.
pub type KeyFn = fn(&Value) -> Result<String, crate::ToolError>;

/// Tools approved in the session for the call's requester, the principal on whose behalf it
/// runs (what `once` consults). Another person's grants are not among them: one person's
/// consent never covers another person's call.
pub trait ApprovedTools: Send + Sync {
    /// Whether `key` (a tool name or an approval key) is approved in this session for this
    /// call's requester.
    fn contains(&self, key: &str) -> bool;
}

impl ApprovedTools for std::collections::HashSet<String> {
    fn contains(&self, key: &str) -> bool {
        std::collections::HashSet::contains(self, key)
    }
}

impl ApprovedTools for std::collections::BTreeSet<String> {
    fn contains(&self, key: &str) -> bool {
        std::collections::BTreeSet::contains(self, key)
    }
}

/// Lets an asynchronous policy notice that the turn was cancelled.
pub trait CancelSignal: Send + Sync {
    /// Whether the turn was cancelled.
    fn is_cancelled(&self) -> bool;
    /// Completes when the turn is cancelled.
    fn cancelled(&self) -> BoxFuture<'_, ()>;
}

/// A cancellation signal that never fires.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverCancelled;

impl CancelSignal for NeverCancelled {
    fn is_cancelled(&self) -> bool {
        false
    }
    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

/// Everything a request policy may look at, with the input still as JSON (the runtime's side).
#[non_exhaustive]
pub struct ApprovalCall<'a> {
    /// The session, its identities and lineage.
    pub session: &'a SessionInfo,
    /// The resolved tool name (with its toolset or connection prefix).
    pub tool_name: &'a str,
    /// The validated, defaulted input.
    pub input: &'a Value,
    /// The call id.
    pub call_id: &'a str,
    /// Tools approved in this session for the call's requester (the turn's current principal).
    pub approved: &'a dyn ApprovedTools,
    /// Fires when the turn is cancelled.
    pub cancel: &'a dyn CancelSignal,
    /// Server annotations, for tools of remote connections only.
    pub annotations: Option<&'a crate::Annotations>,
}

impl<'a> ApprovalCall<'a> {
    /// A call description for `tool_name` with `input`.
    pub fn new(
        session: &'a SessionInfo,
        tool_name: &'a str,
        input: &'a Value,
        call_id: &'a str,
        approved: &'a dyn ApprovedTools,
        cancel: &'a dyn CancelSignal,
    ) -> Self {
        ApprovalCall {
            session,
            tool_name,
            input,
            call_id,
            approved,
            cancel,
            annotations: None,
        }
    }
}

impl std::fmt::Debug for ApprovalCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalCall")
            .field("session", &self.session.id)
            .field("tool_name", &self.tool_name)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// What a custom request policy receives: the call with its input typed as the tool's arguments.
///
/// Identity comes from [`ApprovalContext::session`], never from the input: compare input fields
/// with the caller's identity, do not trust them as identity.
///
/// ```
/// use toolwright_core::{ApprovalContext, ApprovalDecision};
/// struct Refund { tenant_id: String, amount: f64 }
///
/// fn refund_policy(cx: &ApprovalContext<'_, Refund>) -> ApprovalDecision {
///     let caller_tenant = cx.current().and_then(|p| p.attribute_str("tenant_id"));
///     if caller_tenant != Some(cx.input.tenant_id.as_str()) {
///         return ApprovalDecision::denied("the caller has no access to this tenant");
///     }
///     if cx.input.amount > 1000.0 { ApprovalDecision::UserApproval } else { ApprovalDecision::NotApplicable }
/// }
/// # let _ = refund_policy;
/// ```
#[non_exhaustive]
pub struct ApprovalContext<'a, A> {
    /// The session, its identities and lineage.
    pub session: &'a SessionInfo,
    /// The resolved tool name.
    pub tool_name: &'a str,
    /// The validated input.
    pub input: &'a A,
    /// The call id.
    pub call_id: &'a str,
    /// Tools approved in this session for the call's requester (the turn's current principal).
    pub approved: &'a dyn ApprovedTools,
    /// Fires when the turn is cancelled; pass it to asynchronous checks.
    pub cancel: &'a dyn CancelSignal,
    /// Server annotations, for tools of remote connections only.
    pub annotations: Option<&'a crate::Annotations>,
}

impl<'a, A> ApprovalContext<'a, A> {
    /// The typed view of `call` with `input`.
    pub fn new(call: &ApprovalCall<'a>, input: &'a A) -> Self {
        ApprovalContext {
            session: call.session,
            tool_name: call.tool_name,
            input,
            call_id: call.call_id,
            approved: call.approved,
            cancel: call.cancel,
            annotations: call.annotations,
        }
    }

    /// Who is acting in this turn (may be `None`: anonymous calls, internal runs).
    pub fn current(&self) -> Option<&'a Principal> {
        self.session.current.as_ref()
    }

    /// Who created the session.
    pub fn initiator(&self) -> Option<&'a Principal> {
        self.session.initiator.as_ref()
    }
}

impl<A> std::fmt::Debug for ApprovalContext<'_, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalContext")
            .field("session", &self.session.id)
            .field("tool_name", &self.tool_name)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// What a prompt fn receives: the validated input, the resolved tool name and the call id.
#[derive(Debug)]
#[non_exhaustive]
pub struct PromptContext<'a, A> {
    /// The validated input.
    pub input: &'a A,
    /// The resolved tool name.
    pub tool_name: &'a str,
    /// The call id.
    pub call_id: &'a str,
}

impl<'a, A> PromptContext<'a, A> {
    /// The prompt view of `call` with `input`.
    pub fn new(call: &ApprovalCall<'a>, input: &'a A) -> Self {
        PromptContext {
            input,
            tool_name: call.tool_name,
            call_id: call.call_id,
        }
    }
}

/// The answer a person gives to an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseDecision {
    /// Approve the call.
    Approve,
    /// Cancel (deny) the call.
    Cancel,
}

/// A response to an approval request, as the runtime hands it to a response policy.
#[derive(Debug)]
#[non_exhaustive]
pub struct ResponseCall<'a> {
    /// The session.
    pub session: &'a SessionInfo,
    /// The request id.
    pub request_id: &'a str,
    /// The call waiting for approval.
    pub call_id: &'a str,
    /// Its resolved tool name.
    pub tool_name: &'a str,
    /// Its validated input.
    pub input: &'a Value,
    /// Who issued the call (`None` when unauthenticated).
    pub requester: Option<&'a Principal>,
    /// Approve or cancel.
    pub decision: ResponseDecision,
    /// Who answered (`None` when unauthenticated).
    pub responder: Option<&'a Principal>,
}

impl<'a> ResponseCall<'a> {
    /// A response to request `request_id` for call `call_id`.
    #[allow(clippy::too_many_arguments)] // reason: a plain record the runtime fills in one place
    pub fn new(
        session: &'a SessionInfo,
        request_id: &'a str,
        call_id: &'a str,
        tool_name: &'a str,
        input: &'a Value,
        requester: Option<&'a Principal>,
        decision: ResponseDecision,
        responder: Option<&'a Principal>,
    ) -> Self {
        ResponseCall {
            session,
            request_id,
            call_id,
            tool_name,
            input,
            requester,
            decision,
            responder,
        }
    }
}

/// What a response policy receives, with the input typed.
#[derive(Debug)]
#[non_exhaustive]
pub struct ResponseContext<'a, A> {
    /// The session.
    pub session: &'a SessionInfo,
    /// The request id.
    pub request_id: &'a str,
    /// The call waiting for approval.
    pub call_id: &'a str,
    /// Its resolved tool name.
    pub tool_name: &'a str,
    /// Its validated input.
    pub input: &'a A,
    /// Who issued the call (`None` when unauthenticated).
    pub requester: Option<&'a Principal>,
    /// Approve or cancel.
    pub decision: ResponseDecision,
    /// Who answered (`None` when unauthenticated).
    pub responder: Option<&'a Principal>,
}

impl<'a, A> ResponseContext<'a, A> {
    /// The typed view of `call` with `input`.
    pub fn new(call: &ResponseCall<'a>, input: &'a A) -> Self {
        ResponseContext {
            session: call.session,
            request_id: call.request_id,
            call_id: call.call_id,
            tool_name: call.tool_name,
            input,
            requester: call.requester,
            decision: call.decision,
            responder: call.responder,
        }
    }
}

/// What a response policy decides about one answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "lowercase")]
pub enum ResponseVerdict {
    /// The answer settles the request.
    Allowed,
    /// The answer is refused; the request stays pending for another approver.
    Rejected(String),
}

impl ResponseVerdict {
    /// A rejection with `reason` shown to the responder.
    pub fn rejected(reason: impl Into<String>) -> Self {
        ResponseVerdict::Rejected(reason.into())
    }
}

/// The default response policy: only the turn's caller may answer, and an unauthenticated answer
/// is rejected when the call has a requester.
pub fn requester_only(call: &ResponseCall<'_>) -> ResponseVerdict {
    match (call.requester, call.responder) {
        (None, _) => ResponseVerdict::Allowed,
        (Some(_), None) => {
            ResponseVerdict::rejected("sign in to answer: this call was made by a signed-in user")
        }
        (Some(requester), Some(responder)) if requester.same_as(responder) => {
            ResponseVerdict::Allowed
        }
        (Some(_), Some(_)) => {
            ResponseVerdict::rejected("only the person who made this request may answer it")
        }
    }
}

/// What a custom policy fn may return: a decision, or a future of one (an `async fn` policy).
#[diagnostic::on_unimplemented(
    message = "an approval policy must return `ApprovalDecision` or a future of one, not `{Self}`",
    note = "write `fn my_policy(cx: &ApprovalContext<'_, Args>) -> ApprovalDecision` (or an `async fn`)"
)]
pub trait IntoDecision {
    /// The future yielding the decision.
    type Future: Future<Output = ApprovalDecision> + Send;
    /// Converts into that future.
    fn into_decision(self) -> Self::Future;
}

impl IntoDecision for ApprovalDecision {
    type Future = std::future::Ready<ApprovalDecision>;
    fn into_decision(self) -> Self::Future {
        std::future::ready(self)
    }
}

impl<F> IntoDecision for F
where
    F: Future<Output = ApprovalDecision> + Send,
{
    type Future = F;
    fn into_decision(self) -> F {
        self
    }
}
