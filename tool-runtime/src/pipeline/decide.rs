//! Stage 4 of a call: decide its approval. The tool's request policy, then the session's
//! permission for its effect, then taint; the strictest wins and `denied` never becomes
//! allowed. A remote tool whose server changed its definition needs a person whatever the
//! policy says. A call from the user interface is the user's own action.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use toolwright_core::approval::PolicyFn;
use toolwright_core::{
    ApprovalCall, ApprovalDecision, AutoSpec, Caller, CancelSignal, ErrorCode, NeverCancelled,
    RequestPolicy, ResponseCall, ResponseDecision, ResponseVerdict, SessionInfo, Tool, ToolError,
    names,
};

use super::prepared::{Prepared, refused};
use super::scope::StepScope;
use crate::call::ToolCall;
use crate::decider::{AutoRequest, AutoVerdict};
use crate::engine::Engine;
use crate::record::{DefinitionChange, InputRequest, Permission};
use crate::transition::request::ApprovalAsk;

/// What the pipeline decided about a call's approval.
pub(super) struct Decided {
    pub(super) decision: ApprovalDecision,
    /// Why a person must approve beyond the policy (the session asks, taint, a changed
    /// definition), first reason first.
    pub(super) reasons: Vec<String>,
    /// The `once` memory key an approval grants.
    pub(super) key: Option<String>,
    /// The changed definition of a withheld remote tool (boxed: it is rare and large).
    pub(super) change: Option<Box<DefinitionChange>>,
}

/// Decides the approval of `call` of `tool` with `input`.
pub(super) async fn decide(
    engine: &Engine,
    scope: &StepScope,
    tool: &Tool,
    input: &Value,
    call_id: &str,
) -> Decided {
    let (mut decision, mut reasons, key) = if scope.turn.caller == Caller::User {
        let decision = decide_for_user(scope, tool, input, call_id).await;
        (decision, Vec::new(), None)
    } else {
        decide_for_model(engine, scope, tool, input, call_id).await
    };
    // A remote tool whose server changed its definition since it was approved runs only
    // after a person approves the new definition; a denial stays a denial.
    let change = crate::remote::definition_change(tool).map(Box::new);
    if let Some(change) = &change {
        decision = decision.strictest(ApprovalDecision::UserApproval);
        reasons.insert(0, change_reason(change, tool.name()));
    }
    Decided {
        decision,
        reasons,
        key,
        change,
    }
}

/// A call of a withheld remote tool (its server changed its definition since it was approved):
/// a person approves the new definition, and this call, before anything is checked against
/// that definition — neither its schema nor its policy sees `arguments` (the model's arguments
/// as parsed), so no text of the unapproved definition can reach the model in an error. Once
/// approved, the call is validated against the new definition and a custom policy runs again
/// before it runs (`input::resume`), so a denial stays a denial.
pub(super) fn withheld(
    scope: &StepScope,
    call: &ToolCall,
    tool: Arc<Tool>,
    arguments: Value,
    change: DefinitionChange,
) -> Prepared {
    let mut reasons = vec![change_reason(&change, tool.name())];
    let effect = tool.effect();
    if let Some(source) = scope.turn.tainted_by.as_deref()
        && effect.is_guarded_by_taint()
    {
        reasons.push(taint_reason(source, effect));
    }
    let decided = Decided {
        decision: ApprovalDecision::UserApproval,
        reasons,
        key: None,
        change: Some(Box::new(change)),
    };
    into_prepared(scope, call, tool, arguments, decided)
}

/// Why a call of a withheld tool needs a person: what changed, never the new text.
fn change_reason(change: &DefinitionChange, tool: &str) -> String {
    format!(
        "the server of connection `{}` changed the {} of `{tool}` since it was approved",
        change.connection,
        change.changed_parts().join(", "),
    )
}

/// Why a guarded call in a tainted turn needs a person.
fn taint_reason(source: &str, effect: toolwright_core::Effect) -> String {
    format!(
        "`{source}` returned untrusted third-party content earlier in this conversation; confirm that this `{effect}` action is what you asked for"
    )
}

