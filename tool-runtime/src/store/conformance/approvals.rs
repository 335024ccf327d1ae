//! The part `approvals`.

use std::collections::BTreeSet;

use super::part::Part;
use crate::store::Store;

/// Approval memory: idempotent, per session, independent of session records.
pub async fn approvals(store: &dyn Store) {
    let part = Part::new("approvals");
    let (s1, s2) = (part.id("s1"), part.id("s2"));
    let p = &part;
    let keys = move |session: String| async move {
        p.ok("reading approvals", store.approvals(&session).await)
    };
    let set =
        |items: &[&str]| -> BTreeSet<String> { items.iter().map(|k| (*k).to_owned()).collect() };
    let remember = move |session: String, key: &'static str| async move {
        p.ok(
            "remembering an approval",
            store.remember_approval(&session, key).await,
        );
    };

    assert_eq!(
        keys(s1.clone()).await,
        set(&[]),
        "{part}: an unknown session remembers nothing"
    );

    remember(s1.clone(), "wallet.pay").await;
    remember(s1.clone(), "wallet.pay").await;
    assert_eq!(
        keys(s1.clone()).await,
        set(&["wallet.pay"]),
        "{part}: remembering a key twice keeps it once"
    );

    let digest = "input:sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    remember(s1.clone(), digest).await;
    remember(s1.clone(), "todo.add ünïcødé ✓").await;
    assert_eq!(
        keys(s1.clone()).await,
        set(&["wallet.pay", digest, "todo.add ünïcødé ✓"]),
        "{part}: every remembered key is listed"
    );

    assert_eq!(
        keys(s2.clone()).await,
        set(&[]),
        "{part}: approvals of one session must not leak into another"
    );
    remember(s2.clone(), "wallet.pay").await;
    assert_eq!(
        keys(s2).await,
        set(&["wallet.pay"]),
        "{part}: the second session's key"
    );
    assert_eq!(
        keys(s1).await.len(),
        3,
        "{part}: remembering in another session leaves this one unchanged"
    );
}
