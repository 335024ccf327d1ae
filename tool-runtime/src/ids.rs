//! How the runtime names what it creates: request, turn and call ids, the journal ids of durable
//! runs, task ids, hook tokens and ids, and the journal names of questions, sleeps and hooks.

use serde_json::json;

/// A fresh id with `prefix` (`req_…`, `turn_…`, `ui_…`).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// The journal id of a durable plain call: one run per call of a turn.
pub(crate) fn durable_run_id(turn_id: &str, call_id: &str) -> String {
    format!("{turn_id}/{call_id}")
}

/// The id of the task started by call `call_id` of step `step` of turn `turn_id`: the tool's
/// name and a digest, the same on every run of the call, so a call re-run after a crash finds
/// its task instead of starting a second one.
pub(crate) fn task_id(tool: &str, turn_id: &str, step: u32, call_id: &str) -> String {
    let digest = toolwright_core::registry::input_digest(&json!([turn_id, step, call_id]));
    let mut n = u64::from_str_radix(&digest[..16], 16).unwrap_or_default();
    let mut suffix = String::new();
    while suffix.len() < 10 {
        let digit = u32::try_from(n % 36).unwrap_or_default();
        suffix.push(char::from_digit(digit, 36).unwrap_or('0'));
        n /= 36;
    }
    format!("{tool}-{suffix}")
}

/// The journal name of the `ask` at `position`.
pub(crate) fn ask_name(position: u32) -> String {
    format!("ask#{position}")
}

/// The journal name of the `sleep` at `position`.
pub(crate) fn sleep_name(position: u32) -> String {
    format!("sleep#{position}")
}

/// The journal name of making hook `name`.
pub(crate) fn hook_name(name: &str) -> String {
    format!("hook:{name}")
}

/// The journal name of a wait on hook `name`.
pub(crate) fn wait_name(name: &str) -> String {
    format!("wait:{name}")
}

/// A fresh hook token: 244 random bits from the system's generator, the one secret a delivery
/// needs.
pub(crate) fn hook_token() -> String {
    format!(
        "twh_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The public id of the hook with `token`: a digest, so records, events and requests name the
/// hook without holding its secret.
pub(crate) fn hook_id(token: &str) -> String {
    let digest = toolwright_core::registry::input_digest(&serde_json::Value::String(token.into()));
    format!("hook_{}", &digest[..32])
}

/// The journal of hook `id` itself: position 0 registers it, position 1 holds its delivery.
pub(crate) fn hook_run_id(id: &str) -> String {
    format!("hooks/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_stable_per_call_and_differ_between_calls() {
        let a = task_id("deploy", "turn_1", 0, "call_1");
        assert_eq!(a, task_id("deploy", "turn_1", 0, "call_1"));
        assert_ne!(a, task_id("deploy", "turn_1", 0, "call_2"));
        assert_ne!(a, task_id("deploy", "turn_1", 1, "call_1"));
        assert_ne!(a, task_id("deploy", "turn_2", 0, "call_1"));
        assert!(
            a.starts_with("deploy-") && a.len() == "deploy-".len() + 10,
            "{a}"
        );
    }

    #[test]
    fn hook_tokens_are_fresh_and_their_ids_are_stable_digests_that_hold_no_secret() {
        let (a, b) = (hook_token(), hook_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), "twh_".len() + 64);
        assert_eq!(hook_id(&a), hook_id(&a));
        assert_ne!(hook_id(&a), hook_id(&b));
        assert!(!hook_id(&a).contains(&a[4..20]));
    }
}