/// Policy, then the session's permission for the effect, then taint. Returns the decision,
/// the reasons beyond the policy, and the `once` memory key.
async fn decide_for_model(
    engine: &Engine,
    scope: &StepScope,
    tool: &Tool,
    input: &Value,
    call_id: &str,
) -> (ApprovalDecision, Vec<String>, Option<String>) {
    let effect = tool.effect();
    let mut reasons = Vec::new();
    let tainted = scope.turn.tainted_by.as_deref();
    let mut key = None;
    let policy = tool
        .approval()
        .map(|a| a.request)
        .unwrap_or(RequestPolicy::Never);
    let mut decision = match policy {
        RequestPolicy::Never => ApprovalDecision::NotApplicable,
        RequestPolicy::Always => ApprovalDecision::UserApproval,
        RequestPolicy::Once => match guarded_key(tool, input) {
            Ok(k) => {
                let approved = scope.approved.contains(&k);
                key = Some(k);
                if approved {
                    ApprovalDecision::NotApplicable
                } else {
                    ApprovalDecision::UserApproval
                }
            }
            Err(error) => {
                reasons.push(format!("its approval key failed: {error}"));
                ApprovalDecision::UserApproval
            }
        },
        RequestPolicy::Auto(spec) => match tainted {
            // Never automatically in a tainted turn: the decider is not even asked. A guarded
            // effect gets the taint reason below; any other says it here.
            Some(source) => {
                if !effect.is_guarded_by_taint() {
                    reasons.push(taint_reason(source, effect));
                }
                ApprovalDecision::UserApproval
            }
            None => {
                let (decision, reason) = auto(engine, tool, input, &spec).await;
                reasons.extend(reason);
                decision
            }
        },
        RequestPolicy::Custom(policy) => {
            scoped_decision(scope, &scope.info(), tool, input, call_id, policy).await
        }
    };
    if scope.session.permission(effect) == Permission::Ask
        && matches!(
            decision,
            ApprovalDecision::NotApplicable | ApprovalDecision::Approved
        )
    {
        decision = decision.strictest(ApprovalDecision::UserApproval);
        reasons.push(format!("this session asks before every `{effect}` action"));
    }
    if let Some(source) = tainted
        && effect.is_guarded_by_taint()
    {
        decision = decision.strictest(ApprovalDecision::UserApproval);
        reasons.push(taint_reason(source, effect));
    }
    (decision, reasons, key)
}

/// A call from the user interface is the user's own action: it needs no approval, so request
/// policies that would ask a person let it through (a custom policy's denial stays a denial),
/// and only a response policy, which says who may approve the tool, can stop it: the user
/// must be someone it lets approve.
async fn decide_for_user(
    scope: &StepScope,
    tool: &Tool,
    input: &Value,
    call_id: &str,
) -> ApprovalDecision {
    let Some(approval) = tool.approval() else {
        return ApprovalDecision::NotApplicable;
    };
    let info = scope.info();
    let decision = match approval.request {
        RequestPolicy::Never => return ApprovalDecision::NotApplicable,
        RequestPolicy::Custom(policy) => {
            scoped_decision(scope, &info, tool, input, call_id, policy).await
        }
        RequestPolicy::Always | RequestPolicy::Once | RequestPolicy::Auto(_) => {
            ApprovalDecision::UserApproval
        }
    };
    match decision {
        ApprovalDecision::UserApproval => {}
        other => return other,
    }
    let Some(response) = approval.response else {
        return ApprovalDecision::Approved;
    };
    let user = scope.turn.current.as_ref();
    // A response policy reads the input as an approver would: sensitive values redacted.
    let shown = tool.sensitivity().input.redacted(input);
    let call = ResponseCall::new(
        &info,
        "",
        call_id,
        tool.name(),
        &shown,
        user,
        ResponseDecision::Approve,
        user,
    );
    let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| response(&call)))
        .unwrap_or_else(|_| {
            ResponseVerdict::rejected(format!("the response policy of `{}` failed", tool.name()))
        });
    match verdict {
        ResponseVerdict::Allowed => ApprovalDecision::Approved,
        ResponseVerdict::Rejected(reason) => ApprovalDecision::denied(format!(
            "it needs an approval this user may not give ({reason}); someone its approvers include must run it"
        )),
    }
}

