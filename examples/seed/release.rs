//! Release tools from the Flue seed's conditional tools and the plugin SDK's `userOnly`:
//! `record_approval` is called by an operator from the user interface and never offered to the
//! model; it writes the session's `release_approved` state (the seed's `usePersistentState`),
//! and `publish_release`, enabled by that state, exists from the next step on.

use std::sync::{Mutex, PoisonError};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwright::prelude::*;

use super::signed_in_user;

/// Codes the release managers hand out.
const OPERATOR_CODES: &[&str] = &["REL-7Q2K", "REL-4M8D"];

/// Whether an operator approved the pending release: written by `record_approval`, read by
/// `publish_release`'s `enabled` predicate.
pub(crate) const RELEASE_APPROVED: StateKey<bool> = StateKey::new("release_approved");

/// Approvals of the pending release, faked in-process.
#[derive(Debug, Default)]
pub(crate) struct Releases {
    approvals: Mutex<Vec<String>>,
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct ApprovalArgs {
    /// The operator approval code, e.g. REL-7Q2K.
    #[schemars(regex(pattern = r"^REL-[A-Z0-9]{4}$"))]
    code: String,
}

#[derive(Serialize, JsonSchema)]
struct ApprovalRecorded {
    approved: bool,
    message: String,
}

/// Records an operator's approval code for the pending release. Called by the operator from the
/// release page; publishing unlocks once a valid code is recorded. Returns whether the code was
/// accepted.
#[tool(
    effect = write,
    user_only,
    title = "Approve release",
    summary = "Record the operator code that unlocks publishing",
    output_schema,
)]
async fn record_approval(
    args: ApprovalArgs,
    ctx: ToolContext,
    releases: State<Releases>,
) -> Result<ApprovalRecorded, ToolError> {
    let operator = signed_in_user(&ctx)?;
    if !OPERATOR_CODES.contains(&args.code.as_str()) {
        return Ok(ApprovalRecorded {
            approved: false,
            message: "invalid approval code".to_owned(),
        });
    }
    releases
        .approvals
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(operator.principal_id.clone());
    // The session remembers it: `publish_release` is enabled from the next step on.
    ctx.set_session_state(&RELEASE_APPROVED, &true).await?;
    Ok(ApprovalRecorded {
        approved: true,
        message: "approval recorded; publishing is now available".to_owned(),
    })
}

fn release_approved(cx: &EnabledContext<'_>) -> bool {
    cx.get(&RELEASE_APPROVED).unwrap_or(false)
}

#[derive(Deserialize, JsonSchema, ToolInput)]
struct PublishArgs {
    /// Release notes shown on the public changelog, in Markdown.
    #[schemars(length(min = 20, max = 5000))]
    notes: String,
}

#[derive(Serialize, JsonSchema)]
struct Published {
    url: String,
    /// The first line of the notes, as the changelog shows it.
    headline: String,
}

/// Publishes the approved release and its notes to the public changelog. Available only after an
/// operator approved the release. Use when the user asks to publish or ship the release. Returns
/// the changelog URL.
#[tool(
    effect = public,
    // Asked only when the session or taint asks: the notes are what the public will read.
    approval(
        request = never,
        prompt = "Publish these release notes on the public changelog? {notes}"
    ),
    enabled = release_approved,
    label(start = "Publishing the release"),
    output_schema,
)]
async fn publish_release(args: PublishArgs) -> Published {
    Published {
        url: "https://example.invalid/changelog/latest".to_owned(),
        headline: args.notes.lines().next().unwrap_or_default().to_owned(),
    }
}
