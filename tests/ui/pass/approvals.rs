//! Every form of `approval`: the four built-in policies (also written as calls, as the seeds do),
//! `auto(instructions = ..., criteria(clear = ..., caution = ...), model = ...)`, sync and async policy fns, the object form with template and fn
//! prompts and a response policy, and `approval_key = input | path`.

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;
use toolwright::approval::{ApprovalKey, AutoCriteria, AutoSpec, RequestPolicy};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Refund {
    tenant_id: String,
    amount: u64,
}

/// Never asks.
#[tool(effect = money, approval = never)]
async fn refund_never(args: Refund) -> u64 {
    args.amount
}

/// Asks once per session and input.
#[tool(effect = money, approval = once, approval_key = input)]
async fn refund_once(args: Refund) -> u64 {
    args.amount
}

fn tenant_key(args: &Refund) -> String {
    args.tenant_id.clone()
}

/// Asks once per tenant.
#[tool(effect = money, approval(request = once, prompt = "Refund {amount} cents?"), approval_key = tenant_key)]
async fn refund_per_tenant(args: Refund) -> u64 {
    args.amount
}

/// Always asks (written as a call, the way the seeds write it).
#[tool(effect = money, approval = always())]
async fn refund_always(args: Refund) -> u64 {
    args.amount
}

/// Lets the host's decider choose.
#[tool(effect = write, approval = auto)]
async fn refund_auto(args: Refund) -> u64 {
    args.amount
}

/// Lets the host's decider choose, with instructions.
#[tool(effect = write, approval = auto(instructions = "approve amounts under 100 cents"))]
async fn refund_auto_instructed(args: Refund) -> u64 {
    args.amount
}

/// Lets a model judge against stated criteria (the seed's `auto({ model, instructions,
/// criteria })`), in both forms.
#[tool(
    effect = money,
    approval = auto(
        instructions = "Decide whether this refund needs a finance review.",
        criteria(clear = "Refunds under 50 EUR.", caution = "Anything else."),
        model = "small",
    )
)]
async fn refund_auto_judged(args: Refund) -> u64 {
    args.amount
}

/// Only one criterion, in the object form with a prompt.
#[tool(
    effect = money,
    approval(
        request = auto(criteria(caution = "Refunds of another tenant's charge.")),
        prompt = "Refund {amount} cents?",
    )
)]
async fn refund_auto_cautious(args: Refund) -> u64 {
    args.amount
}

fn refund_policy(cx: &ApprovalContext<'_, Refund>) -> ApprovalDecision {
    if cx.input.amount > 1000 {
        ApprovalDecision::UserApproval
    } else {
        ApprovalDecision::NotApplicable
    }
}

/// Asks for large refunds only.
#[tool(effect = money, approval = refund_policy)]
async fn refund_custom(args: Refund) -> u64 {
    args.amount
}

mod policies {
    use toolwright::prelude::*;

    pub async fn check_tenant(cx: &ApprovalContext<'_, super::Refund>) -> ApprovalDecision {
        if cx.input.tenant_id.is_empty() {
            ApprovalDecision::denied("no tenant")
        } else {
            ApprovalDecision::Approved
        }
    }

    pub fn prompt(cx: &PromptContext<'_, super::Refund>) -> String {
        format!(
            "Refund {} cents to {}?",
            cx.input.amount, cx.input.tenant_id
        )
    }

    pub fn finance_only(cx: &ResponseContext<'_, super::Refund>) -> ResponseVerdict {
        match cx.responder {
            Some(_) => ResponseVerdict::Allowed,
            None => ResponseVerdict::rejected("sign in to answer"),
        }
    }
}

/// Object form: an async policy fn, a prompt fn and a response policy.
#[tool(
    effect = money,
    approval(request = policies::check_tenant, prompt = policies::prompt, response = policies::finance_only),
)]
async fn refund_full(args: Refund) -> u64 {
    args.amount
}

/// Object form with a built-in policy and a template prompt.
#[tool(effect = public, approval(request = always, prompt = "Refund {amount} cents to {tenant_id}?"))]
async fn refund_templated(args: Refund) -> u64 {
    args.amount
}

/// Object form with a token the approver must hold.
#[tool(effect = write, approval(request = always, require_auth = "github"))]
async fn grant_admin(args: Refund) -> u64 {
    args.amount
}

fn main() {
    let registry = Registry::from_tools([
        grant_admin::TOOL,
        refund_never::TOOL,
        refund_once::TOOL,
        refund_per_tenant::TOOL,
        refund_always::TOOL,
        refund_auto::TOOL,
        refund_auto_instructed::TOOL,
        refund_auto_judged::TOOL,
        refund_auto_cautious::TOOL,
        refund_custom::TOOL,
        refund_full::TOOL,
        refund_templated::TOOL,
    ])
    .unwrap();
    let approval = |name: &str| registry.get(name).unwrap().approval().unwrap();
    assert_eq!(approval("grant_admin").require_auth, Some("github"));
    assert_eq!(approval("refund_full").require_auth, None);

    assert!(matches!(
        approval("refund_never").request,
        RequestPolicy::Never
    ));
    assert!(matches!(
        approval("refund_once").request,
        RequestPolicy::Once
    ));
    assert!(matches!(approval("refund_once").key, ApprovalKey::Input));
    assert!(matches!(
        approval("refund_per_tenant").key,
        ApprovalKey::Custom(_)
    ));
    assert!(matches!(
        approval("refund_always").request,
        RequestPolicy::Always
    ));
    assert!(matches!(
        approval("refund_auto").request,
        RequestPolicy::Auto(spec) if spec == AutoSpec::new()
    ));
    assert!(matches!(
        approval("refund_auto_instructed").request,
        RequestPolicy::Auto(AutoSpec {
            instructions: Some("approve amounts under 100 cents"),
            criteria: AutoCriteria { clear: None, caution: None },
            model: None,
        })
    ));
    assert!(matches!(
        approval("refund_auto_judged").request,
        RequestPolicy::Auto(AutoSpec {
            instructions: Some("Decide whether this refund needs a finance review."),
            criteria: AutoCriteria {
                clear: Some("Refunds under 50 EUR."),
                caution: Some("Anything else."),
            },
            model: Some("small"),
        })
    ));
    let cautious = approval("refund_auto_cautious");
    assert!(matches!(
        cautious.request,
        RequestPolicy::Auto(AutoSpec {
            instructions: None,
            criteria: AutoCriteria { clear: None, caution: Some("Refunds of another tenant's charge.") },
            model: None,
        })
    ));
    assert!(cautious.prompt.is_some());
    assert!(matches!(
        approval("refund_custom").request,
        RequestPolicy::Custom(_)
    ));
    let full = approval("refund_full");
    assert!(matches!(full.request, RequestPolicy::Custom(_)));
    assert!(full.prompt.is_some() && full.response.is_some());
    assert!(approval("refund_templated").prompt.is_some());

    let input = serde_json::json!({ "tenant_id": "t1", "amount": 5 });
    let key = registry
        .get("refund_per_tenant")
        .unwrap()
        .approval_key(&input)
        .unwrap();
    assert!(key.ends_with("#t1"), "{key}");
}
