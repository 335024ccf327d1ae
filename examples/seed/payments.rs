//! `refund_charge` from the eve seed (11.4): a custom request policy that refuses other tenants'
//! charges with a reason the model sees, and asks a person above 1000.

use std::hash::{DefaultHasher, Hash, Hasher};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

use super::signed_in_user;

/// Refunds above this amount wait for a person.
const REVIEW_ABOVE: f64 = 1000.0;

#[derive(Debug)]
struct Charge {
    id: &'static str,
    tenant_id: &'static str,
    amount: f64,
    currency: &'static str,
}

const CHARGES: &[Charge] = &[
    Charge {
        id: "ch_3PaXk2",
        tenant_id: "tn_acme",
        amount: 2400.0,
        currency: "EUR",
    },
    Charge {
        id: "ch_9LmQe7",
        tenant_id: "tn_acme",
        amount: 180.0,
        currency: "EUR",
    },
    Charge {
        id: "ch_5TzWr1",
        tenant_id: "tn_globex",
        amount: 75.5,
        currency: "USD",
    },
];

#[derive(Deserialize, JsonSchema, ToolInput)]
struct RefundArgs {
    /// Tenant that owns the charge, e.g. tn_acme. Must be the signed-in user's tenant.
    #[schemars(length(min = 1, max = 64))]
    tenant_id: String,
    /// The charge to refund, e.g. ch_3PaXk2.
    #[schemars(regex(pattern = r"^ch_[A-Za-z0-9]{4,32}$"))]
    charge_id: String,
    /// Amount to refund, in the charge's currency; at most the amount charged.
    #[schemars(range(min = 0.01, max = 1000000.0))]
    amount: f64,
}

#[derive(Serialize, JsonSchema)]
struct Refund {
    refund_id: String,
    charge_id: String,
    amount: f64,
    currency: String,
    status: String,
}

/// Other tenants' charges are refused outright, with a reason the model can relay; large refunds
/// wait for a person. The caller's tenant comes from the session: the input's `tenant_id` is only
/// compared with it, never trusted as identity.
fn refund_policy(cx: &ApprovalContext<'_, RefundArgs>) -> ApprovalDecision {
    let caller_tenant = cx
        .current()
        .and_then(|principal| principal.attribute_str("tenant_id"));
    if caller_tenant != Some(cx.input.tenant_id.as_str()) {
        return ApprovalDecision::denied(format!(
            "the signed-in user has no access to tenant `{}`; refunds are limited to the user's own \
             tenant",
            cx.input.tenant_id
        ));
    }
    if cx.input.amount > REVIEW_ABOVE {
        ApprovalDecision::UserApproval
    } else {
        ApprovalDecision::NotApplicable
    }
}

/// Refunds part or all of one card charge of the signed-in user's tenant. Use when the user asks
/// to refund a specific charge and gives (or has seen) its id. Not for cancelling subscriptions or
/// disputing charges. Refunds above 1000 wait for a person's approval; charges of other tenants are
/// refused. Returns the refund id, amount, currency and status.
#[tool(
    effect = money,
    approval(
        request = refund_policy,
        prompt = "Refund {amount} of charge {charge_id} (tenant {tenant_id})?"
    ),
    label(start = "Refunding {amount} of {charge_id}"),
    output_schema
)]
async fn refund_charge(args: RefundArgs, ctx: ToolContext) -> Result<Refund, ToolError> {
    let user = signed_in_user(&ctx)?;
    let tenant = user.attribute_str("tenant_id").ok_or_else(|| {
        ToolError::new("the signed-in user belongs to no tenant, so there is nothing to refund")
    })?;
    let charge = CHARGES
        .iter()
        .find(|charge| charge.id == args.charge_id && charge.tenant_id == tenant)
        .ok_or_else(|| {
            ToolError::new(format!(
                "tenant `{tenant}` has no charge `{}`; check the id with the user",
                args.charge_id
            ))
        })?;
    if args.amount > charge.amount {
        return Err(ToolError::new(format!(
            "charge {} was {} {}; a refund cannot exceed it",
            charge.id, charge.amount, charge.currency
        )));
    }
    let mut upstream_key = DefaultHasher::new();
    ctx.idempotency_key().hash(&mut upstream_key);
    Ok(Refund {
        refund_id: format!("re_{:016x}", upstream_key.finish()),
        charge_id: args.charge_id,
        amount: args.amount,
        currency: charge.currency.to_owned(),
        status: "succeeded".to_owned(),
    })
}
