//! The part `conversation`.

use serde_json::json;

use super::part::Part;
use crate::store::Store;

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
}
