//! The part `approvals`.

use std::collections::BTreeSet;

use toolwright_core::Principal;

use super::part::Part;
use crate::store::{ANONYMOUS_REQUESTER, Store, requester_key};

/// Approval memory: idempotent, per session and per requester, independent of session records.
pub async fn approvals(store: &dyn Store) {
    let part = Part::new("approvals");
    let (s1, s2) = (part.id("s1"), part.id("s2"));
    let alice = requester_key(Some(&Principal::user("oidc", "alice")));
    let bob = requester_key(Some(&Principal::user("oidc", "bob")));
    let p = &part;
    let keys = move |session: String, requester: String| async move {
        p.ok(
            "reading approvals",
            store.approvals(&session, &requester).await,
        )
    };
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|k| (*k).to_owned()).collect() };
    let remember = move |session: String, requester: String, key: &'static str| async move {
        p.ok(
            "remembering an approval",
            store.remember_approval(&session, &requester, key).await,
        );
    };

    assert_eq!(
        keys(s1.clone(), alice.clone()).await,
        set(&[]),
        "{part}: an unknown session remembers nothing"
    );

    remember(s1.clone(), alice.clone(), "wallet.pay").await;
    remember(s1.clone(), alice.clone(), "wallet.pay").await;
    assert_eq!(
        keys(s1.clone(), alice.clone()).await,
        set(&["wallet.pay"]),
        "{part}: remembering a key twice keeps it once"
    );
    assert_eq!(
        keys(s1.clone(), bob.clone()).await,
        set(&[]),
        "{part}: alice's grant must not cover bob's calls in the same session"
    );
    assert_eq!(
        keys(s1.clone(), ANONYMOUS_REQUESTER.to_owned()).await,
        set(&[]),
        "{part}: alice's grant must not cover anonymous calls"
    );

    let digest = "input:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    remember(s1.clone(), alice.clone(), digest).await;
    remember(s1.clone(), alice.clone(), "todo.add ünïcødé ✓").await;
    assert_eq!(
        keys(s1.clone(), alice.clone()).await,
        set(&["wallet.pay", digest, "todo.add ünïcødé ✓"]),
        "{part}: every remembered key is listed"
    );
    remember(s1.clone(), bob.clone(), "wallet.refund").await;
    assert_eq!(
        keys(s1.clone(), bob.clone()).await,
        set(&["wallet.refund"]),
        "{part}: bob's own grant"
    );
    assert_eq!(
        keys(s1.clone(), alice.clone()).await.len(),
        3,
        "{part}: bob's grant must not reach alice's"
    );

    assert_eq!(
        keys(s2.clone(), alice.clone()).await,
        set(&[]),
        "{part}: approvals of one session must not leak into another"
    );
    remember(s2.clone(), alice.clone(), "wallet.pay").await;
    assert_eq!(
        keys(s2, alice.clone()).await,
        set(&["wallet.pay"]),
        "{part}: the second session's key"
    );
    assert_eq!(
        keys(s1, alice).await.len(),
        3,
        "{part}: remembering in another session leaves this one unchanged"
    );
}