/// `approval = auto`: the host's decider judges the call, failing closed (no decider, a large
/// input, a timeout, an error or anything but `Clear` asks a person). When it asks, the reason
/// says why the decider did not clear the call, for the person asked; it never quotes the
/// decider's own words, which may come from a model that read the input.
async fn auto(
    engine: &Engine,
    tool: &Tool,
    input: &Value,
    spec: &AutoSpec,
) -> (ApprovalDecision, Option<String>) {
    let ask = |reason: String| (ApprovalDecision::UserApproval, Some(reason));
    let Some(decider) = engine.decider() else {
        return ask("its policy is `auto` and no decider is installed to judge it".into());
    };
    let options = engine.options();
    // The decider's model belongs to a provider: it judges the input with sensitive values
    // redacted.
    let input = &*tool.sensitivity().input.redacted(input);
    let size = serde_json::to_vec(input)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    // Judged whole or not at all: a decider shown part of the input could clear what it
    // did not see.
    if size > options.decider_max_input {
        return ask(format!(
            "its input ({size} bytes) is larger than the {} bytes the `auto` decider may be sent",
            options.decider_max_input
        ));
    }
    let request = AutoRequest::new(tool.name(), input, spec);
    match tokio::time::timeout(options.decider_timeout, decider.decide(request)).await {
        Ok(Ok(AutoVerdict::Clear)) => (ApprovalDecision::Approved, None),
        Ok(Ok(AutoVerdict::Caution)) => {
            ask("the `auto` decider judged that it needs a person".into())
        }
        Ok(Err(error)) => ask(format!("the `auto` decider could not judge it: {error}")),
        Err(_) => ask(format!(
            "the `auto` decider did not answer within {}",
            duration_words(options.decider_timeout)
        )),
    }
}

/// `30 s`, `250 ms`.
fn duration_words(duration: std::time::Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// A call as a custom request policy sees it.
pub(crate) struct PolicyCall<'a> {
    pub(crate) info: &'a SessionInfo,
    pub(crate) tool: &'a Tool,
    pub(crate) input: &'a Value,
    pub(crate) call_id: &'a str,
    pub(crate) approved: &'a BTreeSet<String>,
    pub(crate) cancel: &'a dyn CancelSignal,
}

/// What the custom request policy `policy` decides about `call`; a policy that panics denies
/// the call, saying so (fail closed).
pub(crate) async fn custom_decision(call: &PolicyCall<'_>, policy: PolicyFn) -> ApprovalDecision {
    use futures_util::FutureExt as _;
    let tool = call.tool;
    let mut approval = ApprovalCall::new(
        call.info,
        tool.name(),
        call.input,
        call.call_id,
        call.approved,
        call.cancel,
    );
    approval.annotations = tool.server_annotations();
    std::panic::AssertUnwindSafe(policy(&approval))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            ApprovalDecision::denied(format!(
                "the approval policy of `{}` failed on this input; this is a bug in the policy, not in the input",
                tool.name()
            ))
        })
}

/// What custom request policy `policy` of `tool` decides about call `call_id` of the step
/// `scope` describes (`info` its session).
async fn scoped_decision(
    scope: &StepScope,
    info: &SessionInfo,
    tool: &Tool,
    input: &Value,
    call_id: &str,
    policy: PolicyFn,
) -> ApprovalDecision {
    let call = PolicyCall {
        info,
        tool,
        input,
        call_id,
        approved: &scope.approved,
        cancel: &scope.cancel,
    };
    custom_decision(&call, policy).await
}

/// The `once` memory key; a key fn that panics is an error (the call then asks a person).
fn guarded_key(tool: &Tool, input: &Value) -> Result<String, ToolError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.approval_key(input)))
        .unwrap_or_else(|_| Err(ToolError::new("the approval key fn panicked")))
}

