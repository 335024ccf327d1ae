//! The part `conversation`.

use std::time::Duration;

use serde_json::json;

use super::fixtures::turn;
use super::part::Part;
use crate::record::TurnStatus;
use crate::store::{Appended, Claim, Store, StoreError};

/// The model loop's conversation: appended in order, per session, a taken position refusing
/// the whole append.
pub async fn conversation(store: &dyn Store) {
    let part = Part::new("conversation");
    let (s1, s2) = (part.id("s1"), part.id("s2"));
    let read = |session: String| {
        let part = &part;
        async move { part.ok("reading a conversation", store.conversation(&session).await) }
    };
    assert!(
        read(s1.clone()).await.is_empty(),
        "{part}: a session without messages has an empty conversation"
    );

    let first = [
        json!({ "role": "user", "text": "hi\u{0}" }),
        json!({ "role": "assistant" }),
    ];
    part.ok(
        "appending two messages",
        store.append_conversation(&s1, "t1", 0, &first).await,
    );
    let second = [json!({ "role": "tool_result", "n": 3 })];
    part.ok(
        "appending a third",
        store.append_conversation(&s1, "t2", 2, &second).await,
    );
    let entries = read(s1.clone()).await;
    let positions: Vec<u64> = entries.iter().map(|e| e.position).collect();
    assert_eq!(
        positions,
        [0, 1, 2],
        "{part}: messages come back in position order"
    );
    assert_eq!(
        entries[0].message, first[0],
        "{part}: a message comes back as written"
    );
    assert_eq!(
        entries[2].turn_id, "t2",
        "{part}: each row keeps the turn that added it"
    );

    let clash = [json!({ "late": true }), json!({ "later": true })];
    part.refused(
        "appending at a position already taken",
        store.append_conversation(&s1, "t3", 2, &clash).await,
    );
    assert_eq!(
        read(s1.clone()).await.len(),
        3,
        "{part}: a refused append writes none of its messages"
    );
    assert!(
        read(s2.clone()).await.is_empty(),
        "{part}: conversations are per session"
    );
    with_the_step(store, &part).await;
}

/// The messages a step's first write carries ([`Store::write_turn_appending`]) commit with the
/// turn or not at all: a stale version, a taken lease or a taken position leaves neither the
/// turn written nor any of the messages.
async fn with_the_step(store: &dyn Store, part: &Part) {
    let (session, id) = (part.id("stepped"), part.id("turn"));
    let record = turn(&id, &session, TurnStatus::Active, &[]);
    let version = part.ok("inserting a turn", store.put_turn(&record, None).await);
    let read = || async { part.ok("reading", store.conversation(&session).await) };
    let calls = [json!({ "role": "assistant", "calls": ["c1", "c2"] })];
    let appended = Appended {
        first: 0,
        messages: &calls,
    };
    let mut running = record.clone();
    running.status = TurnStatus::Running;
    let take = Claim::Take {
        owner: "conformance",
        ttl: Duration::from_secs(60),
    };

    part.refused(
        "a step's write at a stale version, with messages",
        store
            .write_turn_appending(&running, Some(version + 1), take, appended)
            .await,
    );
    assert!(
        read().await.is_empty(),
        "{part}: a step's write refused for its version appends none of its messages"
    );

    part.ok(
        "appending at a later position by hand",
        store
            .append_conversation(&session, "other", 1, &[json!({ "taken": true })])
            .await,
    );
    let two = [json!({ "n": 0 }), json!({ "n": 1 })];
    let clashing = Appended {
        first: 0,
        messages: &two,
    };
    part.refused(
        "a step's write whose second message's position is taken",
        store
            .write_turn_appending(&running, Some(version), take, clashing)
            .await,
    );
    let (stored, stored_version) = part
        .ok("reading the turn", store.turn(&id).await)
        .unwrap_or_else(|| panic!("{part}: the turn disappeared"));
    assert_eq!(
        (stored.status, stored_version),
        (TurnStatus::Active, version),
        "{part}: a step's write refused for a taken position leaves the turn as it was"
    );
    let rows = read().await;
    assert_eq!(
        rows.iter().map(|e| e.position).collect::<Vec<_>>(),
        [1],
        "{part}: ... and appends none of its messages (the first one's position was free)"
    );

    let other = part.id("other-turn");
    let clean = part.id("clean");
    let mut fresh = turn(&other, &clean, TurnStatus::Active, &[]);
    let v = part.ok("inserting another turn", store.put_turn(&fresh, None).await);
    fresh.status = TurnStatus::Running;
    let written = part.ok(
        "a step's write with its messages",
        store
            .write_turn_appending(&fresh, Some(v), take, appended)
            .await,
    );
    assert_eq!(written.version, v + 1, "{part}: the turn is written");
    let lease = written
        .lease
        .unwrap_or_else(|| panic!("{part}: a claiming write returns its lease"));
    let rows = part.ok("reading", store.conversation(&clean).await);
    assert_eq!(rows.len(), 1, "{part}: the messages are appended with it");
    assert_eq!(
        (rows[0].turn_id.as_str(), &rows[0].message),
        (other.as_str(), &calls[0]),
        "{part}: as added by the written turn"
    );

    let mut stale = lease.clone();
    stale.token += 1;
    let more = [json!({ "fenced": true })];
    let fenced = store
        .write_turn_appending(
            &fresh,
            Some(v + 1),
            Claim::Keep(&stale),
            Appended {
                first: 1,
                messages: &more,
            },
        )
        .await;
    assert!(
        matches!(fenced, Err(StoreError::Fenced { .. })),
        "{part}: a write under a lease that is not the record's is fenced, got {fenced:?}"
    );
    assert_eq!(
        part.ok("reading", store.conversation(&clean).await).len(),
        1,
        "{part}: a fenced write appends none of its messages"
    );
}