/// The call as the decision leaves it: it runs, it is denied, it cannot ask anybody, or it
/// asks a person.
pub(super) fn into_prepared(
    scope: &StepScope,
    call: &ToolCall,
    tool: Arc<Tool>,
    input: Value,
    decided: Decided,
) -> Prepared {
    let Decided {
        decision,
        reasons,
        key,
        change,
    } = decided;
    let name = tool.name();
    let fail = |code: ErrorCode, message: String| {
        *refused(&call.call_id, name, ToolError::with_code(code, message))
    };
    match decision {
        ApprovalDecision::NotApplicable | ApprovalDecision::Approved => Prepared::Run {
            call_id: Arc::from(call.call_id.as_str()),
            tool,
            input,
        },
        ApprovalDecision::Denied(reason) => fail(
            ErrorCode::Denied,
            match reason {
                Some(reason) => format!("`{name}` was denied: {reason}"),
                None => format!(
                    "`{name}` was denied by its approval policy; do not retry it with the same input"
                ),
            },
        ),
        ApprovalDecision::UserApproval if !scope.info().interactive && change.is_some() => fail(
            ErrorCode::ApprovalUnavailable,
            format!(
                "`{name}` is withheld: {}; a person must approve the new definition first, and this session cannot ask one (it runs unattended)",
                reasons[0]
            ),
        ),
        ApprovalDecision::UserApproval if !scope.info().interactive => fail(
            ErrorCode::ApprovalUnavailable,
            format!(
                "`{name}` needs a person's approval ({}), and this session cannot ask one (it runs unattended); run it from an interactive session, or give the tool a policy that lets schedules through",
                policy_words(&tool, &reasons)
            ),
        ),
        ApprovalDecision::UserApproval => {
            let prompt = match &change {
                Some(change) => format!(
                    "The server behind `{}` changed the tool `{name}` ({}) since it was approved. Approve its new definition, and this call?",
                    change.connection,
                    change.changed_parts().join(", ")
                ),
                None => prompt(scope, &tool, &input, &call.call_id),
            };
            let request = InputRequest::approval(
                &scope.info(),
                ApprovalAsk {
                    call_id: call.call_id.clone(),
                    tool: name.to_owned(),
                    // The approver (and the request's record and events) sees the input with
                    // its sensitive values redacted.
                    input: tool.sensitivity().input.redacted(&input).into_owned(),
                    prompt,
                    reasons,
                    approval_key: key,
                    definition_change: change,
                },
            );
            Prepared::Ask {
                call_id: Arc::from(call.call_id.as_str()),
                tool,
                input,
                request: Box::new(request),
            }
        }
    }
}

/// What the approver reads: the tool's prompt, or a default naming the call (and, for a remote
/// tool, its server).
fn prompt(scope: &StepScope, tool: &Tool, input: &Value, call_id: &str) -> String {
    let default = || match tool.remote_tool() {
        // Whoever approves should know a third-party server acts.
        Some(remote) => format!(
            "Approve {} (tool `{}` of the server behind connection `{}`)?",
            start_label(tool, input),
            remote.definition().name,
            remote.connection()
        ),
        None => format!("Approve {}?", start_label(tool, input)),
    };
    let Some(render) = tool.approval().and_then(|a| a.prompt) else {
        return default();
    };
    let info = scope.info();
    let call = ApprovalCall::new(
        &info,
        tool.name(),
        input,
        call_id,
        &scope.approved,
        &NeverCancelled,
    );
    // A prompt fn that fails, panics or renders nothing gets the default prompt.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render(&call))) {
        Ok(Ok(text)) if !text.trim().is_empty() => text,
        _ => default(),
    }
}

/// The start label of a call with `input`. A label callback that panics is a failing label:
/// like an empty one, it falls back to the humanized tool name instead of taking the step
/// down.
pub(crate) fn start_label(tool: &Tool, input: &Value) -> String {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.start_label(input)))
        .unwrap_or_else(|_| names::humanize(tool.short_name()))
}

fn policy_words(tool: &Tool, reasons: &[String]) -> String {
    let policy = tool.approval().map(|a| a.request.name()).unwrap_or("never");
    if reasons.is_empty() {
        format!("approval policy `{policy}`")
    } else {
        format!("approval policy `{policy}`; {}", reasons.join("; "))
    }
}
